package facts

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseMetadataLocations(t *testing.T) {
	azure := func(location, zone string) string {
		return `{"azEnvironment":"AzurePublicCloud","location":"` + location + `","name":"vm1","tags":"","vmSize":"Standard_NC96ads_A100_v4","zone":"` + zone + `"}`
	}
	for _, tc := range []struct {
		name, section, text string
		exit                int
		want                Location
		warning             string // a substring of the one warning, "" for none
	}{
		{"ec2 availability zone", sectionEC2Location, "us-east-1a\nus-east-1\n", 0,
			Location{Region: "us-east-1", Zone: "us-east-1a", Source: SourceEC2Metadata}, ""},
		{"ec2 local zone", sectionEC2Location, "us-west-2-lax-1a\nus-west-2\n", 0,
			Location{Region: "us-west-2", Zone: "us-west-2-lax-1a", Source: SourceEC2Metadata}, ""},
		{"ec2 govcloud", sectionEC2Location, "us-gov-west-1b\nus-gov-west-1\n", 0,
			Location{Region: "us-gov-west-1", Zone: "us-gov-west-1b", Source: SourceEC2Metadata}, ""},
		{"ec2 zone of another region", sectionEC2Location, "eu-west-1a\nus-east-1\n", 0,
			Location{}, `unexpected availability zone "eu-west-1a" for region "us-east-1"`},
		{"ec2 region that is not one", sectionEC2Location, "x\n<html>\x1b[2J</html>\n", 0,
			Location{}, `unexpected region "<html>\x1b[2J</html>"`},
		{"ec2 one line", sectionEC2Location, "us-east-1a\n", 0, Location{}, "unexpected answer"},
		{"ec2 timeout", sectionEC2Location, "", 124, Location{}, "no answer in time (exit 124)"},
		{"ec2 bad token", sectionEC2Location, "", 2, Location{}, "session token is not one"},
		{"ec2 no client", sectionEC2Location, "", 127, Location{}, "neither curl nor wget"},
		{"ec2 connection refused", sectionEC2Location, "", 7, Location{}, "no location: exit 7"},
		{"azure zone", sectionAzureLoc, azure("eastus", "2"), 0,
			Location{Region: "eastus", Zone: "eastus-2", Source: SourceAzureMetadata}, ""},
		{"azure no zone", sectionAzureLoc, azure("westeurope", ""), 0,
			Location{Region: "westeurope", Source: SourceAzureMetadata}, ""},
		{"azure bad location", sectionAzureLoc, azure("East US", "1"), 0, Location{}, `unexpected location "East US"`},
		{"azure bad zone", sectionAzureLoc, azure("eastus", "1; rm -rf /"), 0, Location{}, `unexpected zone "1; rm -rf /"`},
		{"azure not json", sectionAzureLoc, "<html>\n", 0, Location{}, "unexpected answer"},
		{"azure huge", sectionAzureLoc, `{"location":"eastus","tags":"` + strings.Repeat("x", maxAzureCompute) + `"}`, 0,
			Location{}, "more than 65536: not read"},
		{"azure timeout", sectionAzureLoc, "", 124, Location{}, "no answer in time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := Parse(output(testNonce, true, frame{tc.section, tc.text, tc.exit}), testNonce)
			if h.Location != tc.want {
				t.Errorf("location %+v, want %+v", h.Location, tc.want)
			}
			var found []string
			for _, w := range h.Warnings {
				if strings.Contains(w, "metadata service") {
					found = append(found, w)
				}
			}
			switch {
			case tc.warning == "" && len(found) > 0:
				t.Errorf("warnings %q", found)
			case tc.warning != "" && (len(found) != 1 || !strings.Contains(found[0], strings.ReplaceAll(tc.warning, "\x1b", `\x1b`))):
				t.Errorf("warnings %q, want one with %q", found, tc.warning)
			}
			for _, w := range h.Warnings {
				if strings.ContainsRune(w, 0x1b) {
					t.Errorf("a warning quotes the machine raw: %q", w)
				}
			}
		})
	}
}

// A machine names one location; a second metadata section (which no run of
// the script prints) does not replace the first.
func TestParseKeepsTheFirstMetadataLocation(t *testing.T) {
	h := Parse(output(testNonce, true, frame{sectionGCEZone, "projects/1/zones/europe-west4-a", 0}, frame{sectionEC2Location, "us-east-1a\nus-east-1", 0}), testNonce)
	if h.Location.Source != SourceGCEMetadata || h.Location.Zone != "europe-west4-a" {
		t.Errorf("location %+v", h.Location)
	}
	if !strings.Contains(strings.Join(h.Warnings, "\n"), "EC2 instance metadata service: ignored") {
		t.Errorf("warnings %q", h.Warnings)
	}
}

// fakeMetadata is the instance metadata service of GCE, EC2 and Azure at
// once, on loopback, answering as each does, and counting what it was
// asked. delay holds every answer back (a service that does not answer in
// time); token is what the EC2 token request returns.
type fakeMetadata struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string
	delay    time.Duration
	token    string
}

const fakeToken = "AQAEAGxhbmQtdG9rZW4tZm9yLXRlc3Rz_w=="

func startFakeMetadata(t *testing.T, delay time.Duration, token string) *fakeMetadata {
	t.Helper()
	f := &fakeMetadata{delay: delay, token: token}
	// On loopback only (httptest listens on 127.0.0.1); Close waits for a
	// delayed handler, which ends when its client gives up.
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeMetadata) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path)
	f.mu.Unlock()
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-r.Context().Done():
			return
		}
	}
	ec2 := r.Header.Get("X-aws-ec2-metadata-token") == fakeToken
	switch {
	case r.URL.Path == "/computeMetadata/v1/instance/zone" && r.Header.Get("Metadata-Flavor") == "Google":
		w.Write([]byte("projects/123/zones/europe-west4-a"))
	case r.URL.Path == "/latest/api/token" && r.Method == http.MethodPut && r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds") == "21600":
		w.Write([]byte(f.token))
	case r.URL.Path == "/latest/meta-data/placement/availability-zone" && ec2:
		w.Write([]byte("eu-central-1b"))
	case r.URL.Path == "/latest/meta-data/placement/region" && ec2:
		w.Write([]byte("eu-central-1"))
	case r.URL.Path == "/metadata/instance/compute" && r.Header.Get("Metadata") == "true" && r.URL.Query().Get("api-version") == "2021-02-01":
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"location":"swedencentral","zone":"3","vmSize":"Standard_ND96isr_H100_v5"}`))
	default:
		// As IMDSv2 refuses a request without its token.
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}
}

func (f *fakeMetadata) asked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

// dmiDir writes a machine's DMI fields.
func dmiDir(t *testing.T, fields map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, v := range fields {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// metadataShells are the shells machines have as sh, each as a PATH
// directory with sh, timeout and the HTTP client (curl, or wget alone).
func metadataShells(t *testing.T, client string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, c := range []struct{ name, prog string }{{"dash", "dash"}, {"bash", "bash"}, {"busybox", "busybox"}} {
		path, err := exec.LookPath(c.prog)
		if err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed; .ci/run installs it", c.prog)
			}
			continue
		}
		if _, err := exec.LookPath(client); err != nil {
			t.Skipf("no %s", client)
		}
		bin := binWith(t, "uname", "timeout", client)
		if err := os.Symlink(path, filepath.Join(bin, "sh")); err != nil {
			t.Fatal(err)
		}
		out[c.name] = bin
	}
	return out
}

// runMetadataProbe runs probe.sh with the DMI and metadata service given,
// as runProbeIn does but keeping stderr (curl reports a timeout there).
func runMetadataProbe(t *testing.T, bin, dmi, url string) (Host, time.Duration, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "sh"), "-s", "--", testNonce)
	cmd.Stdin = strings.NewReader(Script())
	cmd.Env = []string{"PATH=" + bin, "GPULAYER_TEST_DMI_DIR=" + dmi, "GPULAYER_TEST_METADATA_URL=" + url}
	cmd.WaitDelay = 2 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	timer := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	start := time.Now()
	out, err := cmd.Output()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("probe script: %v\n%s", err, stderr.String())
	}
	return Parse(out, testNonce), took, stderr.String()
}

var (
	nitro      = map[string]string{"sys_vendor": "Amazon EC2", "board_vendor": "Amazon EC2", "product_name": "p5.48xlarge", "bios_version": "1.0"}
	xenEC2     = map[string]string{"sys_vendor": "Xen", "product_name": "HVM domU", "bios_version": "4.11.amazon"}
	azureVM    = map[string]string{"sys_vendor": "Microsoft Corporation", "product_name": "Virtual Machine", "chassis_asset_tag": "7783-7084-3265-9085-8269-3286-77"}
	hyperV     = map[string]string{"sys_vendor": "Microsoft Corporation", "product_name": "Virtual Machine", "chassis_asset_tag": "0000-0000-0000-0000-0000-0000-00"}
	gceVM      = map[string]string{"sys_vendor": "Google", "product_name": "Google Compute Engine"}
	bareMetal  = map[string]string{"sys_vendor": "Supermicro", "product_name": "SYS-821GE-TNHR", "bios_version": "2.1"}
	xenNoAmzn  = map[string]string{"sys_vendor": "Xen", "product_name": "HVM domU", "bios_version": "4.2"}
	noDMIField = map[string]string{}
)

// TestProbeAsksOnlyTheMetadataServiceItsDMINames runs probe.sh under each
// shell machines have as sh against a fake metadata service of all three
// clouds: a machine is asked about by its own cloud's protocol (IMDSv2's
// token first, then each value with it; Azure's Metadata header; GCE's
// Metadata-Flavor), and a machine whose DMI names no cloud, or another,
// asks nothing at all.
func TestProbeAsksOnlyTheMetadataServiceItsDMINames(t *testing.T) {
	for shell, bin := range metadataShells(t, "curl") {
		for _, tc := range []struct {
			name  string
			dmi   map[string]string
			want  Location
			asked []string
		}{
			{"ec2 nitro", nitro, Location{Region: "eu-central-1", Zone: "eu-central-1b", Source: SourceEC2Metadata},
				[]string{"PUT /latest/api/token", "GET /latest/meta-data/placement/availability-zone", "GET /latest/meta-data/placement/region"}},
			{"ec2 xen", xenEC2, Location{Region: "eu-central-1", Zone: "eu-central-1b", Source: SourceEC2Metadata},
				[]string{"PUT /latest/api/token", "GET /latest/meta-data/placement/availability-zone", "GET /latest/meta-data/placement/region"}},
			{"azure", azureVM, Location{Region: "swedencentral", Zone: "swedencentral-3", Source: SourceAzureMetadata},
				[]string{"GET /metadata/instance/compute"}},
			{"gce", gceVM, Location{Region: "europe-west4", Zone: "europe-west4-a", Source: SourceGCEMetadata},
				[]string{"GET /computeMetadata/v1/instance/zone"}},
			{"hyper-v outside azure", hyperV, Location{}, nil},
			{"bare metal", bareMetal, Location{}, nil},
			{"xen elsewhere", xenNoAmzn, Location{}, nil},
			{"no dmi fields", noDMIField, Location{}, nil},
		} {
			t.Run(shell+"/"+tc.name, func(t *testing.T) {
				md := startFakeMetadata(t, 0, fakeToken)
				h, _, stderr := runMetadataProbe(t, bin, dmiDir(t, tc.dmi), md.URL)
				if h.Location != tc.want {
					t.Errorf("location %+v, want %+v (warnings %q, stderr %q)", h.Location, tc.want, h.Warnings, stderr)
				}
				if got := md.asked(); strings.Join(got, "\n") != strings.Join(tc.asked, "\n") {
					t.Errorf("the metadata service was asked %q, want %q", got, tc.asked)
				}
				if stderr != "" {
					t.Errorf("stderr %q", stderr)
				}
			})
		}
		t.Run(shell+"/no dmi directory", func(t *testing.T) {
			md := startFakeMetadata(t, 0, fakeToken)
			h, _, _ := runMetadataProbe(t, bin, filepath.Join(t.TempDir(), "none"), md.URL)
			if got := md.asked(); len(got) != 0 || h.Location != (Location{}) {
				t.Errorf("asked %q, location %+v", got, h.Location)
			}
		})
	}
}

// TestProbeNeverSendsATokenThatIsNotOne: an IMDSv2 token that could carry
// a header of its own (a newline) or other bytes a token never has is not
// sent back: the values are not asked, and the section says why.
func TestProbeNeverSendsATokenThatIsNotOne(t *testing.T) {
	for shell, bin := range metadataShells(t, "curl") {
		for _, token := range []string{"AQAE\r\nX-Injected: 1", "a token", strings.Repeat("A", 600), ""} {
			t.Run(shell, func(t *testing.T) {
				md := startFakeMetadata(t, 0, token)
				h, _, _ := runMetadataProbe(t, bin, dmiDir(t, nitro), md.URL)
				if got := md.asked(); len(got) != 1 || got[0] != "PUT /latest/api/token" {
					t.Errorf("token %q: asked %q, want the token request only", token, got)
				}
				if h.Location != (Location{}) || !strings.Contains(strings.Join(h.Warnings, "\n"), "session token is not one") {
					t.Errorf("token %q: location %+v, warnings %q", token, h.Location, h.Warnings)
				}
			})
		}
	}
}

// TestProbeWaitsOneSecondForAMetadataService: a service that does not
// answer holds each request 1 s, not the probe: the probe ends, the host
// has no metadata location and a warning, and every other section is
// there.
func TestProbeWaitsOneSecondForAMetadataService(t *testing.T) {
	shells := metadataShells(t, "curl")
	bin, ok := shells["dash"]
	if !ok {
		for _, b := range shells {
			bin, ok = b, true
		}
	}
	if !ok {
		t.Skip("no shell")
	}
	for _, tc := range []struct {
		name    string
		dmi     map[string]string
		warning string
	}{
		{"ec2", nitro, "EC2 instance metadata service: no location"},
		{"azure", azureVM, "Azure instance metadata service: no location"},
		{"gce", gceVM, "GCE metadata server: no zone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := startFakeMetadata(t, 10*time.Second, fakeToken)
			h, took, _ := runMetadataProbe(t, bin, dmiDir(t, tc.dmi), md.URL)
			// One request asked (the token, for EC2), bounded to 1 s.
			if took < 900*time.Millisecond || took > 3*time.Second {
				t.Errorf("the probe took %s; want about 1 s", took)
			}
			if got := md.asked(); len(got) != 1 {
				t.Errorf("asked %q, want one request", got)
			}
			if h.Location != (Location{}) || !strings.Contains(strings.Join(h.Warnings, "\n"), tc.warning) || h.BootID == "" {
				t.Errorf("location %+v, warnings %q, boot id %q", h.Location, h.Warnings, h.BootID)
			}
		})
	}
}

// With GNU wget and no curl, the same requests are made the same way.
func TestProbeAsksTheMetadataServiceWithWget(t *testing.T) {
	out, err := exec.Command("wget", "--version").Output()
	if err != nil || !strings.Contains(string(out), "GNU Wget") {
		t.Skip("no GNU wget")
	}
	shells := metadataShells(t, "wget")
	for shell, bin := range shells {
		for _, tc := range []struct {
			name string
			dmi  map[string]string
			want Location
		}{
			{"ec2", nitro, Location{Region: "eu-central-1", Zone: "eu-central-1b", Source: SourceEC2Metadata}},
			{"azure", azureVM, Location{Region: "swedencentral", Zone: "swedencentral-3", Source: SourceAzureMetadata}},
		} {
			t.Run(shell+"/"+tc.name, func(t *testing.T) {
				md := startFakeMetadata(t, 0, fakeToken)
				h, _, stderr := runMetadataProbe(t, bin, dmiDir(t, tc.dmi), md.URL)
				if h.Location != tc.want {
					t.Errorf("location %+v, want %+v (warnings %q, stderr %q, asked %q)", h.Location, tc.want, h.Warnings, stderr, md.asked())
				}
			})
		}
	}
}

// A plan merges a probe's metadata claim with the configuration again
// (reconcile's hostLocation): every metadata source is a claim, others are
// not, and a region-only claim keeps a configured zone of its own region
// only.
func TestMetadataClaimsMergeAboveTheConfiguration(t *testing.T) {
	for _, src := range []string{SourceGCEMetadata, SourceEC2Metadata, SourceAzureMetadata} {
		if c := MetadataClaim(Location{Region: "r", Zone: "r-1", Source: src}); c != (LocationClaim{Source: src, Region: "r", Zone: "r-1"}) {
			t.Errorf("%s: claim %+v", src, c)
		}
	}
	if c := MetadataClaim(Location{Region: "r", Zone: "r-1", Source: SourceHost}); c != (LocationClaim{}) {
		t.Errorf("a host block's location is a metadata claim: %+v", c)
	}
	regional := LocationClaim{Source: SourceAzureMetadata, Region: "eastus"}
	for _, tc := range []struct {
		name        string
		host, fleet LocationClaim
		want        Location
	}{
		{"zone of its region", LocationClaim{Source: SourceHost, Zone: "eastus-2"}, LocationClaim{Source: SourceFleet, Region: "eastus"},
			Location{Region: "eastus", Zone: "eastus-2", Source: SourceAzureMetadata}},
		{"zone of another region", LocationClaim{Source: SourceHost, Zone: "westeurope-1", NetworkGroup: "rack-1"}, LocationClaim{Source: SourceFleet, Region: "westeurope"},
			Location{Region: "eastus", NetworkGroup: "rack-1", Source: SourceAzureMetadata}},
	} {
		host, fleet := BesideMetadata(regional, tc.host, tc.fleet)
		if got := ResolveLocation(regional, host, fleet); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

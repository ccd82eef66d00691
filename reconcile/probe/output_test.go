package probe_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/ssh"
	"github.com/gpulayer/gpulayer/ssh/sshtest"
)

// answer is a Runner that answers every probe with a result made from the
// probe's nonce, as a machine that ran (or did not run) the script would.
type answer func(nonce string) (ssh.Result, error)

func (a answer) Run(ctx context.Context, t ssh.Target, command string, stdin io.Reader) (ssh.Result, error) {
	nonce := regexp.MustCompile(`[0-9a-f]{24}`).FindString(command)
	return a(nonce)
}

// frames is the output of a probe that ran on a machine without GPUs, with
// the given GCE zone, or none.
func frames(nonce, gceZone string) []byte {
	var b strings.Builder
	section := func(name, text string) {
		fmt.Fprintf(&b, "==gpulayer:%s:begin:%s\n%s\n==gpulayer:%s:end:%s:0\n", nonce, name, text, nonce, name)
	}
	section("hostname", "vm-1")
	section("uname", "Linux 6.1.0 x86_64")
	if gceZone != "" {
		section("product_name", "Google Compute Engine")
		section("gce_zone", "projects/1/zones/"+gceZone)
	} else {
		section("product_name", "")
	}
	section("torch", "2.5.1")
	fmt.Fprintf(&b, "==gpulayer:%s:begin:gpus\n\n==gpulayer:%s:end:gpus:127\n", nonce, nonce)
	section("pids", "")
	section("boot_id", "e719aff4")
	fmt.Fprintf(&b, "==gpulayer:%s:done\n", nonce)
	return []byte(b.String())
}

func TestHostFailsAProbeThatIsNoProbe(t *testing.T) {
	flood := bytes.Repeat([]byte("x"), facts.MaxOutputBytes)
	tooLarge := fmt.Sprintf("reached %d bytes, the most a probe may write", facts.MaxOutputBytes)
	cases := []struct {
		name   string
		answer answer
		error  string
	}{
		{"prints nothing and exits 0", func(string) (ssh.Result, error) { return ssh.Result{}, nil },
			"the probe's output has none of its sections: it printed nothing"},
		{"prints a banner, stderr too", func(string) (ssh.Result, error) {
			return ssh.Result{Stdout: []byte("Welcome\n"), Stderr: []byte("this account is locked\n")}, nil
		}, `none of its sections: it printed "Welcome": this account is locked`},
		{"floods stdout after its sections", func(n string) (ssh.Result, error) {
			return ssh.Result{Stdout: append(frames(n, ""), flood...)}, nil
		}, "the probe's stdout " + tooLarge},
		{"floods stderr, and the pool said so", func(string) (ssh.Result, error) {
			return ssh.Result{Stderr: flood}, fmt.Errorf("host m: command wrote more than %d bytes to stderr", facts.MaxOutputBytes)
		}, "the probe's stderr " + tooLarge + " (a real one writes about 10 KB): host m: command wrote more than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := probe.Host(context.Background(), c.answer, probe.Machine{Name: "m"}, probe.Options{})
			if h.Status != facts.StatusFailed || !strings.Contains(h.Error, c.error) {
				t.Fatalf("status %q error %q; want failed with %q", h.Status, h.Error, c.error)
			}
			if h.Hostname != "" || len(h.GPUs) != 0 || h.GPUs == nil {
				t.Errorf("a failed host keeps facts: hostname %q, GPUs %v", h.Hostname, h.GPUs)
			}
		})
	}
}

func TestHostWarnsWhenGCEMetadataContradictsTheConfiguration(t *testing.T) {
	cases := []struct {
		name         string
		host, fleet  facts.LocationClaim
		provider     *facts.LocationClaim
		warning      string
		zone, source string
	}{
		{"zone of another region", facts.LocationClaim{Zone: "europe-west1-b"}, facts.LocationClaim{Region: "europe-west1"}, nil,
			`the machine's GCE metadata names region "us-central1" where the configuration says "europe-west1" and zone "us-central1-a" where the configuration says "europe-west1-b"; the metadata is used, as it ranks above the configuration`,
			"us-central1-a", facts.SourceGCEMetadata},
		{"another zone of the region", facts.LocationClaim{}, facts.LocationClaim{Region: "us-central1", Zone: "us-central1-f"}, nil,
			`the machine's GCE metadata names zone "us-central1-a" where the configuration says "us-central1-f"; the metadata is used, as it ranks above the configuration`,
			"us-central1-a", facts.SourceGCEMetadata},
		{"the same zone", facts.LocationClaim{Zone: "us-central1-a", NetworkGroup: "rack-1"}, facts.LocationClaim{}, nil, "", "us-central1-a", facts.SourceGCEMetadata},
		{"silent configuration", facts.LocationClaim{}, facts.LocationClaim{}, nil, "", "us-central1-a", facts.SourceGCEMetadata},
		{"a provider's record wins", facts.LocationClaim{Zone: "europe-west1-b"}, facts.LocationClaim{},
			&facts.LocationClaim{Region: "europe-west4", Zone: "europe-west4-a"}, "", "europe-west4-a", facts.SourceProvider},
	}
	gce := answer(func(n string) (ssh.Result, error) { return ssh.Result{Stdout: frames(n, "us-central1-a")}, nil })
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := probe.Machine{Name: "m", Host: c.host, FleetDefaults: c.fleet, Provider: c.provider}
			h := probe.Host(context.Background(), gce, m, probe.Options{})
			if h.Status != facts.StatusOK {
				t.Fatalf("status %q: %s", h.Status, h.Error)
			}
			var got []string
			for _, w := range h.Warnings {
				if strings.Contains(w, "metadata") {
					got = append(got, w)
				}
			}
			if want := []string{c.warning}; (c.warning == "" && len(got) != 0) || (c.warning != "" && (len(got) != 1 || got[0] != want[0])) {
				t.Errorf("warnings %q, want %q", got, c.warning)
			}
			if h.Location.Zone != c.zone || h.Location.Source != c.source {
				t.Errorf("location %+v, want zone %s from %s", h.Location, c.zone, c.source)
			}
		})
	}
}

// floodingMachine writes n bytes to stdout for any command.
type floodingMachine int

func (n floodingMachine) Run(ctx context.Context, command string, env []string, dir string,
	stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	io.Copy(io.Discard, stdin)
	chunk := bytes.Repeat([]byte("y"), 64<<10)
	for left := int(n); left > 0 && ctx.Err() == nil; left -= len(chunk) {
		if _, err := stdout.Write(chunk[:min(left, len(chunk))]); err != nil {
			return 1, nil
		}
	}
	return 0, nil
}

// A pool made with MaxOutputBytes of facts.MaxOutputBytes, as gpulayer
// makes it, keeps no more of a flooding machine than that, and the
// machine is failed for it.
func TestFleetFailsAMachineThatFloodsAPoolCappedAtTheProbeLimit(t *testing.T) {
	dir := t.TempDir()
	keyFile, pub := writeClientKey(t, dir)
	srv, err := sshtest.Start(sshtest.Options{AuthorizedKeys: []gossh.PublicKey{pub}, Runner: floodingMachine(3 * facts.MaxOutputBytes)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	knownHosts := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(knownHosts, []byte(srv.KnownHostsLine("127.0.0.1")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := probe.Machine{Name: "flood", Target: ssh.Target{Name: "flood", Address: "127.0.0.1", Port: srv.Port, User: "u",
		IdentityFiles: []string{keyFile}, KnownHostsFile: knownHosts, HostKeyCheck: "strict", ConnectTimeout: 10 * time.Second}}
	pool := ssh.NewPool(ssh.Options{MaxOutputBytes: facts.MaxOutputBytes, NoAgent: true})
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := probe.Fleet(ctx, pool, []probe.Machine{m}, probe.Options{Timeout: 30 * time.Second}).Hosts[0]
	if h.Status != facts.StatusFailed || !strings.Contains(h.Error, "the probe's stdout reached 1048576 bytes") {
		t.Fatalf("status %q error %q", h.Status, h.Error)
	}
}

// withSection is probe output (frames) with one more section, given
// before the end marker.
func withSection(nonce, name, text string) []byte {
	out := string(frames(nonce, ""))
	done := "==gpulayer:" + nonce + ":done\n"
	return []byte(strings.TrimSuffix(out, done) + "==gpulayer:" + nonce + ":begin:" + name + "\n" + text + "\n==gpulayer:" + nonce + ":end:" + name + ":0\n" + done)
}

// EC2's and Azure's metadata rank as GCE's does: above the configuration,
// with a warning naming the service when they disagree; an Azure VM in no
// zone keeps a configured zone only of its own region.
func TestHostTakesEC2AndAzureMetadataAboveTheConfiguration(t *testing.T) {
	ec2 := answer(func(n string) (ssh.Result, error) {
		return ssh.Result{Stdout: withSection(n, "ec2_location", "us-east-1a\nus-east-1")}, nil
	})
	azureZonal := answer(func(n string) (ssh.Result, error) {
		return ssh.Result{Stdout: withSection(n, "azure_location", `{"location":"eastus","zone":"2"}`)}, nil
	})
	azureRegional := answer(func(n string) (ssh.Result, error) {
		return ssh.Result{Stdout: withSection(n, "azure_location", `{"location":"eastus","zone":""}`)}, nil
	})
	cases := []struct {
		name                 string
		machine              answer
		host, fleet          facts.LocationClaim
		warning              string
		region, zone, source string
	}{
		{"ec2 another region", ec2, facts.LocationClaim{}, facts.LocationClaim{Region: "eu-west-1", Zone: "eu-west-1a"},
			`the machine's EC2 metadata names region "us-east-1" where the configuration says "eu-west-1" and zone "us-east-1a" where the configuration says "eu-west-1a"; the metadata is used, as it ranks above the configuration`,
			"us-east-1", "us-east-1a", facts.SourceEC2Metadata},
		{"ec2 agrees", ec2, facts.LocationClaim{Zone: "us-east-1a", NetworkGroup: "pg-1"}, facts.LocationClaim{Region: "us-east-1"}, "",
			"us-east-1", "us-east-1a", facts.SourceEC2Metadata},
		{"azure zone", azureZonal, facts.LocationClaim{}, facts.LocationClaim{Region: "eastus", Zone: "eastus-1"},
			`the machine's Azure metadata names zone "eastus-2" where the configuration says "eastus-1"; the metadata is used, as it ranks above the configuration`,
			"eastus", "eastus-2", facts.SourceAzureMetadata},
		{"azure no zone, the configuration's of its region", azureRegional, facts.LocationClaim{Zone: "eastus-3"}, facts.LocationClaim{Region: "eastus"}, "",
			"eastus", "eastus-3", facts.SourceAzureMetadata},
		{"azure no zone, the configuration's of another region", azureRegional, facts.LocationClaim{}, facts.LocationClaim{Region: "westeurope", Zone: "westeurope-1"},
			`the machine's Azure metadata names region "eastus" where the configuration says "westeurope"; the metadata is used, as it ranks above the configuration`,
			"eastus", "", facts.SourceAzureMetadata},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := probe.Machine{Name: "m", Host: c.host, FleetDefaults: c.fleet}
			h := probe.Host(context.Background(), c.machine, m, probe.Options{})
			if h.Status != facts.StatusOK {
				t.Fatalf("status %q: %s", h.Status, h.Error)
			}
			var got []string
			for _, w := range h.Warnings {
				if strings.Contains(w, "metadata") {
					got = append(got, w)
				}
			}
			if (c.warning == "" && len(got) != 0) || (c.warning != "" && (len(got) != 1 || got[0] != c.warning)) {
				t.Errorf("warnings %q, want %q", got, c.warning)
			}
			if h.Location.Region != c.region || h.Location.Zone != c.zone || h.Location.Source != c.source {
				t.Errorf("location %+v, want %s/%s from %s", h.Location, c.region, c.zone, c.source)
			}
		})
	}
}

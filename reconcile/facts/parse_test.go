package facts

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const testNonce = "0123456789abcdef01234567"

// frame builds probe output the way probe.sh frames it.
type frame struct {
	name, text string
	exit       int
}

func output(nonce string, done bool, frames ...frame) []byte {
	var b strings.Builder
	for _, f := range frames {
		fmt.Fprintf(&b, "==gpulayer:%s:begin:%s\n%s\n==gpulayer:%s:end:%s:%d\n", nonce, f.name, f.text, nonce, f.name, f.exit)
	}
	if done {
		fmt.Fprintf(&b, "==gpulayer:%s:done\n", nonce)
	}
	return []byte(b.String())
}

func readTopo(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "topo", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dgxA100 is a DGX A100 with one process on GPU 2 and two on GPU 5.
func dgxA100(t *testing.T) []frame {
	var gpus strings.Builder
	for i := 0; i < 8; i++ {
		used := 0
		if i == 2 || i == 5 {
			used = 30000
		}
		fmt.Fprintf(&gpus, "%d, GPU-a100-%d, NVIDIA A100-SXM4-80GB, 00000000:%02X:00.0, 81920, %d, 525.105.17\n", i, i, 0x07+i*0x10, used)
	}
	return []frame{
		{sectionHostname, "dgx-01\n", 0},
		{sectionUname, "Linux 5.15.0-91-generic x86_64\n", 0},
		{sectionProductName, "DGXA100 920-23687-2530-000\n", 0},
		{sectionTorch, "2.5.1+cu124\n", 0},
		{sectionGPUs, gpus.String(), 0},
		{sectionComputeApps, "GPU-a100-5, 4242, 20000\nGPU-a100-2, 777, 30000\nGPU-a100-5, 4241, [N/A]\n", 0},
		{sectionRunIDs, "4242 r0123456789abcdef\n777 -\n4241 r0123456789abcdef\n", 0},
		{sectionTopo, readTopo(t, "dgx-a100-8x-nv12-8nic-mlx5.txt"), 0},
		{sectionPIDs, "777 777 (python3 (train)) R 1 777 777 0 -1 4194560 1 0 0 0 5 1 0 0 20 0 1 0 123456 1 1\n4243 - 137\n4244 - ?\n", 0},
		{sectionLogPrefix + "4243", "epoch 1\nRuntimeError: CUDA out of memory\n", 0},
		{sectionBootID, "e719aff4-b24e-414a-b3a9-c9712c27a37c\n", 0},
	}
}

func TestParseReadsEverySectionOfAMachine(t *testing.T) {
	frames := dgxA100(t)
	h := Parse(output(testNonce, true, frames...), testNonce)
	if len(h.Warnings) != 0 {
		t.Fatalf("warnings: %q", h.Warnings)
	}
	checks := []struct{ field, got, want string }{
		{"status", h.Status, StatusOK},
		{"hostname", h.Hostname, "dgx-01"},
		{"kernel", h.Kernel, "Linux 5.15.0-91-generic"},
		{"arch", h.Arch, "x86_64"},
		{"product", h.ProductName, "DGXA100 920-23687-2530-000"},
		{"torch", h.TorchVersion, "2.5.1+cu124"},
		{"driver", h.CUDADriverVersion, "525.105.17"},
		{"boot id", h.BootID, "e719aff4-b24e-414a-b3a9-c9712c27a37c"},
		{"topology raw", h.TopologyRaw, frames[7].text},
		{"location source", h.Location.Source, ""},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.field, c.got, c.want)
		}
	}
	if len(h.GPUs) != 8 || h.GPUs[7].PCIBusID != "00000000:77:00.0" || h.GPUs[2].MemoryUsedMiB != 30000 {
		t.Fatalf("gpus: %+v", h.GPUs)
	}
	wantApps := map[int][]Process{2: {{PID: 777, UsedMemoryMiB: 30000}}, 5: {{PID: 4241, RunID: "r0123456789abcdef"}, {PID: 4242, UsedMemoryMiB: 20000, RunID: "r0123456789abcdef"}}}
	for _, g := range h.GPUs {
		if len(wantApps[g.Index]) == 0 && len(g.Processes) == 0 {
			continue
		}
		if !reflect.DeepEqual(g.Processes, wantApps[g.Index]) {
			t.Errorf("GPU %d processes %+v, want %+v", g.Index, g.Processes, wantApps[g.Index])
		}
	}
	if want := []int{0, 1, 3, 4, 6, 7}; !reflect.DeepEqual(h.FreeGPUs, want) {
		t.Errorf("free GPUs %v, want %v", h.FreeGPUs, want)
	}
	status := 137
	wantPIDs := []PID{{PID: 777, Alive: true, StartTime: 123456},
		{PID: 4243, ExitStatus: &status, LogTail: []string{"epoch 1", "RuntimeError: CUDA out of memory"}}, {PID: 4244}}
	if !reflect.DeepEqual(h.PIDs, wantPIDs) {
		t.Errorf("pids %+v, want %+v", h.PIDs, wantPIDs)
	}
	if h.Topology.GPUs() != 8 {
		t.Errorf("topology has %d GPUs", h.Topology.GPUs())
	}
}

func TestParseWarnsInsteadOfFailing(t *testing.T) {
	base := dgxA100(t)
	without := func(name string) []frame {
		var out []frame
		for _, f := range base {
			if f.name != name {
				out = append(out, f)
			}
		}
		return out
	}
	replace := func(fr frame) []frame {
		out := append([]frame(nil), base...)
		for i := range out {
			if out[i].name == fr.name {
				out[i] = fr
			}
		}
		return out
	}
	cases := []struct {
		name     string
		frames   []frame
		done     bool
		warning  string
		gpus     int
		checkFn  func(Host) string
		topology bool
	}{
		{"missing torch section", without(sectionTorch), true, "section torch is missing", 8, nil, true},
		{"no end marker", base, false, "ended before its end marker", 8, nil, true},
		{"no nvidia-smi", replace(frame{sectionGPUs, "", exitNotFound}), true, "nvidia-smi not found: no GPUs", 0, nil, false},
		{"nvidia-smi fails", replace(frame{sectionGPUs, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", 9}), true, "couldn't communicate", 0, nil, false},
		{"query timed out", replace(frame{sectionGPUs, "", exitTimeout}), true, "timed out", 0, nil, false},
		{"no python3", replace(frame{sectionTorch, "", exitNotFound}), true, "python3 not found", 8, nil, true},
		{"no torch", replace(frame{sectionTorch, "", exitNoTorch}), true, "torch is not installed", 8, nil, true},
		{"topology fails", replace(frame{sectionTopo, "", 4}), true, "topo -m failed (exit 4)", 8, nil, false},
		{"topology unreadable", replace(frame{sectionTopo, "no matrix here\n", 0}), true, "nvidia-smi topo -m:", 8, nil, false},
		{"short gpu row", replace(frame{sectionGPUs, "0, GPU-x, 00000000:07:00.0\n", 0}), true, "want 7 fields", 0, nil, true},
		{"unknown uuid", replace(frame{sectionComputeApps, "GPU-nope, 12, 100\n", 0}), true, "unknown GPU", 8, nil, true},
		{"memory not reported", replace(frame{sectionGPUs, "0, GPU-x, NVIDIA GB10, 0000000F:01:00.0, [N/A], [N/A], 580.95.05\n", 0}), true, "memory.total is [N/A] (memory shared with the CPU?): counted as 0 MiB", 1, nil, true},
		{"memory not a number", replace(frame{sectionGPUs, "0, GPU-x, A100, 00000000:07:00.0, 80 GiB, 0, 1\n", 0}), true, `memory.total "80 GiB" is not a MiB count`, 1, nil, true},
		{"uname garbage", replace(frame{sectionUname, "", 127}), true, "uname -srm", 8, nil, true},
		{"gce without zone", replace(frame{sectionProductName, "Google Compute Engine\n", 0}), true, "metadata zone was not asked", 8, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := Parse(output(testNonce, c.done, c.frames...), testNonce)
			if h.Status != StatusOK {
				t.Errorf("status %q", h.Status)
			}
			if !strings.Contains(strings.Join(h.Warnings, "\n"), c.warning) {
				t.Errorf("warnings %q lack %q", h.Warnings, c.warning)
			}
			if len(h.GPUs) != c.gpus {
				t.Errorf("%d GPUs, want %d", len(h.GPUs), c.gpus)
			}
			if (h.Topology != nil) != c.topology {
				t.Errorf("topology parsed: %v, want %v", h.Topology != nil, c.topology)
			}
			if h.GPUs == nil || h.FreeGPUs == nil {
				t.Errorf("nil slices would print as null")
			}
		})
	}
}

func TestParseIgnoresFramesWithAnotherNonce(t *testing.T) {
	// A machine that prints frame lines of its own cannot end a section or
	// add one: only frames with this run's nonce count.
	forged := "GPU0 X\n==gpulayer:deadbeef:end:topo:0\n==gpulayer:deadbeef:begin:hostname\nevil\n"
	frames := dgxA100(t)
	frames[7].text = forged
	h := Parse(output(testNonce, true, frames...), testNonce)
	if h.Hostname != "dgx-01" || h.TopologyRaw != forged {
		t.Fatalf("hostname %q, topology raw %q", h.Hostname, h.TopologyRaw)
	}
}

func TestParseKeepsWhatArrivedFromACutOffSection(t *testing.T) {
	out := output(testNonce, false, dgxA100(t)[:4]...)
	out = append(out, "==gpulayer:"+testNonce+":begin:gpus\n0, GPU-a, A100, 00000000:07:00.0, 81920, 0, 525.1\n"...)
	h := Parse(out, testNonce)
	all := strings.Join(h.Warnings, "\n")
	for _, w := range []string{"section gpus was cut off", "section pids is missing", "section boot_id is missing"} {
		if !strings.Contains(all, w) {
			t.Errorf("warnings %q lack %q", h.Warnings, w)
		}
	}
	if h.TorchVersion != "2.5.1+cu124" {
		t.Errorf("torch %q", h.TorchVersion)
	}
}

func TestParseTakesTheZoneFromGCEMetadata(t *testing.T) {
	frames := dgxA100(t)
	frames[2].text = "Google Compute Engine\n"
	frames = append(frames, frame{sectionGCEZone, "projects/123456789/zones/europe-west4-a", 0})
	h := Parse(output(testNonce, true, frames...), testNonce)
	want := Location{Region: "europe-west4", Zone: "europe-west4-a", Source: SourceGCEMetadata}
	if h.Location != want {
		t.Fatalf("location %+v, want %+v", h.Location, want)
	}
	frames[len(frames)-1] = frame{sectionGCEZone, "", 28}
	h = Parse(output(testNonce, true, frames...), testNonce)
	if h.Location != (Location{}) || !strings.Contains(strings.Join(h.Warnings, "\n"), "no zone (exit 28)") {
		t.Fatalf("location %+v warnings %q", h.Location, h.Warnings)
	}
}

func TestParseStatCountsFieldsAfterTheLastParenthesis(t *testing.T) {
	cases := []struct {
		stat, state string
		start       uint64
		ok          bool
	}{
		{"1 (systemd) S 0 1 1 0 -1 4194560 1 0 0 0 5 1 0 0 20 0 1 0 42 1 1", "S", 42, true},
		{"9 (a) b) (c) Z 0 1 1 0 -1 4194560 1 0 0 0 5 1 0 0 20 0 1 0 7 1 1", "Z", 7, true},
		{"9 no parens", "", 0, false},
		{"9 (x) R 1 2", "", 0, false},
	}
	for _, c := range cases {
		state, start, err := parseStat(c.stat)
		if state != c.state || start != c.start || (err == nil) != c.ok {
			t.Errorf("parseStat(%q) = %q, %d, %v", c.stat, state, start, err)
		}
	}
}

func TestResolveLocationFollowsTrust(t *testing.T) {
	provider := LocationClaim{Source: SourceProvider, Region: "europe-west1", Zone: "europe-west1-b"}
	gce := LocationClaim{Source: SourceGCEMetadata, Region: "us-central1", Zone: "us-central1-a"}
	host := LocationClaim{Source: SourceHost, Zone: "paris-1", NetworkGroup: "rack-3"}
	fleet := LocationClaim{Source: SourceFleet, Region: "paris", NetworkGroup: "rack-1"}
	cases := []struct {
		name   string
		claims []LocationClaim
		want   Location
	}{
		{"provider beats the machine", []LocationClaim{provider, gce, host, fleet}, Location{"europe-west1", "europe-west1-b", "rack-3", SourceProvider}},
		{"metadata beats the configuration", []LocationClaim{{}, gce, host, fleet}, Location{"us-central1", "us-central1-a", "rack-3", SourceGCEMetadata}},
		{"host block over fleet defaults", []LocationClaim{host, fleet}, Location{"paris", "paris-1", "rack-3", SourceHost}},
		{"fleet defaults alone", []LocationClaim{{Source: SourceHost}, fleet}, Location{"paris", "", "rack-1", SourceFleet}},
		{"nothing known", []LocationClaim{{Source: SourceHost}}, Location{}},
	}
	for _, c := range cases {
		if got := ResolveLocation(c.claims...); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestParseCutsFieldsLongerThanTheLimit(t *testing.T) {
	long := strings.Repeat("é", 200_000) // 400 KB, two bytes a rune
	frames := dgxA100(t)
	frames[0].text = long + "\n"
	frames[4].text = "0, GPU-a100-0, " + long + ", 00000000:07:00.0, 81920, 0, 525.105.17\n"
	frames[5].text = ""
	h := Parse(output(testNonce, true, frames...), testNonce)
	for _, c := range []struct{ field, got string }{{"hostname", h.Hostname}, {"GPU 0 name", h.GPUs[0].Name}} {
		if len(c.got) > MaxFieldBytes || !strings.HasSuffix(c.got, "é…") {
			t.Errorf("%s is %d bytes ending %q; want at most %d ending in é…", c.field, len(c.got), c.got[max(0, len(c.got)-8):], MaxFieldBytes)
		}
		want := fmt.Sprintf("%s is %d bytes long: cut to %d", c.field, len(long), MaxFieldBytes)
		if !slices.Contains(h.Warnings, want) {
			t.Errorf("warnings %q lack %q", h.Warnings, want)
		}
	}
}

func TestParseReadsAtMostMaxGPUsRows(t *testing.T) {
	// As many rows as fit in MaxOutputBytes.
	var rows strings.Builder
	for i := range 50_000 {
		fmt.Fprintf(&rows, "%d,U%d,A,B,1,0,D\n", i%MaxGPUs, i)
	}
	frames := dgxA100(t)
	frames[4].text = rows.String()
	frames[5].text = ""
	h := Parse(output(testNonce, true, frames...), testNonce)
	if len(h.GPUs) != MaxGPUs {
		t.Errorf("%d GPUs kept, want %d", len(h.GPUs), MaxGPUs)
	}
	want := fmt.Sprintf("nvidia-smi --query-gpu: 50000 rows, more than the %d gpulayer reads; the rest are ignored", MaxGPUs)
	if !slices.Contains(h.Warnings, want) {
		t.Errorf("warnings %q lack %q", h.Warnings, want)
	}
}

func TestParseKeepsAtMostMaxWarnings(t *testing.T) {
	frames := dgxA100(t)
	frames[4].text = strings.Repeat("x\n", 60) // 60 short rows
	frames[5].text = strings.Repeat("GPU-nope, 1, 1\n", 1000)
	frames[7].text = strings.Repeat("nan -\n", 1000)
	h := Parse(output(testNonce, true, frames...), testNonce)
	if len(h.Warnings) != MaxWarnings+1 || h.Warnings[MaxWarnings] != warningsDropped {
		t.Fatalf("%d warnings, the last %q; want %d and %q", len(h.Warnings), h.Warnings[len(h.Warnings)-1], MaxWarnings+1, warningsDropped)
	}
}

func TestParseReadsNoMoreThanMaxOutputBytes(t *testing.T) {
	frames := dgxA100(t)
	frames[7].text = strings.Repeat(" \n", MaxOutputBytes/2)
	out := output(testNonce, true, frames...)
	h := Parse(out, testNonce)
	want := fmt.Sprintf("the probe's output is %d bytes, more than %d: only the first %d are read", len(out), MaxOutputBytes, MaxOutputBytes)
	if !slices.Contains(h.Warnings, want) || !slices.Contains(h.Warnings, "section boot_id is missing from the probe's output") {
		t.Fatalf("warnings %q lack %q and a missing boot_id", h.Warnings, want)
	}
}

func TestParseFailsOutputWithNoneOfItsSections(t *testing.T) {
	cases := []struct {
		name, output, error string
	}{
		{"nothing", "", "the probe's output has none of its sections: it printed nothing"},
		{"a banner", "\nThis account is for backups only.\n", `the probe's output has none of its sections: it printed "This account is for backups only."`},
		{"frames of another nonce", string(output("ffff", true, dgxA100(t)...)), "the probe's output has none of its sections: it printed \"==gpulayer:ffff:begin:hostname\""},
	}
	for _, c := range cases {
		h := Parse([]byte(c.output), testNonce)
		if h.Status != StatusFailed || h.Error != c.error {
			t.Errorf("%s: status %q error %q; want failed, %q", c.name, h.Status, h.Error, c.error)
		}
	}
}

// TestAGPUProcessThatEndedBeforeItsRunWasReadHoldsNoGPU: nvidia-smi
// listed pids 777 (GPU 2) and 4241 (GPU 5); both were gone from /proc
// when the probe read their environments. Asked again, nvidia-smi no
// longer lists 777 (it ended: GPU 2 is free) and still lists 4241 (a
// process of another pid namespace: GPU 5 stays busy, a stranger's).
func TestAGPUProcessThatEndedBeforeItsRunWasReadHoldsNoGPU(t *testing.T) {
	frames := dgxA100(t)
	for i := range frames {
		if frames[i].name == sectionRunIDs {
			frames[i].text = "4242 r0123456789abcdef\n777 gone\n4241 gone\n"
		}
	}
	recheck := frame{sectionAppsRecheck, "GPU-a100-5, 4242, 20000\nGPU-a100-5, 4241, [N/A]\n", 0}
	h := Parse(output(testNonce, true, append(frames, recheck)...), testNonce)
	if len(h.GPUs[2].Processes) != 0 || !slices.Contains(h.FreeGPUs, 2) {
		t.Errorf("GPU 2: processes %+v, free %v; the process that ended holds it", h.GPUs[2].Processes, h.FreeGPUs)
	}
	if len(h.GPUs[5].Processes) != 2 || h.GPUs[5].Processes[0].PID != 4241 || h.GPUs[5].Processes[0].RunID != "" || slices.Contains(h.FreeGPUs, 5) {
		t.Errorf("GPU 5: processes %+v, free %v; want 4241 kept as a stranger's", h.GPUs[5].Processes, h.FreeGPUs)
	}
	// Without the second look, a gone process is taken as holding its GPU.
	h = Parse(output(testNonce, true, frames...), testNonce)
	if len(h.GPUs[2].Processes) != 1 || slices.Contains(h.FreeGPUs, 2) {
		t.Errorf("without a recheck GPU 2: %+v, free %v", h.GPUs[2].Processes, h.FreeGPUs)
	}
}

// TestParseNamesTheRunFilesThatAreNotRegularFiles: an ended process's line
// may name its node's files that the probe left unread, exit and log;
// each is recorded and warned about once, and a word the probe never
// prints is a warning, not a file.
func TestParseNamesTheRunFilesThatAreNotRegularFiles(t *testing.T) {
	h := Parse(output(testNonce, true, frame{sectionPIDs, "4243 - ? exit log\n4244 - 3 log log\n4245 - 0 fifo\n", 0}), testNonce)
	three, zero := 3, 0
	want := []PID{{PID: 4243, NotRegular: []string{NodeFileExit, NodeFileLog}}, {PID: 4244, ExitStatus: &three, NotRegular: []string{NodeFileLog}}, {PID: 4245, ExitStatus: &zero}}
	if !reflect.DeepEqual(h.PIDs, want) {
		t.Errorf("pids %+v, want %+v", h.PIDs, want)
	}
	var notRegular, unknown int
	for _, w := range h.Warnings {
		if strings.Contains(w, "not a regular file") {
			notRegular++
		}
		if strings.Contains(w, `unknown file "fifo"`) {
			unknown++
		}
	}
	if notRegular != 3 || unknown != 1 {
		t.Errorf("warnings %q", h.Warnings)
	}
}

// TestParseTellsAMissingTorchrunFromAnUnknownOne: the path where the
// probe found torchrun; "" where it found none; unknown (nil) where the
// output has no complete torchrun section, as output recorded before the
// probe asked, with no warning for that.
func TestParseTellsAMissingTorchrunFromAnUnknownOne(t *testing.T) {
	base := dgxA100(t)
	with := func(fr frame) []frame { return append(slices.Clone(base), fr) }
	found := Parse(output(testNonce, true, with(frame{sectionTorchrun, "/usr/bin/torchrun\n", 0})...), testNonce)
	if found.Torchrun == nil || *found.Torchrun != "/usr/bin/torchrun" || len(found.Warnings) != 0 {
		t.Errorf("found: torchrun %s, warnings %q", pathOf(found.Torchrun), found.Warnings)
	}
	missing := Parse(output(testNonce, true, with(frame{sectionTorchrun, "", 1})...), testNonce)
	if missing.Torchrun == nil || *missing.Torchrun != "" || len(missing.Warnings) != 0 {
		t.Errorf("missing: torchrun %s, warnings %q", pathOf(missing.Torchrun), missing.Warnings)
	}
	unknown := Parse(output(testNonce, true, base...), testNonce)
	if unknown.Torchrun != nil || len(unknown.Warnings) != 0 {
		t.Errorf("not asked: torchrun %s, warnings %q; want unknown, no warning", pathOf(unknown.Torchrun), unknown.Warnings)
	}
	cut := []byte(string(output(testNonce, false, base...)) + "==gpulayer:" + testNonce + ":begin:torchrun\n/usr/bi")
	if h := Parse(cut, testNonce); h.Torchrun != nil {
		t.Errorf("cut off: torchrun %s, want unknown", pathOf(h.Torchrun))
	}
}

func pathOf(p *string) string {
	if p == nil {
		return "unknown"
	}
	return strconv.Quote(*p)
}

package facts

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// fakeNvidiaSMI answers the probe's nvidia-smi calls for a 2-GPU
// machine with one process on GPU 1, and reports text it finds on its
// standard input: the probe script must never be readable there.
const fakeNvidiaSMI = `#!/bin/sh
leak=$(cat)
[ -z "$leak" ] || echo "stdin leaked: $leak" >&2
case "$*" in
*--query-gpu=*) printf '0, GPU-0, NVIDIA GeForce RTX 3090, 00000000:01:00.0, 24576, 3, 550.90.07\n1, GPU-1, NVIDIA GeForce RTX 3090, 00000000:02:00.0, 24576, 20001, 550.90.07\n' ;;
*--query-compute-apps=*) printf 'GPU-1, 4242, 19998\n' ;;
"topo -m") cat "$TOPO" ;;
-q) printf 'GPU 00000000:01:00.0\n    Product Name : NVIDIA GeForce RTX 3090\n    Fabric\n        State : N/A\n        Status : N/A\n' ;;
*) exit 2 ;;
esac
`

// runScript runs probe.sh with sh, as an SSH session would, with PATH set
// to bin only.
func runScript(t *testing.T, bin string, env []string, args ...string) []byte {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	cmd := exec.Command(sh, append([]string{"-s", "--", testNonce}, args...)...)
	cmd.Stdin = strings.NewReader(Script())
	cmd.Env = append([]string{"PATH=" + bin}, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe script: %v\n%s", err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("probe script wrote to stderr: %s", stderr.String())
	}
	return out
}

// binWith returns a PATH directory holding links to the named system
// commands.
func binWith(t *testing.T, commands ...string) string {
	t.Helper()
	bin := t.TempDir()
	for _, c := range commands {
		p, err := exec.LookPath(c)
		if err != nil {
			continue // optional on this computer; the script copes
		}
		if err := os.Symlink(p, filepath.Join(bin, c)); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

func TestScriptReportsGPUsProcessesAndTopology(t *testing.T) {
	bin := binWith(t, "uname", "timeout", "cat")
	if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(fakeNvidiaSMI), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "torchrun"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	topoFile := filepath.Join("..", "..", "testdata", "topo", "3x-rtx-a6000-nv4-pair-ansi-escapes-tabs.txt")
	raw, err := os.ReadFile(topoFile)
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(topoFile)
	self := os.Getpid()
	out := runScript(t, bin, []string{"TOPO=" + abs}, strconv.Itoa(self), "2147483646", "12; rm -rf /", "")
	h := Parse(out, testNonce)

	if h.TopologyRaw != string(raw) {
		t.Errorf("topology raw text is not the command's exact output:\n%q\nwant\n%q", h.TopologyRaw, raw)
	}
	if len(h.GPUs) != 2 || h.GPUs[1].Processes[0] != (Process{PID: 4242, UsedMemoryMiB: 19998}) {
		t.Errorf("gpus %+v", h.GPUs)
	}
	if !reflect.DeepEqual(h.FreeGPUs, []int{0}) {
		t.Errorf("free %v", h.FreeGPUs)
	}
	want, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if h.BootID != strings.TrimSpace(string(want)) || h.BootID == "" {
		t.Errorf("boot id %q", h.BootID)
	}
	host, _ := os.Hostname()
	if h.Hostname != host {
		t.Errorf("hostname %q, want %q", h.Hostname, host)
	}
	// Only integer pids are looked at; this process is alive, the other
	// pid is above any pid_max.
	if len(h.PIDs) != 2 || h.PIDs[0].PID != self || !h.PIDs[0].Alive || h.PIDs[0].StartTime == 0 || h.PIDs[1].Alive {
		t.Errorf("pids %+v", h.PIDs)
	}
	if h.Arch == "" || !strings.HasPrefix(h.Kernel, "Linux ") {
		t.Errorf("kernel %q arch %q", h.Kernel, h.Arch)
	}
	if h.Torchrun == nil || *h.Torchrun != filepath.Join(bin, "torchrun") {
		t.Errorf("torchrun %s, want %s", pathOf(h.Torchrun), filepath.Join(bin, "torchrun"))
	}
	for _, w := range h.Warnings {
		// python3 is not on this PATH, which is the only expected warning;
		// the 3-GPU matrix beside 2 listed GPUs is the other.
		if !strings.Contains(w, "python3 not found") && !strings.Contains(w, "shows 3 GPUs but --query-gpu lists 2") {
			t.Errorf("unexpected warning %q", w)
		}
	}
}

func TestScriptOnAMachineWithoutNvidiaSMI(t *testing.T) {
	h := Parse(runScript(t, binWith(t, "uname"), nil), testNonce)
	if len(h.GPUs) != 0 || h.Topology != nil {
		t.Fatalf("gpus %+v", h.GPUs)
	}
	if !strings.Contains(strings.Join(h.Warnings, "\n"), "nvidia-smi not found: no GPUs") {
		t.Fatalf("warnings %q", h.Warnings)
	}
	if h.BootID == "" || h.Hostname == "" {
		t.Fatalf("host %+v", h)
	}
	if h.Torchrun == nil || *h.Torchrun != "" {
		t.Errorf("torchrun %s, want known to be missing (\"\")", pathOf(h.Torchrun))
	}
}

// appsNvidiaSMI is a one-GPU machine whose compute processes are the pids
// in $APPS, as nvidia-smi lists them.
const appsNvidiaSMI = `#!/bin/sh
case "$*" in
*--query-gpu=*) printf '0, GPU-0, NVIDIA A100-SXM4-80GB, 00000000:07:00.0, 81920, 2048, 550.90.07\n' ;;
*--query-compute-apps=*) for p in $APPS; do printf 'GPU-0, %s, 1024\n' "$p"; done ;;
*) exit 2 ;;
esac
`

// TestScriptReadsEachGPUProcesssRunID runs probe.sh under each shell
// machines have as sh: a GPU process's run id is the GPULAYER_RUN_ID of
// its environment, and never another variable's value that holds a
// newline and the same text; a process without one has none.
func TestScriptReadsEachGPUProcesssRunID(t *testing.T) {
	start := func(env ...string) int {
		t.Helper()
		cmd := exec.Command("sleep", "30")
		cmd.Env = env
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		return cmd.Process.Pid
	}
	job := start("FORGED=x\nGPULAYER_RUN_ID=r-forged", "GPULAYER_RUN_ID=r0123456789abcdef", "CUDA_VISIBLE_DEVICES=0")
	forgedOnly := start("FORGED=x\nGPULAYER_RUN_ID=r-forged")
	other := start("HOME=/nonexistent")
	for shell, bin := range probeShells(t) {
		t.Run(shell, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(appsNvidiaSMI), 0o755); err != nil {
				t.Fatal(err)
			}
			// Alpine's tr is busybox's: a link named tr runs it.
			tr, err := exec.LookPath("tr")
			if shell == "busybox" {
				tr, err = exec.LookPath("busybox")
			}
			if err != nil {
				t.Skip("no tr")
			}
			if err := os.Symlink(tr, filepath.Join(bin, "tr")); err != nil {
				t.Fatal(err)
			}
			apps := strconv.Itoa(job) + " " + strconv.Itoa(forgedOnly) + " " + strconv.Itoa(other)
			out, _ := runProbeIn(t, bin, []string{"APPS=" + apps})
			h := Parse(out, testNonce)
			got := map[int]string{}
			for _, p := range h.GPUs[0].Processes {
				got[p.PID] = p.RunID
			}
			want := map[int]string{job: "r0123456789abcdef", forgedOnly: "", other: ""}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("run ids %v, want %v (warnings %q)", got, want, h.Warnings)
			}
		})
	}
}

// noFabricNvidiaSMI is a machine whose driver prints no Fabric section.
const noFabricNvidiaSMI = `#!/bin/sh
case "$*" in
*--query-gpu=*) printf '0, GPU-0, NVIDIA A100-SXM4-80GB, 00000000:07:00.0, 81920, 0, 525.105.17\n' ;;
*--query-compute-apps=*) ;;
-q) printf '\n==============NVSMI LOG==============\n\nDriver Version : 525.105.17\nGPU 00000000:07:00.0\n    Product Name : NVIDIA A100-SXM4-80GB\n        Bus : 0x07\n' ;;
*) exit 2 ;;
esac
`

// A driver without any Fabric section gives an empty fabric section (its
// GPU lines alone say nothing), and a machine in no NVLink domain,
// without a warning.
func TestScriptKeepsNothingOfNvidiaSMIQWithoutAFabric(t *testing.T) {
	for shell, bin := range probeShells(t) {
		t.Run(shell, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(noFabricNvidiaSMI), 0o755); err != nil {
				t.Fatal(err)
			}
			out, _ := runProbeIn(t, bin, nil)
			secs, _, _ := splitSections(string(out), testNonce)
			if s, ok := secs[sectionFabric]; !ok || s.text != "" || s.exit != 0 {
				t.Errorf("fabric section %+v (present %v), want empty with exit 0", s, ok)
			}
			h := Parse(out, testNonce)
			if h.NVLinkDomain != "" || len(h.GPUs) != 1 || h.GPUs[0].Fabric != nil {
				t.Errorf("domain %q, GPUs %+v", h.NVLinkDomain, h.GPUs)
			}
			for _, w := range h.Warnings {
				if strings.Contains(w, "fabric") || strings.Contains(w, "-q") {
					t.Errorf("warning %q", w)
				}
			}
		})
	}
}

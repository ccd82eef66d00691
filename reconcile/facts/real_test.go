package facts_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/probe"
)

// The real-machine test runs only when asked: it needs NVIDIA GPUs, their
// driver and nvidia-smi. .ci/device-check runs it there.
const (
	realGPUEnv    = "GPULAYER_REAL_GPU"     // "1" runs it
	realGPUOutEnv = "GPULAYER_REAL_GPU_OUT" // a folder to keep what was read in
)

// Warnings a GPU machine may rightly give: no torch on a bare machine, and a
// GCE metadata server out of reach.
var expectedWarning = regexp.MustCompile(`^(python3 |torch is not installed|GCE metadata server|the machine says it is on Google Compute Engine)`)

// TestProbeScriptOnRealGPUMachine runs the probe script here as an SSH
// session would run it on a remote machine (probe.Command on `sh -c`, the
// script on standard input) and checks what the parser makes of a real
// nvidia-smi's answers against `nvidia-smi -L`.
func TestProbeScriptOnRealGPUMachine(t *testing.T) {
	if os.Getenv(realGPUEnv) != "1" {
		t.Skipf("needs NVIDIA GPUs, their driver and nvidia-smi: set %s=1 to run (and %s=DIR to keep what was read)", realGPUEnv, realGPUOutEnv)
	}

	nonce := facts.NewNonce()
	self := os.Getpid()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	// sshd hands the command line to the login shell as `SHELL -c LINE`.
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", probe.Command(nonce, []probe.Watch{{PID: self}}))
	cmd.Stdin = strings.NewReader(facts.Script())
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	keep(t, "probe-output.txt", stdout.Bytes())
	keep(t, "probe-stderr.txt", stderr.Bytes())
	if runErr != nil {
		t.Errorf("probe script: %v; stderr: %s", runErr, strings.TrimSpace(stderr.String()))
	} else if s := strings.TrimSpace(stderr.String()); s != "" {
		t.Logf("probe script stderr: %s", s)
	}

	h := facts.Parse(stdout.Bytes(), nonce)
	doc, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		t.Fatalf("facts as JSON: %v", err)
	}
	keep(t, "host.json", append(doc, '\n'))
	t.Logf("facts:\n%s", doc)

	for _, w := range h.Warnings {
		if expectedWarning.MatchString(w) {
			t.Logf("expected warning: %s", w)
		} else {
			t.Errorf("warning: %s", w)
		}
	}
	if h.Status != facts.StatusOK {
		t.Errorf("status %q, want %q", h.Status, facts.StatusOK)
	}
	if h.Hostname == "" || h.Kernel == "" || h.Arch == "" {
		t.Errorf("hostname %q, kernel %q, arch %q: want all three", h.Hostname, h.Kernel, h.Arch)
	}
	if h.BootID == "" {
		// Some sandboxed kernels (gVisor) may lack the file: worth knowing,
		// not the probe's fault.
		t.Log("note: no boot id (/proc/sys/kernel/random/boot_id); pid reuse cannot be told apart here")
	}
	if h.CUDADriverVersion == "" {
		t.Error("no driver version")
	}

	listed := listGPUs(t)
	keep(t, "nvidia-smi-L.txt", []byte(strings.Join(listed, "\n")+"\n"))
	if len(listed) == 0 {
		t.Fatal("nvidia-smi -L lists no GPUs")
	}
	if len(h.GPUs) != len(listed) {
		t.Errorf("parsed %d GPUs, nvidia-smi -L lists %d:\n%s", len(h.GPUs), len(listed), strings.Join(listed, "\n"))
	}
	for i, g := range h.GPUs {
		if g.Index != i {
			t.Errorf("GPU %d of the list has index %d", i, g.Index)
		}
		if g.UUID == "" || g.Name == "" || g.PCIBusID == "" || g.MemoryTotalMiB <= 0 {
			t.Errorf("GPU %d: uuid %q, name %q, bus id %q, memory total %d MiB: want all set", g.Index, g.UUID, g.Name, g.PCIBusID, g.MemoryTotalMiB)
		}
		if i < len(listed) && !strings.Contains(listed[i], "(UUID: "+g.UUID+")") {
			t.Errorf("GPU %d: uuid %q, but nvidia-smi -L says %q", g.Index, g.UUID, listed[i])
		}
	}

	if h.TopologyRaw == "" || h.Topology == nil {
		t.Errorf("no topology (raw %d bytes)", len(h.TopologyRaw))
	} else if h.Topology.GPUs() != len(h.GPUs) {
		t.Errorf("topology has %d GPUs, --query-gpu %d", h.Topology.GPUs(), len(h.GPUs))
	}

	if len(h.PIDs) != 1 || h.PIDs[0].PID != self || !h.PIDs[0].Alive || h.PIDs[0].StartTime == 0 {
		t.Errorf("pids %+v, want this test's pid %d alive with a start time", h.PIDs, self)
	}
}

// listGPUs returns the GPU lines of `nvidia-smi -L` ("GPU 0: NAME (UUID:
// GPU-...)"), without the MIG devices listed under them.
func listGPUs(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "nvidia-smi", "-L")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("nvidia-smi -L: %v %s", err, strings.TrimSpace(stderr.String()))
	}
	var gpus []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "GPU ") {
			gpus = append(gpus, strings.TrimRight(l, "\r"))
		}
	}
	return gpus
}

// keep writes data to $GPULAYER_REAL_GPU_OUT/facts-NAME when that is set.
func keep(t *testing.T, name string, data []byte) {
	t.Helper()
	dir := os.Getenv(realGPUOutEnv)
	if dir == "" {
		return
	}
	if err := os.WriteFile(filepath.Join(dir, "facts-"+name), data, 0o644); err != nil {
		t.Errorf("keeping %s: %v", name, err)
	}
}

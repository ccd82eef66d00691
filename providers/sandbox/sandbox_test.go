package sandbox_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/providers/sandbox"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/ssh"
	"github.com/gpulayer/gpulayer/topology"
)

// shells are the ways machines can run commands; the tests that pin what
// a probe sees run in each.
var shells = []string{sandbox.InProcess, "/bin/sh"}

func startSandbox(t *testing.T, hosts int, shell string) *sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.Start(sandbox.Options{Hosts: hosts, Dir: t.TempDir(), Shell: shell})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	return sb
}

// probeSandbox loads the configuration the sandbox wrote, as
// `gpulayer probe DIR` does, and probes every host.
func probeSandbox(t *testing.T, sb *sandbox.Sandbox, pool *ssh.Pool) *facts.Document {
	t.Helper()
	cfg, diags := config.Load(sb.Dir, config.LoadOptions{})
	if diags.HasErrors() {
		t.Fatalf("the sandbox's configuration does not load: %s", diags.Error())
	}
	machines, err := probe.Machines(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return probe.Fleet(ctx, pool, machines, probe.Options{Parallelism: 8, Timeout: 30 * time.Second})
}

func newPool(t *testing.T) *ssh.Pool {
	pool := ssh.NewPool(ssh.Options{Parallelism: 8})
	t.Cleanup(func() { _ = pool.Close() })
	return pool
}

func TestProbingASandboxReturnsTheRecordingsItServes(t *testing.T) {
	for _, shell := range shells {
		t.Run(shell, func(t *testing.T) { testProbingReturnsTheRecordings(t, shell) })
	}
}

func testProbingReturnsTheRecordings(t *testing.T, shell string) {
	sb := startSandbox(t, 8, shell)
	doc := probeSandbox(t, sb, newPool(t))
	if len(doc.Hosts) != 8 {
		t.Fatalf("%d hosts probed, want 8", len(doc.Hosts))
	}
	// A machine has torchrun (the shim of the computer's) exactly when the
	// computer does.
	wantTorchrun := ""
	if _, err := exec.LookPath("torchrun"); err == nil {
		wantTorchrun = filepath.Join(sb.Dir, "bin", "torchrun")
	}
	models := map[string]bool{}
	for _, m := range sb.Machines {
		h := doc.Find(m.Name)
		if h == nil {
			t.Fatalf("%s not probed", m.Name)
		}
		if h.Status != facts.StatusOK {
			t.Fatalf("%s: %s: %s", m.Name, h.Status, h.Error)
		}
		for _, w := range h.Warnings {
			// The computer's own DMI product name might say GCE; nothing
			// else may warn.
			t.Errorf("%s: warning %q", m.Name, w)
		}
		models[m.Model.Model] = true
		want, err := topology.ParseSMI(m.Model.Topology())
		if err != nil {
			t.Fatal(err)
		}
		if h.TopologyRaw != m.Model.Topology() {
			t.Errorf("%s: topology text differs from its recording %s", m.Name, m.Model.TopologyFile)
		}
		if !reflect.DeepEqual(h.Topology, want) {
			t.Errorf("%s: parsed topology differs from ParseSMI(%s)", m.Name, m.Model.TopologyFile)
		}
		if len(h.GPUs) != m.Model.GPUs || len(h.FreeGPUs) != m.Model.GPUs {
			t.Errorf("%s: %d GPUs (%d free), want %d", m.Name, len(h.GPUs), len(h.FreeGPUs), m.Model.GPUs)
		}
		for i, g := range h.GPUs {
			wantGPU := facts.GPU{Index: i, UUID: m.GPUUUIDs[i], Name: m.Model.GPUName, PCIBusID: sandbox.PCIBusID(i),
				MemoryTotalMiB: m.Model.MemoryMiB, Processes: []facts.Process{}, Fabric: m.GPUFabric(i)}
			if !reflect.DeepEqual(g, wantGPU) {
				t.Errorf("%s: GPU %+v, want %+v", m.Name, g, wantGPU)
			}
		}
		wantLoc := facts.Location{Region: m.Region, Zone: m.Zone, NetworkGroup: m.Network, Source: facts.SourceHost}
		if h.Location != wantLoc {
			t.Errorf("%s: location %+v, want %+v", m.Name, h.Location, wantLoc)
		}
		if h.Torchrun == nil || *h.Torchrun != wantTorchrun {
			t.Errorf("%s: torchrun %s, want %q", m.Name, describe(h.Torchrun), wantTorchrun)
		}
		// The recorded version, whatever torch the computer has.
		if h.TorchVersion != m.Torch || h.CUDADriverVersion != m.Model.Driver {
			t.Errorf("%s: torch %q driver %q, want %q %q", m.Name, h.TorchVersion, h.CUDADriverVersion, m.Torch, m.Model.Driver)
		}
	}
	if len(models) < 6 {
		t.Errorf("8 machines show only %d models", len(models))
	}
}

func TestGPUsOfLiveProcessesShowBusyAndCloseStopsThem(t *testing.T) {
	for _, shell := range shells {
		t.Run(shell, func(t *testing.T) { testGPUsOfLiveProcessesShowBusy(t, shell) })
	}
}

func testGPUsOfLiveProcessesShowBusy(t *testing.T, shell string) {
	sb := startSandbox(t, 2, shell)
	pool := newPool(t)
	m := sb.Machines[0] // a DGX A100
	target := machineTarget(t, sb, m)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Launched as gpulayer launches: in the background, detached, with
	// CUDA_VISIBLE_DEVICES naming its GPUs (by index and by UUID).
	launch := "CUDA_VISIBLE_DEVICES=1," + m.GPUUUIDs[3] + " setsid sleep 120 </dev/null >/dev/null 2>&1 & echo $!"
	res, err := pool.Run(ctx, target, launch, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("launch: %v %+v", err, res)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("launch printed %q", res.Stdout)
	}

	doc := probeSandbox(t, sb, pool)
	h := doc.Find(m.Name)
	if h == nil || h.Status != facts.StatusOK {
		t.Fatalf("probe: %+v", h)
	}
	if want := []int{0, 2, 4, 5, 6, 7}; !reflect.DeepEqual(h.FreeGPUs, want) {
		t.Errorf("free GPUs %v, want %v", h.FreeGPUs, want)
	}
	for _, i := range []int{1, 3} {
		if p := h.GPUs[i].Processes; len(p) != 1 || p[0].PID != pid || h.GPUs[i].MemoryUsedMiB == 0 {
			t.Errorf("GPU %d: processes %+v, used %d; want pid %d", i, p, h.GPUs[i].MemoryUsedMiB, pid)
		}
	}
	if other := doc.Find(sb.Machines[1].Name); len(other.FreeGPUs) != len(other.GPUs) {
		t.Errorf("a process on %s made GPUs busy on %s", m.Name, other.Name)
	}

	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatalf("pid %d outlived the sandbox", pid)
	}
}

func TestStartWritesKeysKnownHostsAndAConfiguration(t *testing.T) {
	sb := startSandbox(t, 3, "")
	st, err := os.Stat(sb.KeyPath())
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("client key: %v %v", st.Mode(), err)
	}
	known, err := os.ReadFile(sb.KnownHostsPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range sb.Machines {
		if !strings.Contains(string(known), "[127.0.0.1]:"+strconv.Itoa(m.Port)+" ssh-ed25519 ") {
			t.Errorf("known_hosts lacks %s:\n%s", m.Name, known)
		}
	}
	cfg, diags := config.Load(sb.Dir, config.LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if len(cfg.Fleets) != 1 || len(cfg.Fleets[0].Hosts) != 3 || cfg.Fleets[0].SSH == nil ||
		cfg.Fleets[0].SSH.IdentityFile != sb.KeyPath() {
		t.Fatalf("configuration: %+v", cfg.Fleets)
	}
}

func TestStartRefusesABadHostCountOrNoDirectory(t *testing.T) {
	for _, n := range []int{0, -1, sandbox.MaxHosts + 1} {
		if _, err := sandbox.Start(sandbox.Options{Hosts: n, Dir: t.TempDir()}); err == nil {
			t.Errorf("Start with %d hosts succeeded", n)
		}
	}
	if _, err := sandbox.Start(sandbox.Options{Hosts: 1}); err == nil {
		t.Error("Start without a directory succeeded")
	}
}

func machineTarget(t *testing.T, sb *sandbox.Sandbox, m sandbox.Machine) ssh.Target {
	t.Helper()
	return ssh.Target{
		Name: m.Name, Address: "127.0.0.1", Port: m.Port, User: sb.User,
		IdentityFiles:  []string{sb.KeyPath()},
		KnownHostsFile: sb.KnownHostsPath(), HostKeyCheck: "strict",
		ConnectTimeout: 10 * time.Second,
	}
}

func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] != 'Z'
}

// A launch without `&` or $! is interpreted in-process; the program it
// starts is still a real process, found busy through /proc like one a
// real shell started.
func TestInProcessLaunchMarksTheMachineAndStartsARealProcess(t *testing.T) {
	sb := startSandbox(t, 1, sandbox.InProcess)
	pool := newPool(t)
	m := sb.Machines[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	visible := "1," + m.GPUUUIDs[3]
	launch := "CUDA_VISIBLE_DEVICES=" + visible + " setsid -f sleep 120 </dev/null >/dev/null 2>&1"
	if res, err := pool.Run(ctx, machineTarget(t, sb, m), launch, nil); err != nil || res.ExitCode != 0 {
		t.Fatalf("launch: %v %+v", err, res)
	}
	if _, err := os.Stat(filepath.Join(m.Dir, "launched")); err != nil {
		t.Fatalf("the machine is not marked as launched: %v", err)
	}
	doc := probeSandbox(t, sb, pool)
	h := doc.Find(m.Name)
	if h == nil || h.Status != facts.StatusOK {
		t.Fatalf("probe: %+v", h)
	}
	p := h.GPUs[1].Processes
	if len(p) != 1 || !reflect.DeepEqual(h.GPUs[3].Processes, p) {
		t.Fatalf("GPU 1 processes %+v, GPU 3 %+v; want the launched one on both", p, h.GPUs[3].Processes)
	}
	pid := p[0].PID
	env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		t.Fatal(err)
	}
	vars := strings.Split(string(env), "\x00")
	for _, want := range []string{"GPULAYER_SANDBOX_MACHINE=" + m.Dir, "CUDA_VISIBLE_DEVICES=" + visible} {
		if !slices.Contains(vars, want) {
			t.Errorf("pid %d's environment lacks %s", pid, want)
		}
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatalf("pid %d outlived the sandbox", pid)
	}
}

// describe is a torchrun path as a probe reported it, or "unknown".
func describe(p *string) string {
	if p == nil {
		return "unknown"
	}
	return strconv.Quote(*p)
}

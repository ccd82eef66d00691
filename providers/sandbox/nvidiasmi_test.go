package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// prepared is one sandbox machine's files, as Prepare writes them.
type prepared struct {
	m   Machine
	env []string
	bin string
}

func prepareMachine(t *testing.T) prepared {
	t.Helper()
	dir := t.TempDir()
	m, env, err := Prepare(dir, 0, 1) // a DGX A100: 8 GPUs
	if err != nil {
		t.Fatal(err)
	}
	return prepared{m: m, env: env, bin: filepath.Join(dir, "bin")}
}

func (p prepared) getenv(name string) string {
	for _, kv := range p.env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// smi runs the machine's nvidia-smi in this process.
func (p prepared) smi(args ...string) (status int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	status = nvidiaSMI(p.getenv, args, &out, &errOut)
	return status, out.String(), errOut.String()
}

func TestNvidiaSMIAnswersTheProbesQueriesFromTheRecord(t *testing.T) {
	p := prepareMachine(t)
	m := p.m
	var gpuRows, listRows strings.Builder
	withUnits := "index, memory.total [MiB], memory.free [MiB], count\n"
	for g, uuid := range m.GPUUUIDs {
		withUnits += fmt.Sprintf("%d, %[2]d MiB, %[2]d MiB, 8\n", g, m.Model.MemoryMiB)
		fmt.Fprintf(&gpuRows, "%d, %s, %s, %s, %d, 0, %s\n", g, uuid, m.Model.GPUName, PCIBusID(g), m.Model.MemoryMiB, m.Model.Driver)
		fmt.Fprintf(&listRows, "GPU %d: %s (UUID: %s)\n", g, m.Model.GPUName, uuid)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"query-gpu without header or units",
			[]string{"--query-gpu=index,uuid,name,pci.bus_id,memory.total,memory.used,driver_version", "--format=csv,noheader,nounits"},
			gpuRows.String()},
		{"query-gpu with header and units",
			[]string{"--query-gpu=index,memory.total,memory.free,count", "--format=csv"},
			withUnits},
		{"idle compute apps", []string{"--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv"},
			"gpu_uuid, pid, used_memory [MiB]\n"},
		{"topo -m", []string{"topo", "-m"}, m.Model.Topology()},
		{"-L", []string{"-L"}, listRows.String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out, errOut := p.smi(tc.args...)
			if status != 0 || out != tc.want || errOut != "" {
				t.Errorf("status %d, stderr %q, stdout:\n%s\nwant:\n%s", status, errOut, out, tc.want)
			}
		})
	}
}

func TestNvidiaSMIRefusesWhatItDoesNotSimulate(t *testing.T) {
	p := prepareMachine(t)
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"unknown field", []string{"--query-gpu=index,temperature.gpu", "--format=csv"}, `Field "temperature.gpu" is not a valid field to query.`},
		{"unknown app field", []string{"--query-compute-apps=pid,colour", "--format=csv"}, `Field "colour" is not a valid field to query.`},
		{"unknown format", []string{"--query-gpu=index", "--format=json"}, "unsupported format json"},
		{"plain nvidia-smi", nil, "only --query-gpu"},
		{"other command", []string{"dmon"}, "only --query-gpu"},
		{"-m without topo", []string{"-m"}, "only --query-gpu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out, errOut := p.smi(tc.args...)
			if status != 2 || out != "" || !strings.Contains(errOut, tc.stderr) {
				t.Errorf("status %d, stdout %q, stderr %q; want status 2, no output, %q", status, out, errOut, tc.stderr)
			}
		})
	}
	var out, errOut bytes.Buffer
	if status := nvidiaSMI(func(string) string { return "" }, []string{"-L"}, &out, &errOut); status != 2 ||
		!strings.Contains(errOut.String(), machineEnv) {
		t.Errorf("outside a machine: status %d, stderr %q", status, errOut.String())
	}
}

// startOn starts `sleep` with the given sandbox machine and
// CUDA_VISIBLE_DEVICES, as a launch on that machine would, and returns it
// (killed and reaped at the end of the test).
func startOn(t *testing.T, machine, devices string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.Env = []string{machineEnv + "=" + machine, "CUDA_VISIBLE_DEVICES=" + devices}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

func TestNvidiaSMIShowsTheGPUsOfLiveProcessesOfItsMachineBusy(t *testing.T) {
	p := prepareMachine(t)
	m := p.m
	// By index and by UUID.
	proc := startOn(t, m.Dir, "0,"+m.GPUUUIDs[2])
	// Another machine whose directory starts with this one's name: not ours.
	startOn(t, m.Dir+"-other", "1")

	used := func() string {
		t.Helper()
		status, out, errOut := p.smi("--query-gpu=memory.used", "--format=csv,noheader,nounits")
		if status != 0 {
			t.Fatalf("status %d: %s", status, errOut)
		}
		return strings.Join(strings.Fields(out), " ")
	}
	// Nothing was launched through the machine's shell yet: nvidia-smi
	// does not look.
	if got := used(); got != "0 0 0 0 0 0 0 0" {
		t.Fatalf("before a launch, memory used %s", got)
	}
	if err := os.WriteFile(filepath.Join(m.Dir, launchedFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := used(); got != "1024 0 1024 0 0 0 0 0" {
		t.Errorf("memory used %s, want GPUs 0 and 2 at 1024", got)
	}
	status, out, _ := p.smi("--query-compute-apps=gpu_uuid,pid,process_name,used_memory", "--format=csv,noheader")
	pid := strconv.Itoa(proc.Process.Pid)
	want := m.GPUUUIDs[0] + ", " + pid + ", sleep, 1024 MiB\n" + m.GPUUUIDs[2] + ", " + pid + ", sleep, 1024 MiB\n"
	if status != 0 || out != want {
		t.Errorf("compute apps:\n%s\nwant:\n%s", out, want)
	}

	// A process that ended but was not reaped yet (a zombie) holds nothing.
	if err := proc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !zombie(proc.Process.Pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := used(); got != "0 0 0 0 0 0 0 0" {
		t.Errorf("after the process ended, memory used %s", got)
	}
}

// The shim in bin/ runs the same Go nvidia-smi in a new process of this
// program (here, the test binary), as a real shell or sshd runs it.
func TestNvidiaSMIShimRunsTheToolInThisProgram(t *testing.T) {
	p := prepareMachine(t)
	_, want, _ := p.smi("-L")
	cmd := exec.Command(filepath.Join(p.bin, "nvidia-smi"), "-L")
	cmd.Env = p.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || string(out) != want {
		t.Errorf("bin/nvidia-smi -L: %v, stderr %q, stdout:\n%s\nwant:\n%s", err, stderr.String(), out, want)
	}
	cmd = exec.Command(filepath.Join(p.bin, "nvidia-smi"), "--query-gpu=fan.speed", "--format=csv")
	cmd.Env = p.env
	out, err = cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "fan.speed") {
		t.Errorf("a refused query through the shim: %v: %s", err, out)
	}
}

// The in-process shell calls the tool itself, not its shim.
func TestInProcessShellCallsToolsDirectly(t *testing.T) {
	status, out, errOut := runIn(t, `printf '#!/bin/sh\nexit 99\n' >"$(command -v nvidia-smi)"; nvidia-smi -L | wc -l`, "")
	if status != 0 || strings.TrimSpace(out) != "8" {
		t.Errorf("status %d, stdout %q, stderr %q; want the 8 GPUs of the record", status, out, errOut)
	}
}

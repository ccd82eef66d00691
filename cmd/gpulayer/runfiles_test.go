package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/providers/sandbox"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/launch"
)

// machineHome is the home directory of the sandbox machine named host.
func machineHome(t *testing.T, sb *sandbox.Sandbox, host string) string {
	t.Helper()
	for _, m := range sb.Machines {
		if m.Name == host {
			return filepath.Join(m.Dir, "home")
		}
	}
	t.Fatalf("no sandbox machine %s", host)
	return ""
}

// TestPlanAndStatusOfANodeWhoseExitFileIsAFIFO: a node's exit file was
// replaced by a FIFO, and the node then died without writing its status
// (SIGKILL). The probe does not read the FIFO (a read would block until
// the probe's timeout, failing the host and replacing every job on it as
// host_unreachable): plan and status finish at once and say the node
// exited, its status unknown, its host reachable.
func TestPlanAndStatusOfANodeWhoseExitFileIsAFIFO(t *testing.T) {
	sb, dir := sandboxJobs(t, 2, sleeperJob)
	if code, out, errOut := runCmd(t, "apply", dir, "--auto-approve"); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	job := loadState(t, dir).Job("train")
	n := job.Nodes[0]
	exit := filepath.Join(machineHome(t, sb, n.Host), launch.ExitPath(job.Name, job.RunID, n.Rank))
	if err := syscall.Mkfifo(exit, 0o600); err != nil {
		t.Fatal(err)
	}
	// A reader a broken probe left blocked on the FIFO is let go, so the
	// sandbox can close.
	t.Cleanup(func() {
		if f, err := os.OpenFile(exit, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	// The leader leads its process group (setsid): the whole node dies.
	if err := syscall.Kill(-n.Process.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, n.Process.PID)

	start := time.Now()
	code, out, errOut := runCmd(t, "plan", dir, "--probe-timeout", "15s")
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("plan took %s", took)
	}
	if code != 0 || strings.Contains(out, "host_unreachable") || !strings.Contains(out, "the run was lost") ||
		!strings.Contains(out, "its exit file is not a regular file: not read") {
		t.Errorf("plan: exit %d\n%s%s", code, out, errOut)
	}

	start = time.Now()
	code, out, errOut = runCmd(t, "status", dir, "--json", "--probe-timeout", "15s")
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("status took %s", took)
	}
	var report reconcile.StatusReport
	if err := json.Unmarshal([]byte(out), &report); code != 0 || err != nil || len(report.Jobs) != 1 || len(report.Jobs[0].Nodes) != 2 {
		t.Fatalf("status: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	for _, ns := range report.Jobs[0].Nodes {
		want := reconcile.ProcessRunning
		if ns.Rank == n.Rank {
			want = reconcile.ProcessExited
		}
		if ns.Process != want || ns.ExitStatus != nil {
			t.Errorf("node %d: %s (%s), status %v; want %s", ns.Rank, ns.Process, ns.Detail, ns.ExitStatus, want)
		}
	}
}

// waitGone waits up to 10 s for process pid to be gone or a zombie.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for range 200 {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.HasPrefix(string(stat[strings.LastIndexByte(string(stat), ')')+1:]), " Z") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("process %d did not end", pid)
}

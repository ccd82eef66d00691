package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/providers/gcp"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// restartJob is a one-node job restarted once after it fails, at once.
const restartJob = `
job "train" {
  nodes         = 1
  gpus_per_node = 1
  launcher      = "plain"
  stop_timeout  = "2s"
  command       = ["sh", "-c", "while :; do sleep 1; done"]
  restart {
    attempts = 1
    delay    = "0s"
  }
}
`

// watchProcess starts `gpulayer watch DIR --interval 1s --json ARGS` in a
// child process, and the events it prints.
func watchProcess(t *testing.T, dir string, args ...string) (*exec.Cmd, <-chan watchEvent) {
	t.Helper()
	cmd, out := gpulayerProcess(t, t.TempDir(), append([]string{"watch", dir, "--interval", "1s", "--json"}, args...)...)
	events := make(chan watchEvent, 4096)
	go func() {
		defer close(events)
		for out.Scan() {
			var ev watchEvent
			if err := json.Unmarshal(out.Bytes(), &ev); err != nil {
				ev = watchEvent{Event: "not-json", Detail: out.Text()}
			}
			events <- ev
		}
	}()
	return cmd, events
}

// nextEvent waits at most d for an event match accepts, and fails the
// test, naming the events it saw, when none comes.
func nextEvent(t *testing.T, events <-chan watchEvent, d time.Duration, what string, match func(watchEvent) bool) watchEvent {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	var seen []string
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("watch ended before %s; it said:\n%s", what, strings.Join(seen, "\n"))
			}
			if match(ev) {
				return ev
			}
			seen = append(seen, ev.Job+" "+ev.Event+": "+ev.Detail)
		case <-deadline.C:
			t.Fatalf("no %s within %s; watch said:\n%s", what, d, strings.Join(seen, "\n"))
		}
	}
}

func isEvent(job, event string) func(watchEvent) bool {
	return func(ev watchEvent) bool { return ev.Job == job && ev.Event == event }
}

// exitOf waits at most d for the process to end, and returns its exit
// status.
func exitOf(t *testing.T, cmd *exec.Cmd, d time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(d):
		t.Fatalf("watch did not exit within %s", d)
	}
	return -1
}

// commandPID is the pid of the command a node's leader runs.
func commandPID(t *testing.T, n state.Node) int {
	t.Helper()
	leader := " " + strconv.Itoa(n.Process.PID) + " "
	for range 100 {
		for _, pid := range runProcesses(n.Process.RunID) {
			stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			// Field 4, after the command's name, is the parent's pid.
			if i := strings.LastIndexByte(string(stat), ')'); pid != n.Process.PID && i > 0 && strings.Contains(string(stat[i:i+len(leader)+4]), leader) {
				return pid
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no command under leader %d", n.Process.PID)
	return 0
}

// stateWhen waits at most d for the state in dir to satisfy cond (the
// watcher's saves follow its events), and returns it.
func stateWhen(t *testing.T, dir string, d time.Duration, what string, cond func(*state.State) bool) *state.State {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		st := loadState(t, dir)
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("state did not show %s within %s: jobs %+v", what, d, st.Jobs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func running(name string) func(*state.State) bool {
	return func(st *state.State) bool { j := st.Job(name); return j != nil && j.Status == state.JobRunning }
}

// TestWatchRelaunchesAJobKilledByHandWithinTwoIntervals: the command of a
// job with one restart left is killed by hand; the watcher restarts it
// within two intervals of the kill, on a new run id, with the old run
// in its history and the restart counted.
func TestWatchRelaunchesAJobKilledByHandWithinTwoIntervals(t *testing.T) {
	_, dir := sandboxJobs(t, 2, restartJob)
	mustApply(t, dir)
	first := loadState(t, dir).Job("train")
	cmd, events := watchProcess(t, dir, "--forever")
	nextEvent(t, events, 60*time.Second, "the watch to start", isEvent("", "watching"))

	if err := syscall.Kill(commandPID(t, first.Nodes[0]), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	ev := nextEvent(t, events, 30*time.Second, "a restart", isEvent("train", "restart"))
	took := ev.Time.Sub(killed)
	t.Logf("restart decided %s after the kill", took)
	if took > 2*time.Second {
		t.Errorf("restart decided %s after the kill, want within two intervals (2s)", took)
	}
	if !strings.Contains(ev.Detail, "SIGKILL") || !strings.Contains(ev.Detail, "restart 1 of 1") {
		t.Errorf("restart event %q does not say how the run ended and which restart it is", ev.Detail)
	}
	nextEvent(t, events, 30*time.Second, "the new run to be confirmed", isEvent("train", "running"))
	j := stateWhen(t, dir, 10*time.Second, "train running", running("train")).Job("train")
	if j.RunID == first.RunID || j.Status != state.JobRunning || j.Restarts != 1 || len(j.History) != 1 || j.History[0].RunID != first.RunID {
		t.Fatalf("after the restart: %+v", j)
	}
	if len(runProcesses(j.RunID)) == 0 || len(runProcesses(first.RunID)) != 0 {
		t.Errorf("processes: new run %v, old run %v", runProcesses(j.RunID), runProcesses(first.RunID))
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, cmd, 60*time.Second); code != 130 {
		t.Errorf("exit %d after SIGTERM, want 130", code)
	}
}

// TestWatchSIGTERMLeavesTheLockFreeAndTheJobsRunning: a watcher stopped
// by SIGTERM exits 130, says so, leaves the state unlocked and its lease
// ended, and the job it watched still runs, untouched.
func TestWatchSIGTERMLeavesTheLockFreeAndTheJobsRunning(t *testing.T) {
	_, dir := sandboxJobs(t, 4, sleeperJob)
	mustApply(t, dir)
	run := loadState(t, dir).Job("train")
	cmd, events := watchProcess(t, dir, "--forever")
	nextEvent(t, events, 60*time.Second, "the watch to start", isEvent("", "watching"))
	time.Sleep(1500 * time.Millisecond) // into its rounds
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	nextEvent(t, events, 60*time.Second, "the interruption", isEvent("", "interrupted"))
	if code := exitOf(t, cmd, 60*time.Second); code != 130 {
		t.Errorf("exit %d after SIGTERM, want 130", code)
	}
	path := filepath.Join(dir, ".gpulayer", "state.json")
	lock, err := state.NewLocal(path).Lock(context.Background(), state.NewLockInfo("test"), 0)
	if err != nil {
		t.Fatalf("the state is still locked: %v", err)
	}
	lock.Unlock()
	st := loadState(t, dir)
	if st.Watcher == nil || st.Watcher.Live(time.Now()) {
		t.Errorf("lease after SIGTERM: %+v, want it ended", st.Watcher)
	}
	j := st.Job("train")
	if j == nil || j.RunID != run.RunID || j.Status != state.JobRunning {
		t.Fatalf("job after the watch: %+v", j)
	}
	for _, n := range j.Nodes {
		if !slices.Contains(runProcesses(run.RunID), n.Process.PID) {
			t.Errorf("node %d's process %d is gone", n.Rank, n.Process.PID)
		}
	}
	if code, out, errOut := runCmd(t, "plan", dir, "--detailed-exitcode"); code != 0 {
		t.Errorf("plan after the watch: exit %d, want no changes\n%s%s", code, out, errOut)
	}
}

// TestWatchRefusesASecondWatcherAndTakesOverAKilledOneAfterItsLease: while
// a watcher holds the lease a second one refuses to start, naming it;
// killed with SIGKILL, its lease still holds until it expires (3
// intervals), and then a new watcher takes it over, saying whose it was.
func TestWatchRefusesASecondWatcherAndTakesOverAKilledOneAfterItsLease(t *testing.T) {
	_, dir := sandboxJobs(t, 2, sleeperJob)
	mustApply(t, dir)
	run := loadState(t, dir).Job("train")
	first, events := watchProcess(t, dir, "--forever")
	nextEvent(t, events, 60*time.Second, "the first watch to start", isEvent("", "watching"))
	holder := "pid " + strconv.Itoa(first.Process.Pid) + " on "
	code, out, errOut := runCmd(t, "watch", dir, "--interval", "1s", "--forever")
	if code != 1 || !strings.Contains(errOut, "is watched by gpulayer watch ("+holder) || strings.Contains(out, "watching") {
		t.Fatalf("a second watcher: exit %d, want 1 naming %q\n%s%s", code, holder, out, errOut)
	}

	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	exitOf(t, first, 30*time.Second)
	lease := loadState(t, dir).Watcher
	if lease == nil || lease.PID != first.Process.Pid {
		t.Fatalf("lease of the killed watcher: %+v", lease)
	}
	if time.Now().Before(lease.ExpiresAt.Add(-500 * time.Millisecond)) {
		if code, _, errOut := runCmd(t, "watch", dir, "--interval", "1s", "--forever"); code != 1 || !strings.Contains(errOut, holder) {
			t.Errorf("while the killed watcher's lease holds: exit %d\n%s", code, errOut)
		}
	}
	time.Sleep(time.Until(lease.ExpiresAt))
	second, events := watchProcess(t, dir, "--forever")
	ev := nextEvent(t, events, 60*time.Second, "the take-over", isEvent("", "took_over"))
	if !strings.Contains(ev.Detail, lease.ID) || !strings.Contains(ev.Detail, holder) {
		t.Errorf("take-over %q does not name the lease %s and its holder", ev.Detail, lease.ID)
	}
	if len(runProcesses(run.RunID)) == 0 {
		t.Error("the job stopped running")
	}
	if err := second.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, second, 60*time.Second); code != 130 {
		t.Errorf("exit %d after SIGTERM, want 130", code)
	}
}

// TestWatchUntilCompleteExitsZeroAfterABatchJobSucceedsAndOneAfterAFailure:
// --until-complete (the default) exits 0 once the batch job succeeded, and
// 1, naming the job and how it ended, once another fails with no restart
// left.
func TestWatchUntilCompleteExitsZeroAfterABatchJobSucceedsAndOneAfterAFailure(t *testing.T) {
	sb, dir := sandboxJobs(t, 2, `
job "quick" {
  nodes         = 1
  gpus_per_node = 1
  launcher      = "plain"
  command       = ["sh", "-c", "sleep 2; echo done"]
}
`)
	mustApply(t, dir)
	cmd, events := watchProcess(t, dir)
	nextEvent(t, events, 60*time.Second, "the success", isEvent("quick", "succeeded"))
	ev := nextEvent(t, events, 30*time.Second, "the end of the watch", isEvent("", "done"))
	if !strings.Contains(ev.Detail, `every batch job succeeded: "quick"`) {
		t.Errorf("done: %q", ev.Detail)
	}
	if code := exitOf(t, cmd, 30*time.Second); code != 0 {
		t.Fatalf("exit %d once the job succeeded, want 0", code)
	}
	if j := loadState(t, dir).Job("quick"); j.Status != state.JobSucceeded {
		t.Errorf("quick in state: %+v", j)
	}

	jobs, err := os.ReadFile(filepath.Join(sb.Dir, "jobs.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(sb.Dir, "jobs.hcl"), string(jobs)+`
job "bad" {
  nodes         = 1
  gpus_per_node = 1
  launcher      = "plain"
  command       = ["sh", "-c", "sleep 1; exit 3"]
}
`)
	mustApply(t, dir)
	cmd, events = watchProcess(t, dir)
	nextEvent(t, events, 60*time.Second, "the failure", isEvent("bad", "failed"))
	ev = nextEvent(t, events, 30*time.Second, "the end of the watch", isEvent("", "done"))
	if !strings.Contains(ev.Detail, `job "bad" failed: node 0 on`) || !strings.Contains(ev.Detail, "status 3") {
		t.Errorf("done: %q", ev.Detail)
	}
	if code := exitOf(t, cmd, 30*time.Second); code != 1 {
		t.Errorf("exit %d once a job failed, want 1", code)
	}
}

// TestWatchLeavesConfigurationChangesToApplyAndSavedPlansStayValid: a job
// added to the configuration is not launched by the watcher, which says
// once that there are changes; a plan saved while it watches is still
// applied after the watcher renewed its lease, and launches the job.
func TestWatchLeavesConfigurationChangesToApplyAndSavedPlansStayValid(t *testing.T) {
	sb, dir := sandboxJobs(t, 4, sleeperJob)
	mustApply(t, dir)
	cmd, events := watchProcess(t, dir, "--forever")
	nextEvent(t, events, 60*time.Second, "the watch to start", isEvent("", "watching"))
	// Replaced whole, as an editor saves: the watcher reads the
	// configuration every round and must not catch it half written.
	writeAtomically(t, filepath.Join(sb.Dir, "jobs.hcl"), sleeperJob+`
job "eval" {
  nodes         = 1
  gpus_per_node = 1
  launcher      = "plain"
  stop_timeout  = "2s"
  command       = ["sleep", "300"]
}
`)
	ev := nextEvent(t, events, 30*time.Second, "the changes to be announced", isEvent("", "not_applied"))
	if !strings.Contains(ev.Detail, "configuration has changes not applied: run gpulayer plan") || !strings.Contains(ev.Detail, `job "eval": create (new_job)`) {
		t.Errorf("announcement %q", ev.Detail)
	}
	planPath := filepath.Join(t.TempDir(), "reviewed.plan")
	if code, out, errOut := runCmd(t, "plan", dir, "--lock-timeout", "20s", "--out", planPath); code != 0 {
		t.Fatalf("plan --out while watching: exit %d\n%s%s", code, out, errOut)
	}
	planned := loadState(t, dir).Serial
	deadline := time.Now().Add(30 * time.Second)
	for loadState(t, dir).Serial < planned+2 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond) // two renewals
	}
	if st := loadState(t, dir); st.Job("eval") != nil || st.Serial < planned+2 {
		t.Fatalf("the watcher launched eval or did not renew: serial %d (planned at %d), eval %+v", st.Serial, planned, st.Job("eval"))
	}
	code, out, errOut := runCmd(t, "apply", planPath, "--lock-timeout", "20s")
	if code != 0 || !strings.Contains(out, "1 launched") {
		t.Fatalf("apply of the plan saved while watching: exit %d\n%s%s", code, out, errOut)
	}
	if j := loadState(t, dir).Job("eval"); j == nil || j.Status != state.JobRunning {
		t.Fatalf("eval after the apply: %+v", j)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exitOf(t, cmd, 60*time.Second)
	var announced int
	for ev := range events {
		if ev.Event == "not_applied" {
			announced++
		}
	}
	if announced != 0 {
		t.Errorf("the changes were announced %d more times", announced)
	}
}

// TestWatchRecreatesMachinesDeletedOrPreemptedAndRelaunchesTheirJobs: a
// created machine deleted outside gpulayer is created again by the
// watcher, and then a preempted Spot VM is replaced; each time the job on
// it is relaunched under on_lost, not attempts.
func TestWatchRecreatesMachinesDeletedOrPreemptedAndRelaunchesTheirJobs(t *testing.T) {
	dir, fake := gcpFleet(t, 1)
	path := filepath.Join(dir, "cloud.hcl")
	hcl, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, strings.Replace(string(hcl), `machine_type = "a2-highgpu-8g"`, "machine_type = \"a2-highgpu-8g\"\n    spot         = true", 1))
	mustApply(t, dir)
	t.Cleanup(func() { runCmd(t, "destroy", "--auto-approve", dir) })
	first := loadState(t, dir).Job("train")
	if m := loadState(t, dir).Machines; len(m) != 1 || !m[0].Spot {
		t.Fatalf("machines %+v, want one Spot VM", m)
	}
	// The watcher is another process: it reaches the fake by its address.
	t.Setenv(gcp.EndpointEnv, fake.URL)
	cmd, events := watchProcess(t, dir, "--forever")
	nextEvent(t, events, 60*time.Second, "the watch to start", isEvent("", "watching"))

	fake.Remove("cloud-0")
	nextEvent(t, events, 60*time.Second, "cloud-0 created again", func(ev watchEvent) bool {
		return ev.Event == "created" && strings.Contains(ev.Detail, "machine cloud-0")
	})
	nextEvent(t, events, 90*time.Second, "the job relaunched", isEvent("train", "running"))
	second := stateWhen(t, dir, 10*time.Second, "train running", running("train")).Job("train")
	if second.RunID == first.RunID || second.LostRestarts != 1 || second.Restarts != 0 || second.Nodes[0].Host != "cloud-0" {
		t.Fatalf("after the machine was created again: %+v", second)
	}

	fake.SetStatus("cloud-0", "TERMINATED")
	nextEvent(t, events, 60*time.Second, "cloud-0 deleted", func(ev watchEvent) bool {
		return ev.Event == "deleted" && strings.Contains(ev.Detail, "machine cloud-0")
	})
	nextEvent(t, events, 90*time.Second, "the job relaunched again", isEvent("train", "running"))
	third := stateWhen(t, dir, 10*time.Second, "train running", running("train")).Job("train")
	if third.RunID == second.RunID || third.LostRestarts != 2 || third.Restarts != 0 || len(third.History) != 2 {
		t.Fatalf("after the preempted machine was replaced: %+v", third)
	}
	if in := fake.Instances(); len(in) != 1 || in[0].Status != "RUNNING" {
		t.Errorf("instances %+v, want cloud-0 running again", in)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, cmd, 60*time.Second); code != 130 {
		t.Errorf("exit %d after SIGTERM, want 130", code)
	}
}

// TestWatchEndsARunPastItsDeadline: a batch job still running past its
// deadline is stopped by the watcher, recorded failed, and ends
// --until-complete with 1.
func TestWatchEndsARunPastItsDeadline(t *testing.T) {
	_, dir := sandboxJobs(t, 2, `
job "slow" {
  nodes         = 1
  gpus_per_node = 1
  launcher      = "plain"
  stop_timeout  = "2s"
  deadline      = "3s"
  command       = ["sleep", "300"]
}
`)
	mustApply(t, dir)
	run := loadState(t, dir).Job("slow")
	cmd, events := watchProcess(t, dir)
	ev := nextEvent(t, events, 60*time.Second, "the deadline", isEvent("slow", "failed"))
	if !strings.Contains(ev.Detail, "deadline") {
		t.Errorf("failed: %q, want it to name the deadline", ev.Detail)
	}
	nextEvent(t, events, 30*time.Second, "the node stopped", isEvent("slow", "stopped"))
	if code := exitOf(t, cmd, 30*time.Second); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if j := loadState(t, dir).Job("slow"); j.Status != state.JobFailed || j.EndReason != "deadline_exceeded" || len(runProcesses(run.RunID)) != 0 {
		t.Errorf("after the deadline: %+v, processes %v", j, runProcesses(run.RunID))
	}
}

func writeAtomically(t *testing.T, path, text string) {
	t.Helper()
	if err := writeFileAtomic(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

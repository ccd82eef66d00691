package main

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// waitNodeEnded waits (10 s at most) until the leader of node rank of
// the job's current run is gone: the node ended.
func waitNodeEnded(t *testing.T, dir, job string, rank int) *state.Job {
	t.Helper()
	j := loadState(t, dir).Job(job)
	if j == nil || rank >= len(j.Nodes) || j.Nodes[rank].Process == nil {
		t.Fatalf("no process recorded for %s node %d: %+v", job, rank, j)
	}
	pid := j.Nodes[rank].Process.PID
	for range 200 {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(stat[strings.LastIndexByte(string(stat), ')')+1:]), " Z ") {
			return j
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("node %d of %s (pid %d) did not end", rank, job, pid)
	return nil
}

func mustApply(t *testing.T, dir string, args ...string) string {
	t.Helper()
	code, out, errOut := runCmd(t, append([]string{"apply", dir, "--auto-approve"}, args...)...)
	if code != 0 {
		t.Fatalf("apply %v: exit %d\n%s%s", args, code, out, errOut)
	}
	return out
}

// TestABatchJobThatSucceededIsNeverLaunchedAgain is the lifecycle's first
// acceptance: a 2-node job that exits 0 is succeeded in status, the next
// plans have no changes (--detailed-exitcode 0) and no apply starts it
// again; --replace job.NAME and a changed command each run it again.
func TestABatchJobThatSucceededIsNeverLaunchedAgain(t *testing.T) {
	job := `
job "short" {
  nodes         = 2
  gpus_per_node = 1
  launcher      = "plain"
  command       = ["sh", "-c", "echo done on $NODE_RANK; sleep 1"]
}
`
	sb, dir := sandboxJobs(t, 4, job)
	_ = sb
	mustApply(t, dir)
	waitNodeEnded(t, dir, "short", 0)
	first := waitNodeEnded(t, dir, "short", 1)
	code, out, errOut := runCmd(t, "plan", dir, "--detailed-exitcode")
	if code != 0 || !strings.Contains(out, `✓ job "short" succeeded`) || !strings.Contains(out, "2/2 nodes exited 0") {
		t.Fatalf("plan of a finished job: exit %d\n%s%s", code, out, errOut)
	}
	for range 2 {
		mustApply(t, dir)
		st := loadState(t, dir)
		if j := st.Job("short"); j.RunID != first.RunID || j.Status != state.JobSucceeded {
			t.Fatalf("after another apply: %+v", j)
		}
	}
	if _, out, _ := runCmd(t, "status", dir); !strings.Contains(out, "succeeded") {
		t.Errorf("status:\n%s", out)
	}
	out = mustApply(t, dir, "--replace", "job.short")
	if !strings.Contains(out, "replace_requested") || !strings.Contains(out, "1 replaced") {
		t.Errorf("--replace:\n%s", out)
	}
	again := loadState(t, dir).Job("short")
	if again.RunID == first.RunID || len(again.History) != 1 || again.History[0].RunID != first.RunID || again.History[0].Status != state.JobSucceeded {
		t.Errorf("after --replace: %+v", again)
	}
	waitNodeEnded(t, dir, "short", 1)
	writeFile(t, dir+"/jobs.hcl", strings.Replace(job, "echo done", "echo finished", 1))
	out = mustApply(t, dir)
	if !strings.Contains(out, "config_changed") {
		t.Errorf("a changed command:\n%s", out)
	}
}

// TestAFailedNodeEndsItsGangAndItsPolicyRestartsIt: node 1 exits 3 while
// node 0 sleeps. With attempts = 2 the gang is restarted twice (new run
// ids, node 0 stopped each time), then, with no restart left, node 0 is
// stopped and the job stays failed: no later apply launches it.
func TestAFailedNodeEndsItsGangAndItsPolicyRestartsIt(t *testing.T) {
	_, dir := sandboxJobs(t, 4, `
job "flaky" {
  nodes         = 2
  gpus_per_node = 1
  launcher      = "plain"
  stop_timeout  = "2s"
  command       = ["sh", "-c", "if [ $NODE_RANK = 1 ]; then sleep 1; echo boom; exit 3; fi; exec sleep 300"]
  restart {
    attempts = 2
    delay    = "0s"
  }
}
`)
	mustApply(t, dir)
	var runs []string
	for i := 1; i <= 2; i++ {
		j := waitNodeEnded(t, dir, "flaky", 1)
		runs = append(runs, j.RunID)
		out := mustApply(t, dir)
		if !strings.Contains(out, "restart "+strconv.Itoa(i)+" of 2 after failures") {
			t.Fatalf("restart %d:\n%s", i, out)
		}
		if left := runProcesses(j.RunID); len(left) > 0 {
			t.Fatalf("run %s still has processes %v after its restart", j.RunID, left)
		}
	}
	j := waitNodeEnded(t, dir, "flaky", 1)
	out := mustApply(t, dir)
	if !strings.Contains(out, "no restart is left (attempts = 2, 2 used)") {
		t.Fatalf("the last failure:\n%s", out)
	}
	if left := runProcesses(j.RunID); len(left) > 0 {
		t.Errorf("node 0 of the failed run still runs: %v", left)
	}
	st := loadState(t, dir).Job("flaky")
	if st.Status != state.JobFailed || st.Restarts != 2 || len(st.History) != 2 || st.History[0].RunID != runs[0] {
		t.Errorf("state: %+v", st)
	}
	code, out, _ := runCmd(t, "plan", dir, "--detailed-exitcode")
	if code != 0 || !strings.Contains(out, `! job "flaky" failed`) || !strings.Contains(out, "--replace job.flaky") || !strings.Contains(out, "| boom") {
		t.Errorf("plan of a failed job: exit %d\n%s", code, out)
	}
}

// TestExitCodesThatAreRetriedOrNeverRetried: retry_exit_codes restart a
// job whatever its attempts, without counting; fail_exit_codes never do.
func TestExitCodesThatAreRetriedOrNeverRetried(t *testing.T) {
	_, dir := sandboxJobs(t, 4, `
job "retried" {
  nodes         = 1
  gpus_per_node = 1
  launcher      = "plain"
  command       = ["sh", "-c", "sleep 1; exit 75"]
  restart {
    retry_exit_codes = [75]
    delay            = "0s"
  }
}
job "fatal" {
  nodes         = 1
  gpus_per_node = 1
  launcher      = "plain"
  command       = ["sh", "-c", "sleep 1; exit 2"]
  restart {
    attempts        = 5
    fail_exit_codes = [2]
    delay           = "0s"
  }
}
`)
	mustApply(t, dir)
	waitNodeEnded(t, dir, "retried", 0)
	waitNodeEnded(t, dir, "fatal", 0)
	out := mustApply(t, dir)
	if !strings.Contains(out, "retry_exit_codes (not counted)") {
		t.Errorf("exit 75:\n%s", out)
	}
	st := loadState(t, dir)
	if j := st.Job("retried"); j.Restarts != 0 || j.Status == state.JobFailed {
		t.Errorf("retried: %+v", j)
	}
	if j := st.Job("fatal"); j.Status != state.JobFailed || j.Restarts != 0 {
		t.Errorf("fatal: %+v", j)
	}
}

// TestANodeKilledByHandFailsTheJobWithItsSignal: SIGKILL to a node's
// command is a failure of the job, recorded with the signal.
func TestANodeKilledByHandFailsTheJobWithItsSignal(t *testing.T) {
	_, dir := sandboxJobs(t, 4, `
job "victim" {
  nodes         = 1
  gpus_per_node = 1
  launcher      = "plain"
  command       = ["sleep", "300"]
}
`)
	mustApply(t, dir)
	j := loadState(t, dir).Job("victim")
	leader := j.Nodes[0].Process.PID
	var cmd int
	for _, p := range runProcesses(j.RunID) {
		if p != leader {
			cmd = p
		}
	}
	if cmd == 0 {
		t.Fatal("no command process")
	}
	syscall.Kill(cmd, syscall.SIGKILL)
	waitNodeEnded(t, dir, "victim", 0)
	mustApply(t, dir)
	got := loadState(t, dir).Job("victim")
	if got.Status != state.JobFailed || got.Nodes[0].End == nil || got.Nodes[0].End.Signal != "KILL" {
		t.Fatalf("state: %+v %+v", got, got.Nodes[0].End)
	}
}

// TestAHostThatDoesNotAnswerIsUnknownThenLost: a node's machine stops
// answering. Within lost_after the job is unknown and left alone; after
// it, the gang is lost and placed again, away from that machine, under
// on_lost.
func TestAHostThatDoesNotAnswerIsUnknownThenLost(t *testing.T) {
	sb, dir := sandboxJobs(t, 4, `
job "far" {
  nodes         = 1
  gpus_per_node = 1
  launcher      = "plain"
  stop_timeout  = "1s"
  command       = ["sleep", "300"]
  restart {
    lost_after = "2s"
  }
}
`)
	mustApply(t, dir)
	first := loadState(t, dir).Job("far")
	down := first.Nodes[0].Host
	sb.SetReachable(down, false)
	out := mustApply(t, dir)
	if strings.Contains(out, "replaced") && !strings.Contains(out, "0 replaced") {
		t.Fatalf("a host that did not answer once got its job replaced:\n%s", out)
	}
	if j := loadState(t, dir).Job("far"); j.RunID != first.RunID || j.Nodes[0].UnreachableSince == nil {
		t.Fatalf("unknown: %+v", j)
	}
	time.Sleep(2100 * time.Millisecond)
	code, out, errOut := runCmd(t, "apply", dir, "--auto-approve")
	if !strings.Contains(out, "after lost nodes") || !strings.Contains(out, "1 replaced") {
		t.Fatalf("lost: exit %d\n%s%s", code, out, errOut)
	}
	again := loadState(t, dir).Job("far")
	if again.Nodes[0].Host == down || again.LostRestarts != 1 {
		t.Errorf("relaunched %+v", again)
	}
	// The old run could not be stopped on the machine that is down: it
	// is kept, and stopped once the machine answers.
	sb.SetReachable(down, true)
	mustApply(t, dir)
	if left := runProcesses(first.RunID); len(left) > 0 {
		t.Errorf("the lost run's processes %v survived once its machine answered", left)
	}
}

// TestAServiceIsRestartedWhenItExits: kind = "service" runs again after
// exiting 0.
func TestAServiceIsRestartedWhenItExits(t *testing.T) {
	_, dir := sandboxJobs(t, 4, `
job "server" {
  kind          = "service"
  nodes         = 1
  gpus_per_node = 1
  launcher      = "plain"
  command       = ["sh", "-c", "sleep 1"]
  restart {
    delay = "0s"
  }
}
`)
	mustApply(t, dir)
	first := waitNodeEnded(t, dir, "server", 0)
	out := mustApply(t, dir)
	if !strings.Contains(out, "the service ended") || !strings.Contains(out, "1 replaced") {
		t.Fatalf("a service that exited:\n%s", out)
	}
	if j := loadState(t, dir).Job("server"); j.RunID == first.RunID {
		t.Error("not relaunched")
	}
}

// TestACommandThatEndsDuringTheStartUpCheckIsASuccess: `echo done` exits
// 0 before apply checks it: the launch succeeded, apply exits 0, and the
// job is done.
func TestACommandThatEndsDuringTheStartUpCheckIsASuccess(t *testing.T) {
	_, dir := sandboxJobs(t, 4, `
job "quick" {
  nodes         = 1
  gpus_per_node = 1
  launcher      = "plain"
  command       = ["echo", "done"]
}
`)
	out := mustApply(t, dir)
	if !strings.Contains(out, "1 launched") {
		t.Fatalf("apply:\n%s", out)
	}
	code, out, _ := runCmd(t, "plan", dir, "--detailed-exitcode")
	if code != 0 || !strings.Contains(out, "succeeded") {
		t.Errorf("plan: exit %d\n%s", code, out)
	}
	_ = reconcile.EndSucceeded
}

// TestACommandThatFailsDuringTheStartUpCheckIsNotPromisedAReplacement: a
// command that exits 5 at once, with no restart left, failed (its run
// failed, the plan has no changes and says "--replace"). apply's last
// line said "the next plan replaces them" all the same; it sends the user
// to the plan, and the plan shows the log's end on one readable line.
func TestACommandThatFailsDuringTheStartUpCheckIsNotPromisedAReplacement(t *testing.T) {
	_, dir := sandboxJobs(t, 1, `
job "quickfail" {
  nodes         = 1
  gpus_per_node = 1
  launcher      = "plain"
  command       = ["sh", "-c", "echo nope; exit 5"]
}
`)
	code, out, errOut := runCmd(t, "apply", dir, "--auto-approve")
	if code != 1 || strings.Contains(errOut, "replaces") || !strings.Contains(errOut, "1 job failed to launch (the next plan says whether apply launches it again)") {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "plan", dir, "--detailed-exitcode")
	if code != 0 || !strings.Contains(out, "gpulayer apply --replace job.quickfail") || strings.ContainsRune(out, '\uFFFD') ||
		!strings.Contains(out, "(exit status 5); the log ends with: nope") {
		t.Errorf("plan: exit %d\n%s%s", code, out, errOut)
	}
}

// TestAStalledJobIsRestartedAndOneThatBeatsIsNot: with stall_timeout, a
// job whose nodes neither log nor touch GPULAYER_HEARTBEAT_FILE for that
// long has stalled: a failure, restarted by its policy. One that touches
// its heartbeat file is left running.
func TestAStalledJobIsRestartedAndOneThatBeatsIsNot(t *testing.T) {
	_, dir := sandboxJobs(t, 4, `
job "hung" {
  nodes         = 1
  gpus_per_node = 1
  launcher      = "plain"
  stop_timeout  = "1s"
  stall_timeout = "2s"
  command       = ["sleep", "300"]
  restart {
    attempts = 1
    delay    = "0s"
  }
}
job "alive" {
  nodes         = 1
  gpus_per_node = 1
  launcher      = "plain"
  stop_timeout  = "1s"
  stall_timeout = "2s"
  command       = ["sh", "-c", "while :; do touch \"$GPULAYER_HEARTBEAT_FILE\"; sleep 0.3; done"]
}
`)
	mustApply(t, dir)
	before := loadState(t, dir)
	time.Sleep(3500 * time.Millisecond)
	out := mustApply(t, dir)
	if !strings.Contains(out, "stall_timeout 2s") || !strings.Contains(out, "restart 1 of 1 after failures") {
		t.Fatalf("a stalled job:\n%s", out)
	}
	after := loadState(t, dir)
	if after.Job("hung").RunID == before.Job("hung").RunID {
		t.Error("the stalled job was not restarted")
	}
	if after.Job("alive").RunID != before.Job("alive").RunID || after.Job("alive").Status != state.JobRunning {
		t.Errorf("the job that touches its heartbeat file was disturbed: %+v", after.Job("alive"))
	}
}

// TestSucceededAndFailedJobsOverOpenSSH: the lifecycle against OpenSSH's
// sshd (the machine's real login shell, dash as sh on Debian): a job that
// exits 0 succeeds and is not launched again; one that exits 3 fails and
// stays failed.
func TestSucceededAndFailedJobsOverOpenSSH(t *testing.T) {
	dir := opensshFleet(t, `
job "ok" {
  nodes         = 1
  gpus_per_node = 1
  launcher      = "plain"
  command       = ["sh", "-c", "sleep 1; echo fine"]
}
job "bad" {
  nodes         = 1
  gpus_per_node = 1
  launcher      = "plain"
  command       = ["sh", "-c", "sleep 1; echo broken; exit 3"]
}
`)
	mustApply(t, dir)
	waitNodeEnded(t, dir, "ok", 0)
	waitNodeEnded(t, dir, "bad", 0)
	mustApply(t, dir)
	st := loadState(t, dir)
	if j := st.Job("ok"); j.Status != state.JobSucceeded {
		t.Errorf("ok: %+v", j)
	}
	if j := st.Job("bad"); j.Status != state.JobFailed || j.Nodes[0].End == nil || *j.Nodes[0].End.ExitStatus != 3 {
		t.Errorf("bad: %+v", j)
	}
	code, out, _ := runCmd(t, "plan", dir, "--detailed-exitcode")
	if code != 0 || !strings.Contains(out, `✓ job "ok" succeeded`) || !strings.Contains(out, `! job "bad" failed`) || !strings.Contains(out, "| broken") {
		t.Errorf("plan: exit %d\n%s", code, out)
	}
}

// TestStatusAndPlanShowACommandThatDiesAtStartReadably: a job whose
// command dies at start fails its launch; status's last failure and the
// next plan's failed run say so on one line with the log's last lines
// ("the log ends with: a | b"), and the node's log a line each under it,
// with no replacement character where a newline was.
func TestStatusAndPlanShowACommandThatDiesAtStartReadably(t *testing.T) {
	job := `
job "dies" {
  nodes         = 1
  gpus_per_node = 1
  launcher      = "plain"
  command       = ["sh", "-c", "echo first words; echo last words >&2; exit 3"]
}
`
	_, dir := sandboxJobs(t, 2, job)
	if code, out, errOut := runCmd(t, "apply", dir, "--auto-approve"); code == 0 || !strings.Contains(errOut, "| last words") {
		t.Fatalf("apply of a command that dies at start: exit %d\n%s%s", code, out, errOut)
	}
	const said = "(exit status 3); the log ends with: first words | last words"
	for _, args := range [][]string{{"status", dir}, {"plan", dir}} {
		_, out, _ := runCmd(t, args...)
		lines := strings.Split(out, "\n")
		at := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, said) })
		log := slices.IndexFunc(lines, func(l string) bool { return strings.TrimSpace(l) == "| first words" })
		if strings.Contains(out, "\uFFFD") || at < 0 || log < at || log+1 >= len(lines) || strings.TrimSpace(lines[log+1]) != "| last words" {
			t.Errorf("%s: want %q on one line, then the node's log a line each:\n%s", args[0], said, out)
		}
	}
}

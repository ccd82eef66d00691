package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// waitTestBound is far more than any wait below needs, and far less than
// the jobs that sleep 300 s: a wait that returns in time did not wait for
// them.
const waitTestBound = 60 * time.Second

// evalJob is a 2-node CPU-only batch job running command (a sh script);
// extra goes into its block.
func evalJob(command, extra string) string {
	return `
job "eval" {
  nodes         = 2
  gpus_per_node = 0
  launcher      = "plain"
  stop_timeout  = "2s"
  command       = ["sh", "-c", ` + jsonString(command) + `]
` + extra + `
}
`
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// applied starts a sandbox of two machines with job, applies it, and
// moves into its directory (wait and logs read the configuration there).
func applied(t *testing.T, job string) (dir string, st *state.State) {
	t.Helper()
	_, dir = sandboxJobs(t, 2, job)
	if code, out, errOut := runCmd(t, "apply", dir, "--auto-approve"); code != 0 || !strings.Contains(out, "Apply complete: 1 launched") {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	t.Chdir(dir)
	return dir, loadState(t, dir)
}

// timedWait runs gpulayer wait and fails the test when it took longer
// than waitTestBound.
func timedWait(t *testing.T, args ...string) (code int, stdout, stderr string, took time.Duration) {
	t.Helper()
	start := time.Now()
	code, stdout, stderr = runCmd(t, append([]string{"wait"}, args...)...)
	took = time.Since(start)
	if took > waitTestBound {
		t.Fatalf("wait %v took %s", args, took)
	}
	return code, stdout, stderr, took
}

// TestWaitExitsZeroOnceEveryNodeExitedZero: a 2-node job that exits 0
// after a second or two: wait says it runs, then that it succeeded, and
// exits 0 without writing state; status says succeeded before any apply
// recorded it, and still once one did.
func TestWaitExitsZeroOnceEveryNodeExitedZero(t *testing.T) {
	dir, before := applied(t, evalJob("sleep 2", ""))
	code, out, errOut, _ := timedWait(t, "eval", "--interval", "1s")
	if code != 0 || !strings.Contains(errOut, `wait: job "eval" running (2/2 nodes)`) || !strings.Contains(errOut, `wait: job "eval" succeeded`) {
		t.Fatalf("wait: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Count(errOut, "running (2/2 nodes)") != 1 {
		t.Errorf("a line repeated while nothing changed:\n%s", errOut)
	}
	if after := loadState(t, dir); after.Serial != before.Serial {
		t.Errorf("wait wrote state: serial %d, then %d", before.Serial, after.Serial)
	}

	code, out, errOut = runCmd(t, "status", dir)
	if code != 0 || !strings.Contains(out, `job "eval"  succeeded`) || !strings.Contains(out, "2/2 nodes exited 0") ||
		!strings.Contains(out, "state records it running") || !strings.Contains(out, "restarts 0/0 after failures, 0/3 after lost nodes") {
		t.Errorf("status before an apply recorded the end: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCmd(t, "apply", dir, "--auto-approve"); code != 0 {
		t.Fatalf("apply recording the end: exit %d\n%s%s", code, out, errOut)
	}
	if st := loadState(t, dir); st.Job("eval") == nil || st.Job("eval").Status != state.JobSucceeded {
		t.Fatalf("state after the apply: %+v", st.Job("eval"))
	}
	code, out, errOut = runCmd(t, "status", dir, "--json")
	var report reconcile.StatusReport
	if err := json.Unmarshal([]byte(out), &report); code != 0 || err != nil || len(report.Jobs) != 1 {
		t.Fatalf("status --json: exit %d %v\n%s%s", code, err, out, errOut)
	}
	if js := report.Jobs[0]; js.Status != state.JobSucceeded || js.State != state.JobSucceeded || js.Restarts == nil || js.EndedAt == nil {
		t.Errorf("status --json of the recorded success: %+v", js)
	}
	// A job that is done is done: wait says so at once.
	if code, _, errOut, took := timedWait(t, "eval"); code != 0 || took > 10*time.Second || !strings.Contains(errOut, "succeeded") {
		t.Errorf("wait on a recorded success: exit %d after %s\n%s", code, took, errOut)
	}
}

// TestWaitAndStatusJudgeAJobWithCodeAsPlanDoes: the user's pipeline
// `apply && wait && logs` for a job whose code is uploaded: wait exits 0
// once it succeeded (it once timed out, the job "pending: code_changed"
// because status and wait did not read the code), status says succeeded,
// and says code_changed only once the code did change. Where the source
// cannot be read, status warns and does not claim a change.
func TestWaitAndStatusJudgeAJobWithCodeAsPlanDoes(t *testing.T) {
	_, dir := sandboxJobs(t, 2, `
job "eval" {
  nodes         = 2
  gpus_per_node = 0
  launcher      = "plain"
  stop_timeout  = "2s"
  code {
    source = "./src"
  }
  command = ["sh", "run.sh"]
}
`)
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(src, "run.sh"), "sleep 1; echo evaluated\n")
	if code, out, errOut := runCmd(t, "apply", dir, "--auto-approve"); code != 0 || !strings.Contains(out, "Apply complete: 1 launched") {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	t.Chdir(dir)
	code, out, errOut, _ := timedWait(t, "eval", "--interval", "1s", "--timeout", "30s")
	if code != 0 || !strings.Contains(errOut, `wait: job "eval" succeeded`) {
		t.Fatalf("wait: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "status", dir)
	if code != 0 || !strings.Contains(out, `job "eval"  succeeded`) || strings.Contains(out, "code_changed") {
		t.Errorf("status of the finished job: exit %d\n%s%s", code, out, errOut)
	}
	writeFile(t, filepath.Join(src, "run.sh"), "sleep 1; echo evaluated again\n")
	if code, out, errOut = runCmd(t, "status", dir); code != 0 || !strings.Contains(out, "code_changed") {
		t.Errorf("status after an edit of the code: exit %d\n%s%s", code, out, errOut)
	}
	if err := os.RemoveAll(src); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCmd(t, "status", dir)
	if code != 0 || strings.Contains(out, "code_changed") || !strings.Contains(errOut, "its code is taken as state records it") {
		t.Errorf("status without the source: exit %d\n%s%s", code, out, errOut)
	}
}

// TestWaitExitsOneWhenANodeFails: node 1 exits 3 and the job allows no
// restart: wait says how it failed and exits 1, though node 0 still runs
// (the next apply stops it).
func TestWaitExitsOneWhenANodeFails(t *testing.T) {
	dir, before := applied(t, evalJob(`if [ "$NODE_RANK" = 1 ]; then sleep 1; exit 3; fi; sleep 300`, "  restart {\n    attempts = 0\n  }"))
	code, out, errOut, _ := timedWait(t, "eval", "--interval", "1s")
	if code != 1 || !strings.Contains(errOut, `wait: job "eval" failed: node 1 on `) || !strings.Contains(errOut, "exited with status 3") ||
		!strings.Contains(errOut, `Error: job "eval" failed`) {
		t.Fatalf("wait: exit %d\n%s%s", code, out, errOut)
	}
	if after := loadState(t, dir); after.Serial != before.Serial {
		t.Errorf("wait wrote state: serial %d, then %d", before.Serial, after.Serial)
	}
	code, out, errOut = runCmd(t, "status", dir)
	if code != 0 || !strings.Contains(out, `job "eval"  failed`) || !strings.Contains(out, "last failure: node_failed: node 1 on") ||
		!strings.Contains(out, "run it again with: gpulayer apply --replace job.eval") {
		t.Errorf("status of the failed job: exit %d\n%s%s", code, out, errOut)
	}
}

// TestWaitTimesOutWithoutTakingTheLock: a job that sleeps 300 s, and the
// state lock held by someone else all along: wait --timeout 2s says the
// job runs, gives up after 2 s and exits 2.
func TestWaitTimesOutWithoutTakingTheLock(t *testing.T) {
	dir, _ := applied(t, evalJob("sleep 300", ""))
	lock, err := state.NewLocal(filepath.Join(dir, ".gpulayer", "state.json")).Lock(context.Background(), state.NewLockInfo("gpulayer apply (elsewhere)"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	code, out, errOut, took := timedWait(t, "eval", "--timeout", "2s", "--interval", "1s")
	if code != 2 || took < 2*time.Second || took > 15*time.Second || !strings.Contains(errOut, `wait: job "eval" running (2/2 nodes)`) ||
		!strings.Contains(errOut, `timed out after 2s: job "eval" running (2/2 nodes)`) {
		t.Fatalf("wait --timeout 2s: exit %d after %s\n%s%s", code, took, out, errOut)
	}
}

// TestWaitOnAHostThatDoesNotAnswerKeepsWaiting: a node's machine stops
// answering: the job is unknown, not lost (lost_after has not passed, and
// wait records nothing), so wait goes on until its timeout.
func TestWaitOnAHostThatDoesNotAnswerKeepsWaiting(t *testing.T) {
	sb, dir := sandboxJobs(t, 2, evalJob("sleep 300", ""))
	if code, out, errOut := runCmd(t, "apply", dir, "--auto-approve"); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	t.Chdir(dir)
	down := loadState(t, dir).Job("eval").Nodes[1].Host
	if err := sb.SetReachable(down, false); err != nil {
		t.Fatal(err)
	}
	// Before destroy (cleanups run last first), so that it stops the run.
	t.Cleanup(func() { _ = sb.SetReachable(down, true) })
	code, out, errOut, _ := timedWait(t, "eval", "--timeout", "3s", "--interval", "1s")
	if code != 2 || !strings.Contains(errOut, `wait: job "eval" unknown (1 of 2 nodes' hosts did not answer)`) {
		t.Fatalf("wait with %s down: exit %d\n%s%s", down, code, out, errOut)
	}
}

// TestWaitFollowsARestartAndStatusListsBothRuns: each node fails its first
// run (exit 3, leaving a marker) and succeeds its second; the job may
// restart once. wait says restarting, which is not terminal; once apply
// restarted it, wait exits 0, and status eval lists both runs with how
// each node ended, the restart used and the first run's failure.
func TestWaitFollowsARestartAndStatusListsBothRuns(t *testing.T) {
	work := t.TempDir()
	script := `m="marker-$NODE_RANK"; if [ -e "$m" ]; then sleep 1; exit 0; fi; touch "$m"; sleep 1; exit 3`
	dir, _ := applied(t, evalJob(script, "  workdir = "+jsonString(work)+"\n  restart {\n    attempts = 1\n    delay    = \"0s\"\n  }"))
	first := loadState(t, dir).Job("eval").RunID
	code, out, errOut, _ := timedWait(t, "eval", "--timeout", "4s", "--interval", "1s")
	if code != 2 || !strings.Contains(errOut, `wait: job "eval" restarting: the run failed: node `) ||
		!strings.Contains(errOut, "restart 1 of 1 after failures; the next apply restarts it") {
		t.Fatalf("wait before the restart: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCmd(t, "apply", dir, "--auto-approve"); code != 0 || !strings.Contains(out, "1 replaced") {
		t.Fatalf("apply restarting the job: exit %d\n%s%s", code, out, errOut)
	}
	second := loadState(t, dir).Job("eval")
	if second.RunID == first || second.Restarts != 1 || len(second.History) != 1 {
		t.Fatalf("the restarted job: %+v", second)
	}
	if code, out, errOut, _ := timedWait(t, "eval", "--interval", "1s"); code != 0 || !strings.Contains(errOut, `wait: job "eval" succeeded`) {
		t.Fatalf("wait after the restart: exit %d\n%s%s", code, out, errOut)
	}

	code, out, errOut = runCmd(t, "status", "eval")
	if code != 0 {
		t.Fatalf("status eval: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		`job "eval"  succeeded  run ` + second.RunID,
		"restarts 1/1 after failures, 0/3 after lost nodes",
		"last failure: node_failed: node ",
		"(run " + first,
		"runs, oldest first:",
		"failed (node_failed)",
		"node 0 exit 3, node 1 exit 3",
		second.RunID + " (current)",
		"node 0 exit 0, node 1 exit 0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status eval lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, first+" ") > strings.Index(out, second.RunID+" (current)") {
		t.Errorf("runs are not oldest first:\n%s", out)
	}
	code, out, errOut = runCmd(t, "status", "eval", "--json")
	var report reconcile.StatusReport
	if err := json.Unmarshal([]byte(out), &report); code != 0 || err != nil || len(report.Jobs) != 1 {
		t.Fatalf("status eval --json: exit %d %v\n%s%s", code, err, out, errOut)
	}
	runs := report.Jobs[0].Runs
	if report.Job != "eval" || len(runs) != 2 || runs[0].RunID != first || runs[0].State != state.JobFailed || len(runs[0].Nodes) != 2 ||
		runs[1].RunID != second.RunID || !runs[1].Current || runs[1].State != state.JobSucceeded {
		t.Errorf("status eval --json runs: %+v", runs)
	}
}

// TestWaitRefusesWhatItCannotWaitFor: a job neither declared nor in
// state, and an interval below a second, are errors naming them.
func TestWaitRefusesWhatItCannotWaitFor(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.hcl"), `fleet "lab" {
  host "a1" { address = "10.1.0.11" }
}
job "eval" {
  nodes   = 1
  command = ["true"]
}
`)
	t.Chdir(dir)
	if code, out, errOut, _ := timedWait(t, "eval", "nosuch"); code != 1 || !strings.Contains(errOut, `no job "nosuch" is declared or recorded in state`) {
		t.Errorf("wait on an unknown job: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut, _ := timedWait(t, "eval", "--interval", "500ms"); code != 1 || !strings.Contains(errOut, "--interval must be at least 1s") {
		t.Errorf("wait --interval 500ms: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCmd(t, "wait", "--help"); code != 0 || !strings.Contains(out, "Exit status:") || !strings.Contains(out, "2    --timeout passed first") {
		t.Errorf("wait --help: exit %d\n%s%s", code, out, errOut)
	}
}

// TestWaitAndStatusOfAWaitingJobDoNotPromiseThatApplyLaunchesIt: a job no
// group of the fleet can hold (on_unschedulable = "wait") is "waiting" in
// every plan, and apply leaves it so. wait and status, which do not place
// jobs, said "gpulayer apply launches it" of it all the same; they send
// the user to the plan, which says why it waits.
func TestWaitAndStatusOfAWaitingJobDoNotPromiseThatApplyLaunchesIt(t *testing.T) {
	_, dir := sandboxJobs(t, 2, `
policy "one_rack" {
  group_locality   = "network_group"
  on_unschedulable = "wait"
}
job "big" {
  policy        = policy.one_rack
  nodes         = 3
  gpus_per_node = 1
  launcher      = "plain"
  command       = ["sleep", "60"]
}
`)
	code, out, errOut := runCmd(t, "apply", dir, "--auto-approve")
	if code != 0 || !strings.Contains(out, `job "big" is waiting`) || !strings.Contains(out, "No changes to apply; 1 waiting.") {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	t.Chdir(dir)
	code, out, errOut, _ = timedWait(t, "big", "--timeout", "1s", "--interval", "1s")
	if code != 2 || strings.Contains(errOut, "apply launches it") || !strings.Contains(errOut, `job "big" pending: not launched yet; gpulayer plan says whether apply can place it`) {
		t.Errorf("wait big: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "status", "big")
	if code != 1 || strings.Contains(errOut, "apply launches it") || !strings.Contains(errOut, `job "big" has not been launched: state records no run of it (gpulayer plan says whether apply can place it)`) {
		t.Errorf("status big: exit %d\n%s%s", code, out, errOut)
	}
}

// TestStatusOfTwoJobsSaysItShowsOne: "status multi train" read "multi" as
// the configuration directory and failed with "Cannot read configuration
// directory ... Reading multi: no such file or directory".
func TestStatusOfTwoJobsSaysItShowsOne(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.hcl"), `fleet "lab" {
  host "a1" { address = "10.1.0.11" }
}
job "eval" {
  nodes   = 1
  command = ["true"]
}
`)
	t.Chdir(dir)
	code, out, errOut := runCmd(t, "status", "eval", "train")
	if code != 1 || strings.Contains(errOut, "configuration directory") ||
		!strings.Contains(errOut, `status shows one JOB or every job: "eval" is not a directory (gpulayer status [DIR] [JOB])`) {
		t.Errorf("status eval train: exit %d\n%s%s", code, out, errOut)
	}
}

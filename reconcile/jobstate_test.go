package reconcile_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/planview"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// batchHCL is a 2-node batch job restarted once after a failure, at once.
const batchHCL = `
job "eval" {
  nodes         = 2
  gpus_per_node = 1
  launcher      = "plain"
  command       = ["python", "eval.py"]
  restart {
    attempts = 1
    delay    = "0s"
  }
}
`

// evalRunning is batchHCL's job running on a1 and a2, with the facts
// showing both processes alive.
func evalRunning(t *testing.T, hcl ...string) (*config.Config, *state.State, *facts.Document) {
	t.Helper()
	if len(hcl) == 0 {
		hcl = []string{batchHCL}
	}
	cfg := loadConfig(t, append([]string{fleetHCL}, hcl...)...)
	st, doc := state.New(), fleetFacts()
	running(t, st, doc, cfg, "eval", "r-eval1", map[string][]int{"a1": {0}, "a2": {0}}, "a1", "a2")
	return cfg, st, doc
}

// exited makes the facts say the process of job's node on host exited
// with status.
func exited(doc *facts.Document, host string, status int) {
	h := doc.Find(host)
	h.PIDs[0] = facts.PID{PID: h.PIDs[0].PID, Alive: false, ExitStatus: &status, LogTail: []string{"done"}}
	for i := range h.GPUs {
		h.GPUs[i].Processes = nil
	}
}

// TestJudgeJobReadsTheLifecyclePass: the state status and wait give a
// job, read from a plan's lifecycle pass (or, where it does not judge, the
// record and the refresh's liveness), and whether it is terminal.
func TestJudgeJobReadsTheLifecyclePass(t *testing.T) {
	cases := []struct {
		name     string
		build    func(t *testing.T) reconcile.Input
		want     string
		terminal bool
		running  int
		message  string
	}{
		{
			name:  "every node runs",
			build: func(t *testing.T) reconcile.Input { cfg, st, doc := evalRunning(t); return input(cfg, st, doc) },
			want:  reconcile.RunRunning, running: 2,
		},
		{
			name: "one node exited 0, the other runs",
			build: func(t *testing.T) reconcile.Input {
				cfg, st, doc := evalRunning(t)
				exited(doc, "a1", 0)
				return input(cfg, st, doc)
			},
			want: reconcile.RunRunning, running: 1,
		},
		{
			name: "every node exited 0, before any apply recorded it",
			build: func(t *testing.T) reconcile.Input {
				cfg, st, doc := evalRunning(t)
				exited(doc, "a1", 0)
				exited(doc, "a2", 0)
				return input(cfg, st, doc)
			},
			want: state.JobSucceeded, terminal: true, message: "2/2 nodes exited 0",
		},
		{
			name: "a node failed and no restart is left",
			build: func(t *testing.T) reconcile.Input {
				cfg, st, doc := evalRunning(t, strings.Replace(batchHCL, "attempts = 1", "attempts = 0", 1))
				exited(doc, "a2", 3)
				return input(cfg, st, doc)
			},
			want: state.JobFailed, terminal: true, running: 1, message: "node 1 on a2 exited with status 3",
		},
		{
			name: "a node failed and the policy restarts it now",
			build: func(t *testing.T) reconcile.Input {
				cfg, st, doc := evalRunning(t)
				exited(doc, "a2", 3)
				return input(cfg, st, doc)
			},
			want: state.JobRestarting, running: 1, message: "restart 1 of 1 after failures; the next apply restarts it",
		},
		{
			name: "a node failed and its restart waits out a delay",
			build: func(t *testing.T) reconcile.Input {
				cfg, st, doc := evalRunning(t, strings.Replace(batchHCL, `"0s"`, `"30s"`, 1))
				exited(doc, "a2", 3)
				return input(cfg, st, doc)
			},
			want: state.JobRestarting, running: 1, message: "once its restart delay has passed",
		},
		{
			name: "the restart's time is said once state records it",
			build: func(t *testing.T) reconcile.Input {
				cfg, st, doc := evalRunning(t, strings.Replace(batchHCL, `"0s"`, `"30s"`, 1))
				exited(doc, "a2", 3)
				j := &st.Jobs[0]
				ended, due := planNow.Add(-time.Second), planNow.Add(29*time.Second)
				status := 3
				j.Status, j.EndReason, j.Error, j.EndedAt, j.RestartAt = state.JobRestarting, reconcile.EndFailed, "node 1 on a2 exited with status 3", &ended, &due
				j.Nodes[1].End = &state.NodeEnd{Rank: 1, ExitStatus: &status, EndedAt: ended}
				return input(cfg, st, doc)
			},
			want: state.JobRestarting, message: "the first apply after 2026-12-01T12:00:29Z restarts it",
		},
		{
			name: "a host does not answer",
			build: func(t *testing.T) reconcile.Input {
				cfg, st, doc := evalRunning(t)
				*doc.Find("a2") = facts.Host{Name: "a2", Fleet: "lab", Address: "10.1.0.12", Status: facts.StatusUnreachable, GPUs: []facts.GPU{}, FreeGPUs: []int{}}
				return input(cfg, st, doc)
			},
			want: reconcile.RunUnknown, running: 1, message: "1 of 2 nodes' hosts did not answer",
		},
		{
			name: "its configuration changed: the next apply runs it again",
			build: func(t *testing.T) reconcile.Input {
				_, st, doc := evalRunning(t)
				return input(loadConfig(t, fleetHCL, strings.Replace(batchHCL, "eval.py", "eval2.py", 1)), st, doc)
			},
			want: reconcile.JobPending, running: 2, message: "config_changed",
		},
		{
			name: "its configuration changed after it succeeded",
			build: func(t *testing.T) reconcile.Input {
				_, st, doc := evalRunning(t)
				st.Jobs[0].Status, st.Jobs[0].EndReason = state.JobSucceeded, reconcile.EndSucceeded
				exited(doc, "a1", 0)
				exited(doc, "a2", 0)
				return input(loadConfig(t, fleetHCL, strings.Replace(batchHCL, "eval.py", "eval2.py", 1)), st, doc)
			},
			want: reconcile.JobPending, message: "config_changed",
		},
		{
			name: "not launched yet",
			build: func(t *testing.T) reconcile.Input {
				return input(loadConfig(t, fleetHCL, batchHCL), state.New(), fleetFacts())
			},
			want: reconcile.JobPending, message: "not launched yet",
		},
		{
			name: "its launch failed",
			build: func(t *testing.T) reconcile.Input {
				cfg, st, doc := evalRunning(t)
				st.Jobs[0].Status, st.Jobs[0].Error = state.JobFailed, "node 0 on a1: python: not found"
				exited(doc, "a1", 127)
				exited(doc, "a2", 143)
				return input(cfg, st, doc)
			},
			want: state.JobFailed, terminal: true, message: "the launch failed: node 0 on a1: python: not found",
		},
		{
			name: "an apply is launching it",
			build: func(t *testing.T) reconcile.Input {
				cfg, st, doc := evalRunning(t)
				st.Jobs[0].Status = state.JobLaunching
				return input(cfg, st, doc)
			},
			want: state.JobLaunching, running: 2,
		},
		{
			name: "no longer declared, still running",
			build: func(t *testing.T) reconcile.Input {
				_, st, doc := evalRunning(t)
				return input(loadConfig(t, fleetHCL), st, doc)
			},
			want: reconcile.JobRemoved, running: 2,
		},
		{
			name: "no longer declared, and it had succeeded",
			build: func(t *testing.T) reconcile.Input {
				_, st, doc := evalRunning(t)
				st.Jobs[0].Status, st.Jobs[0].EndReason = state.JobSucceeded, reconcile.EndSucceeded
				exited(doc, "a1", 0)
				exited(doc, "a2", 0)
				return input(loadConfig(t, fleetHCL), st, doc)
			},
			want: state.JobSucceeded, terminal: true,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := c.build(t)
			in.Targets = []string{"eval"}
			p := reconcile.MakePlan(in)
			change := p.Job("eval")
			if change == nil {
				t.Fatalf("no change for eval: %+v", p.Jobs)
			}
			got := reconcile.JudgeJob(change, in.State.Job("eval"))
			if got.State != c.want || got.Terminal != c.terminal || got.Running != c.running || !strings.Contains(got.Message, c.message) {
				t.Errorf("state %q terminal %v running %d message %q; want %q %v %d containing %q (action %s, run %+v)",
					got.State, got.Terminal, got.Running, got.Message, c.want, c.terminal, c.running, c.message, change.Action, change.Run)
			}
		})
	}
}

// TestStatusListsRunsBudgetsAndTheLastFailure: a job restarted once after
// a failure, whose second run has just succeeded (no apply recorded it
// yet): the report and its rendering say succeeded, the restarts used of
// each budget, the first run's failure, and both runs with how each node
// ended; what machines said is sanitized.
func TestStatusListsRunsBudgetsAndTheLastFailure(t *testing.T) {
	cfg, st, doc := evalRunning(t)
	j := &st.Jobs[0]
	j.Restarts = 1
	three, zero := 3, 0
	ended := j.LaunchedAt.Add(-time.Minute)
	j.History = []state.Run{{RunID: "r-eval0", LaunchedAt: ended.Add(-time.Minute), EndedAt: &ended, Status: state.JobFailed,
		EndReason: reconcile.EndFailed, Message: "node 1 on a2 exited with status 3 \x1b[2J",
		Nodes: []state.NodeEnd{{Rank: 1, ExitStatus: &three, EndedAt: ended}, {Rank: 0, ExitStatus: &zero, EndedAt: ended}}}}
	exited(doc, "a1", 0)
	exited(doc, "a2", 0)
	in := input(cfg, st, doc)
	in.Targets = []string{"eval"}
	p := reconcile.MakePlan(in)
	r := reconcile.Status(reconcile.StatusInput{State: st, Facts: doc, Plan: p, Job: "eval", Now: planNow})
	if len(r.Jobs) != 1 {
		t.Fatalf("jobs %+v", r.Jobs)
	}
	js := r.Jobs[0]
	if js.Status != state.JobRunning || js.State != state.JobSucceeded {
		t.Errorf("status %q state %q, want running as recorded and succeeded as judged", js.Status, js.State)
	}
	if b := js.Restarts; b == nil || b.AfterFailures != (reconcile.Budget{Used: 1, Allowed: 1}) || b.AfterLost != (reconcile.Budget{Used: 0, Allowed: 3}) {
		t.Errorf("restarts %+v", js.Restarts)
	}
	if f := js.LastFailure; f == nil || f.RunID != "r-eval0" || f.EndReason != reconcile.EndFailed {
		t.Errorf("last failure %+v", js.LastFailure)
	}
	if len(js.Runs) != 2 || js.Runs[0].RunID != "r-eval0" || js.Runs[1].RunID != "r-eval1" || !js.Runs[1].Current ||
		js.Runs[1].State != state.JobSucceeded || len(js.Runs[1].Nodes) != 2 {
		t.Fatalf("runs %+v", js.Runs)
	}
	var out bytes.Buffer
	if err := planview.Status(&out, r, "local file state.json", planview.Options{}); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		`job "eval"  succeeded  run r-eval1`,
		"state records it running; the next apply records how it ended",
		"restarts 1/1 after failures, 0/3 after lost nodes",
		"last failure: node_failed: node 1 on a2 exited with status 3",
		"runs, oldest first:",
		"r-eval0            launched 2026-12-01T10:58:00Z  ended 2026-12-01T10:59:00Z  failed (node_failed)  node 1 exit 3, node 0 exit 0",
		"r-eval1 (current)  launched 2026-12-01T11:00:00Z  ended 2026-12-01T12:00:00Z  succeeded",
		"  node 0 exit 0, node 1 exit 0\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("status lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "\x1b") {
		t.Errorf("status carries a raw escape:\n%q", text)
	}

	// Without a job named, no runs are listed.
	r = reconcile.Status(reconcile.StatusInput{State: st, Facts: doc, Plan: p, Now: planNow})
	if len(r.Jobs) != 1 || r.Jobs[0].Runs != nil || r.Jobs[0].State != state.JobSucceeded {
		t.Errorf("report of every job %+v", r.Jobs)
	}
}

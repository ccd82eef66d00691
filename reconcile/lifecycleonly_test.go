package reconcile_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

const retryHCL = `
job "retry" {
  nodes         = 1
  gpus_per_node = 4
  launcher      = "plain"
  command       = ["python", "retry.py"]
  restart {
    attempts = 1
    delay    = "0s"
  }
}
`

const gangHCL = `
job "gang" {
  nodes         = 2
  gpus_per_node = 1
  launcher      = "plain"
  command       = ["python", "gang.py"]
}
`

const oldHCL = `
job "old" {
  nodes         = 1
  gpus_per_node = 4
  launcher      = "plain"
  command       = ["python", "old.py"]
}
`

// exited makes rank's process on host exit with status, and frees the
// GPUs it held there.
func nodeExited(doc *facts.Document, st *state.State, job string, rank, status int) {
	j := st.Job(job)
	n := j.Nodes[rank]
	h := doc.Find(n.Host)
	for i := range h.PIDs {
		if h.PIDs[i].PID == n.Process.PID {
			h.PIDs[i] = facts.PID{PID: n.Process.PID, ExitStatus: &status}
		}
	}
	for _, g := range n.GPUs {
		h.GPUs[g].Processes = slices.DeleteFunc(h.GPUs[g].Processes, func(p facts.Process) bool { return p.RunID == j.RunID })
	}
	finish(doc)
}

func leftWords(left []reconcile.LeftOut) []string {
	var out []string
	for _, l := range left {
		out = append(out, l.Words)
	}
	return out
}

// TestLifecycleOnlyKeepsRunEndsAndRestartsAndLeavesOutTheConfiguration:
// of a plan that launches a new job, replaces a changed one, destroys a
// removed one, restarts a failed one by its policy and stops the rest of
// a gang whose node failed, the lifecycle plan keeps only the restart and
// the stop, counts only them, and names every change it left out.
func TestLifecycleOnlyKeepsRunEndsAndRestartsAndLeavesOutTheConfiguration(t *testing.T) {
	applied := loadConfig(t, fleetHCL, trainHCL, retryHCL, gangHCL, oldHCL)
	st, doc := state.New(), fleetFacts()
	running(t, st, doc, applied, "train", "r-train", map[string][]int{"a1": {0, 1, 2, 3}, "a2": {0, 1, 2, 3}}, "a1", "a2")
	running(t, st, doc, applied, "retry", "r-retry", map[string][]int{"a3": {0, 1, 2, 3}}, "a3")
	running(t, st, doc, applied, "gang", "r-gang", map[string][]int{"a3": {4}, "b1": {0}}, "a3", "b1")
	running(t, st, doc, applied, "old", "r-old", map[string][]int{"b1": {4, 5, 6, 7}}, "b1")
	nodeExited(doc, st, "retry", 0, 1)
	nodeExited(doc, st, "gang", 1, 3)
	now := loadConfig(t, fleetHCL, strings.Replace(trainHCL, `"3"`, `"5"`, 1), evalHCL, retryHCL, gangHCL)
	p := reconcile.MakePlan(input(now, st, doc))

	kept, left := p.LifecycleOnly()
	var jobs []string
	for _, c := range kept.Jobs {
		jobs = append(jobs, c.Job+" "+string(c.Action))
	}
	if want := []string{"gang stop", "retry replace"}; !slices.Equal(jobs, want) {
		t.Errorf("kept %v, want %v", jobs, want)
	}
	if r := kept.Job("retry").Run; r == nil || !r.Restart || r.Budget != "attempts" {
		t.Errorf("retry's run %+v, want a restart under attempts", r)
	}
	want := []string{`job "eval": create (new_job)`, `job "old": destroy (removed_from_config)`, `job "train": replace (config_changed)`}
	if got := leftWords(left); !slices.Equal(got, want) {
		t.Errorf("left out %q, want %q", got, want)
	}
	if s := kept.Summary; s.Launch != 0 || s.Replace != 1 || s.Stop != 1 || !kept.HasChanges() {
		t.Errorf("summary %+v", s)
	}
	if len(p.Jobs) != 5 || p.Summary.Launch != 1 {
		t.Errorf("the plan itself was changed: %d jobs, summary %+v", len(p.Jobs), p.Summary)
	}

	// Nothing but configuration changes: nothing to do, everything named.
	exitedNone := fleetFacts()
	st2 := state.New()
	running(t, st2, exitedNone, applied, "train", "r-train", map[string][]int{"a1": {0, 1, 2, 3}, "a2": {0, 1, 2, 3}}, "a1", "a2")
	p = reconcile.MakePlan(input(now, st2, exitedNone))
	kept, left = p.LifecycleOnly()
	if kept.HasChanges() || len(left) != 4 {
		t.Errorf("only configuration changes: kept %+v, left %q", kept.Jobs, leftWords(left))
	}
}

// TestHoldKeepsTheGPUsOfJobsLeftOut: a failed job's restart is placed on
// the GPUs a removed job frees, the only free ones; planned again holding
// that job, as gpulayer watch does, the restart waits instead, and no
// placement touches the held job's GPUs.
func TestHoldKeepsTheGPUsOfJobsLeftOut(t *testing.T) {
	applied := loadConfig(t, fleetHCL, retryHCL, oldHCL)
	st, doc := state.New(), fleetFacts()
	running(t, st, doc, applied, "old", "r-old", map[string][]int{"a1": {0, 1, 2, 3}}, "a1")
	running(t, st, doc, applied, "retry", "r-retry", map[string][]int{"a2": {0, 1, 2, 3}}, "a2")
	nodeExited(doc, st, "retry", 0, 1)
	for _, h := range []string{"a2", "a3", "b1"} {
		occupy(doc.Find(h), 9000) // someone took every other GPU meanwhile
	}
	a1 := doc.Find("a1")
	for g := 4; g < 8; g++ {
		a1.GPUs[g].Processes = append(a1.GPUs[g].Processes, facts.Process{PID: 9001})
	}
	now := loadConfig(t, fleetHCL, retryHCL)
	p := reconcile.MakePlan(input(now, st, doc))
	if c := p.Job("retry"); c.Action != reconcile.ActionReplace || c.Placement.Nodes[0].Host != "a1" {
		t.Fatalf("without hold: retry %s on %+v, want a replace on a1's GPUs that old frees", c.Action, c.Placement)
	}
	_, left := p.LifecycleOnly()
	if len(left) != 1 || left[0].Job != "old" {
		t.Fatalf("left out %+v, want old's destroy", left)
	}

	in := input(now, st, doc)
	in.Hold = []string{left[0].Job}
	held := reconcile.MakePlan(in)
	if held.Job("old") != nil {
		t.Errorf("a held job is in the plan: %+v", held.Job("old"))
	}
	c := held.Job("retry")
	if c == nil || c.Action != reconcile.ActionWaiting || c.Run == nil || !c.Run.Restart || c.Placement != nil {
		t.Fatalf("holding old: retry %+v, want a restart that waits", c)
	}
	kept, left := held.LifecycleOnly()
	if len(left) != 0 || kept.Job("retry") == nil {
		t.Errorf("held plan: kept %+v, left %+v", kept.Jobs, left)
	}
}

// TestLifecycleOnlyRecreatesLostMachinesOnly: a machine gone from its
// provider is created again and a preempted Spot VM replaced (with
// RecreatePreempted), and the gang that lost them waits for them under
// on_lost; the machine the fleet's count adds is left out.
func TestLifecycleOnlyRecreatesLostMachinesOnly(t *testing.T) {
	in, cfg := cloudInput(t, []string{"cloud-0", "cloud-1", "cloud-2"}, []string{"b1", "b1", "b1"}, true)
	running(t, in.State, in.Facts, cfg, "train", "r1", map[string][]int{"cloud-0": {0, 1, 2, 3, 4, 5, 6, 7}, "cloud-1": {0, 1, 2, 3, 4, 5, 6, 7}}, "cloud-0", "cloud-1")
	in.State.Machines[1].Spot = true
	listing := in.Listed["cloud"]
	listing.Machines = slices.Clone(listing.Machines[1:]) // cloud-0 is gone
	listing.Machines[0].Status = "TERMINATED"
	listing.Machines[0].Spot = true
	in.Listed["cloud"] = listing

	p := reconcile.MakePlan(in)
	if got := machineActions(p); !slices.Equal(got, []string{"create cloud-0 machine_missing", "create cloud-3 count_raised"}) {
		t.Errorf("without RecreatePreempted: machines %v", got)
	}
	in.RecreatePreempted = true
	p = reconcile.MakePlan(in)
	kept, left := p.LifecycleOnly()
	if got := machineActions(kept); !slices.Equal(got, []string{"create cloud-0 machine_missing", "replace cloud-1 machine_stopped"}) {
		t.Errorf("kept machines %v", got)
	}
	if got := leftWords(left); !slices.Equal(got, []string{`fleet "cloud": create machine cloud-3 (count_raised)`}) {
		t.Errorf("left out %q", got)
	}
	c := kept.Job("train")
	if c == nil || c.Action != reconcile.ActionWaiting || c.Run == nil || !c.Run.Restart || c.Run.Budget != "on_lost" || !hasReason(c, reconcile.ReasonMachinesPending) {
		t.Fatalf("train %+v, want a restart under on_lost waiting for the machines", c)
	}
	if s := kept.Summary; s.CreateMachines != 2 || s.DeleteMachines != 1 {
		t.Errorf("summary %+v", s)
	}

	// Once apply recorded the run as ended and restarting, a plan made
	// before the machines answer still has it wait for them, with nothing
	// left to stop.
	j := in.State.Job("train")
	ended := planNow.Add(-time.Minute)
	j.Status, j.EndReason, j.EndedAt, j.RestartAt = state.JobRestarting, reconcile.EndLost, &ended, &ended
	p = reconcile.MakePlan(in)
	c = p.Job("train")
	if c.Action != reconcile.ActionWaiting || c.StopPrior || c.Run == nil || !c.Run.Restart || !hasReason(c, reconcile.ReasonMachinesPending) {
		t.Errorf("restarting, before the machines answer: %+v, want a wait for them with nothing to stop", c)
	}
}

package reconcile_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/placement"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

const preferTrainHCL = `
job "train" {
  nodes         = 2
  gpus_per_node = 4
  command       = ["python", "train.py"]
}
`

// lostInput is train running on a1 and a2 (GPUs 0-3) with host lost not
// answering for longer than lost_after; busy hosts run a stranger on
// every GPU, and taken names a host whose GPUs 0-3 a stranger took.
func lostInput(t *testing.T, job, lost string, busy []string, taken string) reconcile.Input {
	t.Helper()
	cfg := loadConfig(t, fleetHCL, job)
	st, doc := state.New(), fleetFacts()
	running(t, st, doc, cfg, "train", "r-train1", map[string][]int{"a1": {0, 1, 2, 3}, "a2": {0, 1, 2, 3}}, "a1", "a2")
	for _, n := range st.Jobs[0].Nodes {
		if n.Host == lost {
			since := planNow.Add(-6 * time.Minute)
			st.Jobs[0].Nodes[n.Rank].UnreachableSince = &since
		}
	}
	h := doc.Find(lost)
	*h = facts.Host{Name: lost, Fleet: "lab", Address: h.Address, Status: facts.StatusUnreachable,
		Error: "dial tcp: i/o timeout", GPUs: []facts.GPU{}, FreeGPUs: []int{}}
	for _, b := range busy {
		fh := doc.Find(b)
		for g := range fh.GPUs {
			fh.GPUs[g].Processes = append(fh.GPUs[g].Processes, facts.Process{PID: 9000, UsedMemoryMiB: 1000})
		}
	}
	if taken != "" {
		fh := doc.Find(taken)
		for g := range 4 {
			fh.GPUs[g].Processes = []facts.Process{{PID: 9100, UsedMemoryMiB: 1000}}
		}
	}
	return input(cfg, st, doc)
}

func TestHotSwapGivesTheLostMastersRankToItsReplacement(t *testing.T) {
	p := reconcile.MakePlan(lostInput(t, trainHCL, "a1", nil, ""))
	c := action(t, p, "train", reconcile.ActionReplace, reconcile.ReasonRestart, reconcile.ReasonNodeReplaced)
	n := c.Placement.Nodes
	// Node 0 (the master, MASTER_ADDR) was on a1: its replacement is node
	// 0, the master of the new run; a2 keeps node 1 and its GPUs.
	if len(n) != 2 || n[0].Host != "a3" || n[0].Rank != 0 || n[1].Host != "a2" || !sameSet(n[1].GPUs, []int{0, 1, 2, 3}) {
		t.Fatalf("placement %+v", n)
	}
	want := "replace node 0: machine a1 lost; a3 joins the survivors in network group rack-3"
	if got := c.Reasons[1].Message; got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
	if !c.StopPrior || c.Run == nil || !c.Run.Restart || c.Run.Budget != "on_lost" {
		t.Errorf("the gang restarts (survivors stopped and launched again): stop %v run %+v", c.StopPrior, c.Run)
	}
}

func TestHotSwapGoesToTheNextLevelUnderPrefer(t *testing.T) {
	// rack-3's only other machine is busy: b1 in rack-4 (same zone) joins.
	p := reconcile.MakePlan(lostInput(t, preferTrainHCL, "a2", []string{"a3"}, ""))
	c := action(t, p, "train", reconcile.ActionReplace, reconcile.ReasonRestart, reconcile.ReasonNodeReplaced)
	if n := c.Placement.Nodes; n[0].Host != "a1" || n[1].Host != "b1" || c.Swap.Level != placement.LevelZone {
		t.Fatalf("placement %+v swap %+v", n, c.Swap)
	}
	if !strings.HasSuffix(c.Reasons[1].Message, "b1 joins the survivors in zone paris-1") {
		t.Errorf("reason %q", c.Reasons[1].Message)
	}
}

func TestHotSwapNeverLeavesARequiredLevel(t *testing.T) {
	// policy rack requires one network group: b1 may not join, and the
	// whole job cannot be placed in one rack either: the restart waits.
	p := reconcile.MakePlan(lostInput(t, trainHCL, "a2", []string{"a3"}, ""))
	c := action(t, p, "train", reconcile.ActionWaiting, reconcile.ReasonRestart, reconcile.ReasonUnschedulableNow)
	if c.Swap != nil || len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "cannot be replaced next to the nodes that survived") {
		t.Errorf("swap %+v warnings %q", c.Swap, p.Warnings)
	}
}

func TestHotSwapFallsBackToTheWholeJobWhenASurvivorLostItsGPUs(t *testing.T) {
	// A stranger took a1's GPUs 0-3: the survivor cannot keep them, so
	// the whole job is placed again (a1's other GPUs and a3).
	p := reconcile.MakePlan(lostInput(t, trainHCL, "a2", nil, "a1"))
	c := action(t, p, "train", reconcile.ActionReplace, reconcile.ReasonRestart)
	if c.Swap != nil || len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "the GPUs of node 0 on a1 are no longer free") {
		t.Fatalf("swap %+v warnings %q", c.Swap, p.Warnings)
	}
	for _, n := range c.Placement.Nodes {
		if n.Host == "a2" || n.Host == "a1" && sameSet(n.GPUs, []int{0, 1, 2, 3}) {
			t.Errorf("placed on %+v", c.Placement.Nodes)
		}
	}
}

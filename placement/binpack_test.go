package placement

import (
	"slices"
	"testing"
)

func TestScheduleBinpackTakesTheFullestMachineThatFits(t *testing.T) {
	// Eight-GPU machines with 8, 4, 2 and 1 GPUs free, all in one zone.
	ws := []Worker{
		wk("idle", "eu/z/r1", "2.5.1", 8, 8),
		wk("half", "eu/z/r1", "2.5.1", 8, 4),
		wk("two", "eu/z/r1", "2.5.1", 8, 2),
		wk("one", "eu/z/r1", "2.5.1", 8, 1),
	}
	for _, tt := range []struct {
		gpus int
		rank string
		want string
	}{
		{2, RankBinpack, "two"},
		{1, RankBinpack, "one"},
		{3, RankBinpack, "half"},
		{5, RankBinpack, "idle"},
		{2, RankSpread, "idle"},
		{0, RankBinpack, "one"}, // a CPU-only node leaves the most free GPUs alone too
	} {
		d := Schedule(Job{Name: "j", Nodes: 1, GPUsPerNode: tt.gpus}, ws, Policy{Rank: tt.rank})
		if !slices.Equal(ids(d), []string{tt.want}) {
			t.Errorf("%s, %d GPUs: %v, want %s", tt.rank, tt.gpus, ids(d), tt.want)
		}
	}
}

func TestScheduleBinpackBreaksTiesByLeastFreeMemory(t *testing.T) {
	a := wk("a", "eu/z/r1", "2.5.1", 8, 2)
	b := wk("b", "eu/z/r1", "2.5.1", 8, 2)
	a.FreeMemoryMiB, b.FreeMemoryMiB = 100<<10, 60<<10
	d := Schedule(Job{Name: "j", Nodes: 1, GPUsPerNode: 2}, []Worker{a, b}, Policy{Rank: RankBinpack})
	if !slices.Equal(ids(d), []string{"b"}) {
		t.Errorf("%v, want b (less free memory)", ids(d))
	}
	b.FreeMemoryMiB = a.FreeMemoryMiB
	d = Schedule(Job{Name: "j", Nodes: 1, GPUsPerNode: 2}, []Worker{b, a}, Policy{Rank: RankBinpack})
	if !slices.Equal(ids(d), []string{"a"}) {
		t.Errorf("%v, want a (equal: the stable ID)", ids(d))
	}
}

func TestScheduleBinpackKeepsAWholeMachineAloneInItsGroup(t *testing.T) {
	// r1 holds one idle machine; r2 three machines with 2 GPUs free. Best
	// fit alone would send a one-node job to r1, the smallest group, and
	// break the idle machine; binpack puts the key first.
	ws := []Worker{
		wk("idle", "eu/z/r1", "2.5.1", 8, 8),
		wk("b1", "eu/z/r2", "2.5.1", 8, 2),
		wk("b2", "eu/z/r2", "2.5.1", 8, 2),
		wk("b3", "eu/z/r2", "2.5.1", 8, 2),
	}
	d := Schedule(Job{Name: "j", Nodes: 1, GPUsPerNode: 2}, ws, Policy{Rank: RankBinpack})
	if !slices.Equal(ids(d), []string{"b1"}) || d.Level != LevelNetworkGroup {
		t.Errorf("%v at %s, want b1 at network_group", ids(d), d.Level)
	}
	if d := Schedule(Job{Name: "j", Nodes: 1, GPUsPerNode: 2}, ws, Policy{}); !slices.Equal(ids(d), []string{"idle"}) {
		t.Errorf("spread: %v, want idle (fewest running tasks)", ids(d))
	}
	// Two nodes: r2's machines pack better than r1 could (r1 cannot
	// hold two); at zone level the job would take r2 whole anyway.
	d = Schedule(Job{Name: "j", Nodes: 2, GPUsPerNode: 2}, ws, Policy{Rank: RankBinpack})
	if !slices.Equal(ids(d), []string{"b1", "b2"}) {
		t.Errorf("two nodes: %v, want b1 b2", ids(d))
	}
}

func TestScheduleAllBinpackFillsMachinesBeforeOpeningNewOnes(t *testing.T) {
	// Four one-GPU jobs on two idle 4-GPU machines: binpack puts all four
	// on one machine and keeps the other whole; spread alternates.
	ws := []Worker{wk("m1", "eu/z/r1", "2.5.1", 4, 4), wk("m2", "eu/z/r1", "2.5.1", 4, 4)}
	var reqs []Request
	for _, name := range []string{"a", "b", "c", "d"} {
		reqs = append(reqs, Request{Job: Job{Name: name, Nodes: 1, GPUsPerNode: 1}, Policy: Policy{Rank: RankBinpack}})
	}
	for _, d := range ScheduleAll(reqs, ws) {
		if !slices.Equal(ids(d), []string{"m1"}) {
			t.Errorf("binpack: job %s on %v, want m1", d.Job, ids(d))
		}
	}
	for i := range reqs {
		reqs[i].Policy = Policy{}
	}
	hosts := map[string]int{}
	for _, d := range ScheduleAll(reqs, ws) {
		hosts[ids(d)[0]]++
	}
	if hosts["m1"] != 2 || hosts["m2"] != 2 {
		t.Errorf("spread: %v, want 2 jobs on each", hosts)
	}
}

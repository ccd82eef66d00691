package placement

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/topology"
)

// CPU-only jobs (gpus_per_node = 0): every worker the policy allows can
// hold a node, whatever its GPUs, and the locality, bucket, rank and
// wait/fail rules are those of GPU jobs.

// cpuZoneFleet is zoneFleet with, in europe-west1-b, a CPU box (no GPUs,
// no matrix) and an HGX H100 with two of its eight GPUs free.
func cpuZoneFleet(t *testing.T) []Worker {
	h1 := Worker{ID: "h1", Location: loc("europe-west1/europe-west1-b"), TorchVersion: "2.5.1",
		Matrix: hgxH100(t), Free: topology.DeviceSetOf(6, 7), RunningTasks: 1}
	cpu1 := Worker{ID: "cpu1", Location: loc("europe-west1/europe-west1-b"), TorchVersion: "2.5.1"}
	return append(zoneFleet(), h1, cpu1)
}

func TestScheduleCPUOnlyJobNeedsNoFreeGPU(t *testing.T) {
	ws := cpuZoneFleet(t)
	pol := Policy{GroupLocality: LocalityZone, OnUnschedulable: UnschedulableFail}

	// Six machines of europe-west1-b: a4 with every GPU busy, h1 with
	// two free, cpu1 with none at all. A GPU job finds four.
	if d := Schedule(Job{Name: "train", Nodes: 6, GPUsPerNode: 1}, ws, pol); d.Status != StatusFailed {
		t.Fatalf("1 GPU per node: %s; want failed (cpu1 has no GPU, a4 none free)", d.Summary)
	}
	d := Schedule(Job{Name: "prep", Nodes: 6, GPUsPerNode: 0}, ws, pol)
	want := "placed on worker group [cpu1 a1 a2 a3 a4 h1] (same zone europe-west1-b, torch 2.5.1)"
	if d.Status != StatusPlaced || d.Summary != want {
		t.Fatalf("got %s\n%q\nwant %q", d.Status, d.Summary, want)
	}
	for _, p := range d.Workers {
		if p.GPUs == nil || len(p.GPUs) != 0 || p.Bottleneck != "" {
			t.Errorf("%s: GPUs %#v bottleneck %q, want [] and none", p.Worker, p.GPUs, p.Bottleneck)
		}
	}
	if len(d.Explanation.Excluded) != 0 {
		t.Errorf("excluded %v: busy GPUs do not exclude a CPU-only node", d.Explanation.Excluded)
	}
	if b := d.Explanation.Levels[0].Buckets[0]; b.Eligible != 6 || b.Free != 6 {
		t.Errorf("bucket %+v, want 6 eligible and 6 free", b)
	}
	js, err := json.Marshal(d.Workers[0])
	if err != nil || !strings.Contains(string(js), `"gpus":[]`) || strings.Contains(string(js), "bottleneck") {
		t.Errorf("placement JSON %s (%v), want \"gpus\":[] and no bottleneck", js, err)
	}
}

// TestScheduleCPUOnlySpreadLeavesIdleGPUsToGPUJobs: spread ranks a
// CPU-only job's workers by running tasks, then by the fewest free GPUs,
// so a CPU box goes before an idle GPU machine; first_fit and
// most_free_memory (GPU memory) rank as for any job.
func TestScheduleCPUOnlySpreadLeavesIdleGPUsToGPUJobs(t *testing.T) {
	mk := func(id string, running, gpus, free int) Worker {
		return Worker{ID: id, Location: loc("eu/eu-1"), TorchVersion: "2.5.1", GPUs: gpus, Free: topology.AllDevices(free),
			RunningTasks: running, FreeMemoryMiB: int64(free) * 100}
	}
	ws := []Worker{mk("x1", 0, 8, 8), mk("x2", 0, 0, 0), mk("x3", 0, 8, 2), mk("x4", 1, 8, 0)}
	for _, tt := range []struct {
		rank  string
		nodes int
		gpus  int
		want  []string
	}{
		{RankSpread, 1, 0, []string{"x2"}},
		{RankSpread, 3, 0, []string{"x2", "x3", "x1"}},
		{RankSpread, 4, 0, []string{"x2", "x3", "x1", "x4"}}, // x4 runs a task
		{RankSpread, 1, 1, []string{"x1"}},                   // a GPU job: most free GPUs
		{RankFirstFit, 2, 0, []string{"x1", "x2"}},
		{RankMostFreeMemory, 2, 0, []string{"x1", "x3"}},
	} {
		d := Schedule(Job{Name: "j", Nodes: tt.nodes, GPUsPerNode: tt.gpus}, ws, Policy{Rank: tt.rank})
		if !slices.Equal(ids(d), tt.want) {
			t.Errorf("%s, %d nodes × %d GPUs: %v, want %v (%s)", tt.rank, tt.nodes, tt.gpus, ids(d), tt.want, d.Summary)
		}
	}
}

// TestScheduleCPUOnlyKeepsThePolicysFilters: labels and regions still
// leave workers out; GPU counts and busy GPUs do not.
func TestScheduleCPUOnlyKeepsThePolicysFilters(t *testing.T) {
	ws := []Worker{
		wk("ok1", "eu/z1", "2.5.1", 8, 8),
		wk("nolabel", "eu/z1", "2.5.1", 8, 8),
		wk("farzone", "us/u1", "2.5.1", 8, 8),
		wk("farzone2", "us/u1", "2.5.1", 8, 8),
		wk("small", "eu/z1", "2.5.1", 2, 2),
		wk("busy", "eu/z1", "2.5.1", 8, 0),
		wk("half", "eu/z1", "2.5.1", 8, 2),
	}
	for i := range ws {
		if ws[i].ID != "nolabel" {
			ws[i].Labels = map[string]string{"pool": "batch"}
		}
	}
	pol := Policy{Regions: []string{"eu"}, Labels: map[string]string{"pool": "batch"}}
	d := Schedule(Job{Name: "j", Nodes: 4, GPUsPerNode: 0}, ws, pol)
	if want := []Exclusion{{ReasonLabel, 1}, {ReasonRegion, 2}}; !reflect.DeepEqual(d.Explanation.Excluded, want) {
		t.Errorf("excluded %v, want %v", d.Explanation.Excluded, want)
	}
	if want := []string{"small", "ok1", "busy", "half"}; !slices.Equal(ids(d), want) {
		t.Errorf("placed %v, want %v: %s", ids(d), want, d.Summary)
	}
	if d := Schedule(Job{Name: "j", Nodes: 5, GPUsPerNode: 0}, ws, pol); d.Status != StatusWaiting || !d.Unschedulable {
		t.Errorf("5 nodes: %s; want waiting, unschedulable (4 workers pass the filters)", d.Summary)
	}
}

// TestScheduleCPUOnlyRequiredLevelWaitsOrFails: with every worker free, a
// required level that no group meets cannot be met by waiting, and the
// summary says so.
func TestScheduleCPUOnlyRequiredLevelWaitsOrFails(t *testing.T) {
	tests := []struct {
		name    string
		nodes   int
		policy  Policy
		status  Status
		summary string
	}{
		{"a4's busy GPUs do not matter", 4, Policy{GroupLocality: LocalityZone, OnUnschedulable: UnschedulableFail}, StatusPlaced,
			"placed on worker group [a1 a2 a3 a4] (same zone europe-west1-b, torch 2.5.1)"},
		{"no zone holds it: fail", 5, Policy{GroupLocality: LocalityZone, OnUnschedulable: UnschedulableFail}, StatusFailed,
			"failed: no zone has 5 workers with torch 2.5.1, even with every worker idle (best: europe-west1-b with 4 of 5)"},
		{"no zone holds it: wait", 5, Policy{GroupLocality: LocalityZone}, StatusWaiting,
			`waiting: no zone has 5 workers with torch 2.5.1, even with every worker idle (best: europe-west1-b with 4 of 5); on_unschedulable = "wait" keeps it waiting`},
		{"network group required, none reported", 1, Policy{GroupLocality: LocalityNetworkGroup, OnUnschedulable: UnschedulableFail}, StatusFailed,
			"failed: no eligible worker reports a network group"},
		{"prefer falls back to the region", 7, Policy{}, StatusPlaced,
			"placed on worker group [a1 a2 a3 a4 b1 b2 n2] (same region europe-west1 across 2 zones, torch 2.5.1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Schedule(Job{Name: "prep", Nodes: tt.nodes, GPUsPerNode: 0}, zoneFleet(), tt.policy)
			if d.Status != tt.status || d.Summary != tt.summary || d.Unschedulable != (tt.status != StatusPlaced) {
				t.Errorf("got %s unschedulable=%v\n%q\nwant %s\n%q", d.Status, d.Unschedulable, d.Summary, tt.status, tt.summary)
			}
		})
	}
}

// TestScheduleAllCPUOnlyJobsShareMachinesNotGPUs: CPU-only jobs take no
// GPU, so two of them and a GPU job after them all fit on three machines;
// one job's nodes are still on distinct machines.
func TestScheduleAllCPUOnlyJobsShareMachinesNotGPUs(t *testing.T) {
	m := hgxH100(t)
	var ws []Worker
	for _, id := range []string{"a", "b", "c"} {
		ws = append(ws, Worker{ID: id, Location: loc("eu/z"), TorchVersion: "2.5.1", Matrix: m, Free: topology.AllDevices(8), FreeMemoryMiB: 8 << 10})
	}
	ds := ScheduleAll([]Request{
		{Job: Job{Name: "prep", Nodes: 3}},
		{Job: Job{Name: "index", Nodes: 2}},
		{Job: Job{Name: "train", Nodes: 3, GPUsPerNode: 8}},
		{Job: Job{Name: "wide", Nodes: 4}},
	}, ws)
	for _, d := range ds[:3] {
		if d.Status != StatusPlaced {
			t.Fatalf("%s: %s", d.Job, d.Summary)
		}
		seen := map[string]bool{}
		for _, p := range d.Workers {
			if seen[p.Worker] {
				t.Errorf("%s: two nodes on %s", d.Job, p.Worker)
			}
			seen[p.Worker] = true
		}
	}
	for _, p := range ds[2].Workers {
		if len(p.GPUs) != 8 {
			t.Errorf("train on %s got GPUs %v, want all 8: CPU-only jobs took none", p.Worker, p.GPUs)
		}
	}
	if d := ds[3]; d.Status != StatusWaiting || !d.Unschedulable {
		t.Errorf("4 CPU-only nodes on 3 machines: %s; want waiting, unschedulable", d.Summary)
	}
}

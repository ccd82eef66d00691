package placement

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/topology"
)

// labFleet: region eu has zone eu-1 with network groups r1 (a1, a2) and r2
// (a3, and a4 busy), and zone eu-2 with no network group (b1-b3); region us
// has zone us-1 (c1-c4). All run torch 2.5.1 on four GPUs.
func labFleet() []Worker {
	return []Worker{
		wk("a1", "eu/eu-1/r1", "2.5.1", 4, 4),
		wk("a2", "eu/eu-1/r1", "2.5.1", 4, 4),
		wk("a3", "eu/eu-1/r2", "2.5.1", 4, 4),
		wk("a4", "eu/eu-1/r2", "2.5.1", 4, 0),
		wk("b1", "eu/eu-2", "2.5.1", 4, 4),
		wk("b2", "eu/eu-2", "2.5.1", 4, 4),
		wk("b3", "eu/eu-2", "2.5.1", 4, 4),
		wk("c1", "us/us-1", "2.5.1", 4, 4),
		wk("c2", "us/us-1", "2.5.1", 4, 4),
		wk("c3", "us/us-1", "2.5.1", 4, 4),
		wk("c4", "us/us-1", "2.5.1", 4, 4),
	}
}

func TestSchedulePreferTakesTightestLevelThatHoldsTheJobNow(t *testing.T) {
	tests := []struct {
		name    string
		nodes   int
		status  Status
		level   Level
		workers []string
		summary string
	}{
		{"one network group", 2, StatusPlaced, LevelNetworkGroup, []string{"a1", "a2"},
			"placed on worker group [a1 a2] (same network group r1, torch 2.5.1)"},
		{"one zone, fewest network groups", 3, StatusPlaced, LevelZone, []string{"a1", "a2", "a3"},
			"placed on worker group [a1 a2 a3] (same zone eu-1 across 2 network groups, torch 2.5.1)"},
		{"one zone, best fit", 4, StatusPlaced, LevelZone, []string{"c1", "c2", "c3", "c4"},
			"placed on worker group [c1 c2 c3 c4] (same zone us-1, torch 2.5.1)"},
		{"one region, fewest zones", 5, StatusPlaced, LevelRegion, []string{"a1", "a2", "a3", "b1", "b2"},
			"placed on worker group [a1 a2 a3 b1 b2] (same region eu across 2 zones, 2 network groups, torch 2.5.1)"},
		// Two regions either way; eu-1's three and us-1's four are two
		// zones, where eu whole and one of us-1 would be three.
		{"any, fewest regions then zones", 7, StatusPlaced, LevelAny, []string{"a1", "a2", "a3", "c1", "c2", "c3", "c4"},
			"placed on worker group [a1 a2 a3 c1 c2 c3 c4] (2 regions, 2 zones, 2 network groups, torch 2.5.1)"},
		{"not enough free workers anywhere", 11, StatusWaiting, LevelAny, nil,
			"waiting: fewer than 11 free workers share torch 2.5.1 (best: torch 2.5.1 with 10 of 11)"},
		{"never enough workers", 12, StatusWaiting, LevelAny, nil,
			`waiting: fewer than 12 workers share torch 2.5.1, even with every worker idle (best: torch 2.5.1 with 11 of 12); on_unschedulable = "wait" keeps it waiting`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Schedule(Job{Name: "train", Nodes: tt.nodes, GPUsPerNode: 4}, labFleet(), Policy{})
			if d.Status != tt.status || d.Level != tt.level || !slices.Equal(ids(d), tt.workers) || d.Summary != tt.summary {
				t.Errorf("got %s at %s %v\n%q\nwant %s at %s %v\n%q", d.Status, d.Level, ids(d), d.Summary, tt.status, tt.level, tt.workers, tt.summary)
			}
		})
	}
}

// zoneFleet is ADR-0021's waiting example: europe-west1-b has four workers,
// one busy; europe-west1-c has two; two more report no zone.
func zoneFleet() []Worker {
	return []Worker{
		wk("a1", "europe-west1/europe-west1-b", "2.5.1", 8, 8),
		wk("a2", "europe-west1/europe-west1-b", "2.5.1", 8, 8),
		wk("a3", "europe-west1/europe-west1-b", "2.5.1", 8, 8),
		wk("a4", "europe-west1/europe-west1-b", "2.5.1", 8, 0),
		wk("b1", "europe-west1/europe-west1-c", "2.5.1", 8, 8),
		wk("b2", "europe-west1/europe-west1-c", "2.5.1", 8, 8),
		wk("n1", "", "2.5.1", 8, 8),
		wk("n2", "europe-west1", "2.5.1", 8, 8),
	}
}

func TestScheduleRequiredLevelWaitsOrFails(t *testing.T) {
	tests := []struct {
		name          string
		nodes         int
		policy        Policy
		status        Status
		unschedulable bool
		summary       string
	}{
		{"zone short of free workers waits", 4, Policy{GroupLocality: LocalityZone}, StatusWaiting, false,
			"waiting: no zone has 4 free workers with torch 2.5.1 (best: europe-west1-b with 3 of 4)"},
		{"fail still waits while a zone could hold it", 4, Policy{GroupLocality: LocalityZone, OnUnschedulable: UnschedulableFail}, StatusWaiting, false,
			"waiting: no zone has 4 free workers with torch 2.5.1 (best: europe-west1-b with 3 of 4)"},
		{"no zone could ever hold it: fail", 5, Policy{GroupLocality: LocalityZone, OnUnschedulable: UnschedulableFail}, StatusFailed, true,
			"failed: no zone has 5 workers with torch 2.5.1, even with every worker idle (best: europe-west1-b with 4 of 5)"},
		{"no zone could ever hold it: wait", 5, Policy{GroupLocality: LocalityZone}, StatusWaiting, true,
			`waiting: no zone has 5 workers with torch 2.5.1, even with every worker idle (best: europe-west1-b with 4 of 5); on_unschedulable = "wait" keeps it waiting`},
		{"network group required, none reported", 1, Policy{GroupLocality: LocalityNetworkGroup, OnUnschedulable: UnschedulableFail}, StatusFailed, true,
			"failed: no eligible worker reports a network group"},
		{"region holds it, n1 reports none", 6, Policy{GroupLocality: LocalityRegion}, StatusPlaced, false,
			"placed on worker group [a1 a2 a3 b1 b2 n2] (same region europe-west1 across 2 zones, torch 2.5.1)"},
		{"region short by n1", 7, Policy{GroupLocality: LocalityRegion}, StatusWaiting, false,
			"waiting: no region has 7 free workers with torch 2.5.1 (best: europe-west1 with 6 of 7)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Schedule(Job{Name: "train", Nodes: tt.nodes, GPUsPerNode: 8}, zoneFleet(), tt.policy)
			if d.Status != tt.status || d.Unschedulable != tt.unschedulable || d.Summary != tt.summary {
				t.Errorf("got %s unschedulable=%v\n%q\nwant %s unschedulable=%v\n%q", d.Status, d.Unschedulable, d.Summary, tt.status, tt.unschedulable, tt.summary)
			}
		})
	}
}

// TestScheduleSaysNoWorkerIsEligibleAtEveryLocality: when the policy leaves
// no worker, every locality says so in the same words, and levels without
// buckets list them as [] (not null), as they do exclusions.
func TestScheduleSaysNoWorkerIsEligibleAtEveryLocality(t *testing.T) {
	for _, locality := range []string{LocalityPrefer, LocalityNetworkGroup, LocalityZone, LocalityRegion, LocalityAny} {
		t.Run(locality, func(t *testing.T) {
			d := Schedule(Job{Name: "train", Nodes: 1, GPUsPerNode: 8}, zoneFleet(), Policy{GroupLocality: locality, Regions: []string{"asia-east1"}})
			if want := `waiting: no worker is eligible; on_unschedulable = "wait" keeps it waiting`; d.Summary != want {
				t.Errorf("summary %q, want %q", d.Summary, want)
			}
			b, err := json.Marshal(d.Explanation)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte("null")) || !bytes.Contains(b, []byte(`"buckets":[]`)) {
				t.Errorf("explanation %s: want every list as [], none null", b)
			}
		})
	}
}

func TestScheduleRequiredLevelNeverUsesWorkersWithoutAValue(t *testing.T) {
	// Zone required: n1 and n2 report no zone, so the two-worker
	// europe-west1-c is the only zone that can hold 2 once b is full.
	ws := zoneFleet()
	ws[0].Free, ws[1].Free, ws[2].Free = 0, 0, 0
	d := Schedule(Job{Name: "train", Nodes: 2, GPUsPerNode: 8}, ws, Policy{GroupLocality: LocalityZone})
	if !slices.Equal(ids(d), []string{"b1", "b2"}) {
		t.Fatalf("placed on %v, want [b1 b2]: %s", ids(d), d.Summary)
	}
	lv := d.Explanation.Levels[0]
	want := []Exclusion{{ReasonNoValue, 2}}
	if lv.Level != LevelZone || !reflect.DeepEqual(lv.Excluded, want) {
		t.Errorf("level %s excluded %v, want zone %v", lv.Level, lv.Excluded, want)
	}
	d = Schedule(Job{Name: "train", Nodes: 3, GPUsPerNode: 8}, ws, Policy{GroupLocality: LocalityZone})
	if d.Status != StatusWaiting {
		t.Errorf("3 nodes: %s, want waiting: n1 and n2 must not fill a zone", d.Summary)
	}
}

func TestScheduleAnyIgnoresLocation(t *testing.T) {
	// ADR-0021's benchmark fleet with 30 workers: 15 free, 3 in each of 5
	// zones. Locality any takes the first 8 in rank order (w00000, w00002,
	// ..., w00014), across every zone, and ranks them zone by zone; prefer
	// keeps them in one region, in 3 zones.
	ws := adrFleet(t, 30)
	job := Job{Name: "train", Nodes: 8, GPUsPerNode: 8}
	anyD := Schedule(job, ws, Policy{GroupLocality: LocalityAny})
	wantAny := []string{"w00000", "w00010", "w00006", "w00002", "w00012", "w00008", "w00004", "w00014"}
	if !slices.Equal(ids(anyD), wantAny) {
		t.Errorf("any: %v, want %v", ids(anyD), wantAny)
	}
	if z, r := span(anyD); z != 5 || r != 2 {
		t.Errorf("any spans %d zones in %d regions, want 5 in 2 (ADR-0021 before)", z, r)
	}
	pref := Schedule(job, ws, Policy{})
	if z, r := span(pref); z != 3 || r != 1 || pref.Level != LevelRegion {
		t.Errorf("prefer spans %d zones in %d regions at %s, want 3 in 1 at region (ADR-0021 after)", z, r, pref.Level)
	}
	if got, want := pref.Summary, "placed on worker group [w00000 w00010 w00020 w00006 w00016 w00026 w00002 w00012] (same region europe-west1 across 3 zones, torch 2.5.1)"; got != want {
		t.Errorf("summary\n%q\nwant\n%q", got, want)
	}
}

// span counts the distinct zones and regions of a placement.
func span(d Decision) (zones, regions int) {
	z, r := map[Location]bool{}, map[string]bool{}
	for _, p := range d.Workers {
		z[p.Location.Upto(LevelZone)] = true
		r[p.Location.Region] = true
	}
	return len(z), len(r)
}

func TestScheduleRankOrders(t *testing.T) {
	mk := func(id string, running, free int, mem int64) Worker {
		return Worker{ID: id, Location: loc("eu/eu-1"), TorchVersion: "2.5.1", GPUs: 8, Free: topology.AllDevices(free), RunningTasks: running, FreeMemoryMiB: mem}
	}
	ws := []Worker{mk("x1", 2, 4, 100), mk("x2", 0, 2, 300), mk("x3", 0, 6, 200), mk("x4", 1, 8, 50)}
	for _, tt := range []struct {
		rank string
		want []string
	}{
		{RankSpread, []string{"x3", "x2"}},         // fewest tasks, then most free GPUs
		{RankFirstFit, []string{"x1", "x2"}},       // worker ID order
		{RankMostFreeMemory, []string{"x2", "x3"}}, // most free GPU memory
	} {
		t.Run(tt.rank, func(t *testing.T) {
			d := Schedule(Job{Name: "j", Nodes: 2, GPUsPerNode: 2}, ws, Policy{Rank: tt.rank})
			if !slices.Equal(ids(d), tt.want) {
				t.Errorf("%s: %v, want %v", tt.rank, ids(d), tt.want)
			}
		})
	}
}

func TestScheduleKeepsOneTorchVersionPerGroup(t *testing.T) {
	ws := []Worker{
		wk("a1", "eu/z1", "2.5.1", 4, 4), wk("a2", "eu/z1", "2.5.1", 4, 4),
		wk("a3", "eu/z1", "2.4.0", 4, 4), wk("a4", "eu/z1", "2.4.0", 4, 4),
		wk("b1", "eu/z2", "2.4.0", 4, 4), wk("b2", "eu/z2", "2.4.0", 4, 4), wk("b3", "eu/z2", "2.4.0", 4, 4),
		wk("b4", "eu/z2", "2.5.1", 4, 4), wk("b5", "eu/z2", "2.4.0", 4, 0),
	}
	d := Schedule(Job{Name: "j", Nodes: 3, GPUsPerNode: 4}, ws, Policy{GroupLocality: LocalityZone})
	if !slices.Equal(ids(d), []string{"b1", "b2", "b3"}) || d.TorchVersion != "2.4.0" {
		t.Fatalf("placed %v torch %q: %s", ids(d), d.TorchVersion, d.Summary)
	}
	if got, want := d.Explanation.Levels[0].Excluded, []Exclusion{{ReasonTorchVersion, 1}}; !reflect.DeepEqual(got, want) {
		t.Errorf("excluded %v, want %v (b4 runs another torch)", got, want)
	}
	d = Schedule(Job{Name: "j", Nodes: 4, GPUsPerNode: 4}, ws, Policy{GroupLocality: LocalityZone})
	if want := "waiting: no zone has 4 free workers with one torch version (best: z2 with 3 of 4, torch 2.4.0)"; d.Summary != want {
		t.Errorf("summary %q, want %q", d.Summary, want)
	}
	d = Schedule(Job{Name: "j", Nodes: 6, GPUsPerNode: 4}, ws, Policy{})
	if d.Status != StatusWaiting || d.Unschedulable {
		t.Errorf("6 nodes: %s; want waiting and schedulable (5 of 2.4.0, 3 of 2.5.1)", d.Summary)
	}
}

func TestScheduleRegionsMatchRegionOrZone(t *testing.T) {
	ws := []Worker{
		wk("a1", "europe-west1/europe-west1-b", "2.5.1", 4, 4),
		wk("a2", "europe-west1/europe-west1-c", "2.5.1", 4, 4),
		wk("a3", "us-east1/us-east1-b", "2.5.1", 4, 4),
		wk("a4", "asia-east1/asia-east1-a", "2.5.1", 4, 4),
	}
	d := Schedule(Job{Name: "j", Nodes: 2, GPUsPerNode: 4}, ws, Policy{Regions: []string{"europe-west1-b", "us-east1"}})
	if !slices.Equal(ids(d), []string{"a1", "a3"}) {
		t.Errorf("placed %v, want [a1 a3]: %s", ids(d), d.Summary)
	}
	if want := []Exclusion{{ReasonRegion, 2}}; !reflect.DeepEqual(d.Explanation.Excluded, want) {
		t.Errorf("excluded %v, want %v", d.Explanation.Excluded, want)
	}
}

func TestScheduleCountsEveryExclusionReason(t *testing.T) {
	ws := []Worker{
		wk("ok1", "eu/z1", "2.5.1", 8, 8),
		wk("nolabel", "eu/z1", "2.5.1", 8, 8),
		wk("farzone", "us/u1", "2.5.1", 8, 8),
		wk("farzone2", "us/u1", "2.5.1", 8, 8),
		wk("small", "eu/z1", "2.5.1", 2, 2),
		wk("busy", "eu/z1", "2.5.1", 8, 0),
		wk("half", "eu/z1", "2.5.1", 8, 2),
		wk("notorchrun", "eu/z1", "2.5.1", 2, 0), // counted under its first reason only
	}
	for i := range ws {
		if ws[i].ID != "nolabel" {
			ws[i].Labels = map[string]string{"gpu": "h100"}
		}
	}
	ws[len(ws)-1].NoTorchrun = true
	d := Schedule(Job{Name: "j", Nodes: 1, GPUsPerNode: 4, Torchrun: true}, ws, Policy{Regions: []string{"eu"}, Labels: map[string]string{"gpu": "h100"}})
	want := []Exclusion{{ReasonLabel, 1}, {ReasonRegion, 2}, {ReasonNoTorchrun, 1}, {ReasonTooFewGPUs, 1}, {ReasonBusy, 1}, {ReasonTooFewFreeGPUs, 1}}
	if !reflect.DeepEqual(d.Explanation.Excluded, want) {
		t.Errorf("excluded %v, want %v", d.Explanation.Excluded, want)
	}
	if !slices.Equal(ids(d), []string{"ok1"}) {
		t.Errorf("placed %v, want [ok1]", ids(d))
	}
	// busy and half are eligible in their bucket but not free.
	b := d.Explanation.Levels[1].Buckets[0]
	if b.Eligible != 3 || b.Free != 1 || b.Needed != 1 {
		t.Errorf("zone bucket %+v, want eligible 3, free 1, needed 1", b)
	}
}

// TestScheduleKeepsTorchrunJobsOffMachinesWithoutTorchrun: a machine
// known to have no torchrun holds no node of a torchrun job, which says
// why, and is free for a job of another launcher; in one ScheduleAll pass
// too.
func TestScheduleKeepsTorchrunJobsOffMachinesWithoutTorchrun(t *testing.T) {
	ws := labFleet()
	for i := range ws {
		ws[i].NoTorchrun = ws[i].Location.Zone == "eu-1"
	}
	// Four nodes: eu-1 (four machines, one busy) would hold them in one
	// zone were it not for torchrun; us-1 does.
	d := Schedule(Job{Name: "train", Nodes: 4, GPUsPerNode: 4, Torchrun: true}, ws, Policy{})
	if d.Status != StatusPlaced || d.Location.Zone != "us-1" {
		t.Errorf("placed %s in %+v, want us-1: %s", d.Status, d.Location, d.Summary)
	}
	if want := []Exclusion{{ReasonNoTorchrun, 4}}; !reflect.DeepEqual(d.Explanation.Excluded, want) {
		t.Errorf("excluded %v, want %v", d.Explanation.Excluded, want)
	}
	plain := Schedule(Job{Name: "prep", Nodes: 3, GPUsPerNode: 4}, ws, Policy{Regions: []string{"eu-1"}})
	if want := []Exclusion{{ReasonRegion, 7}, {ReasonBusy, 1}}; plain.Status != StatusPlaced || !reflect.DeepEqual(plain.Explanation.Excluded, want) {
		t.Errorf("a job without torchrun: %s, excluded %v, want %v", plain.Summary, plain.Explanation.Excluded, want)
	}
	none := Schedule(Job{Name: "one", Nodes: 1, GPUsPerNode: 4, Torchrun: true}, ws[:4], Policy{})
	if none.Status != StatusWaiting || !none.Unschedulable || !strings.HasPrefix(none.Summary, "waiting: no worker is eligible;") {
		t.Errorf("no machine with torchrun: %s %q (unschedulable %v)", none.Status, none.Summary, none.Unschedulable)
	}
	all := ScheduleAll([]Request{
		{Job: Job{Name: "train", Nodes: 4, GPUsPerNode: 4, Torchrun: true}},
		{Job: Job{Name: "prep", Nodes: 3, GPUsPerNode: 4}, Policy: Policy{Regions: []string{"eu-1"}}},
	}, ws)
	if all[0].Location.Zone != "us-1" || all[1].Status != StatusPlaced || all[1].Location.Zone != "eu-1" {
		t.Errorf("ScheduleAll: %q, %q", all[0].Summary, all[1].Summary)
	}
}

func TestScheduleBestFitBetweenBuckets(t *testing.T) {
	// Two network groups can hold 3 nodes: r1 with 5 free, r2 with 3.
	var ws []Worker
	for _, id := range []string{"a1", "a2", "a3", "a4", "a5"} {
		ws = append(ws, wk(id, "eu/z/r1", "2.5.1", 4, 4))
	}
	for _, id := range []string{"b1", "b2", "b3"} {
		ws = append(ws, wk(id, "eu/z/r2", "2.5.1", 4, 4))
	}
	job := Job{Name: "j", Nodes: 3, GPUsPerNode: 4}
	if d := Schedule(job, ws, Policy{}); !slices.Equal(ids(d), []string{"b1", "b2", "b3"}) {
		t.Errorf("best fit: %v, want r2 whole (keeps r1's 5 for a larger job)", ids(d))
	}
	if d := Schedule(job, ws, Policy{BucketChoice: BucketFirstFill}); !slices.Equal(ids(d), []string{"a1", "a2", "a3"}) {
		t.Errorf("first fill: %v, want r1 (its third worker ranks first)", ids(d))
	}
}

func TestScheduleKueueExampleTakesThreePlusThreePlusOne(t *testing.T) {
	// One zone, network groups with 3, 3, 2 and 1 free workers; a 7-node
	// job uses three groups, and the remainder goes to the group of 1.
	var ws []Worker
	for g, n := range map[string]int{"g1": 3, "g2": 3, "g3": 2, "g4": 1} {
		for i := range n {
			ws = append(ws, wk(g+"-"+string(rune('a'+i)), "eu/z/"+g, "2.5.1", 4, 4))
		}
	}
	slices.SortFunc(ws, func(a, b Worker) int { return cmpStr(a.ID, b.ID) })
	d := Schedule(Job{Name: "j", Nodes: 7, GPUsPerNode: 4}, ws, Policy{})
	per := map[string]int{}
	for _, p := range d.Workers {
		per[p.Location.NetworkGroup]++
	}
	if want := map[string]int{"g1": 3, "g2": 3, "g4": 1}; !reflect.DeepEqual(per, want) || d.Level != LevelZone {
		t.Errorf("took %v at %s, want %v at zone", per, d.Level, want)
	}
	if got := d.Workers[6].Worker; got != "g4-a" {
		t.Errorf("last node %s, want g4-a", got)
	}
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestScheduleHundredGroupsThousandNodes(t *testing.T) {
	// 100 network groups of 10 workers, 10 groups a zone, 5 zones a region.
	var ws []Worker
	for g := range 100 {
		where := Location{Region: "r" + string(rune('0'+g/50)), Zone: "z" + itoa(g/10), NetworkGroup: "g" + itoa(g)}
		for i := range 10 {
			w := wk("w"+itoa(g*10+i), "", "2.5.1", 4, 4)
			w.Location = where
			ws = append(ws, w)
		}
	}
	d := Schedule(Job{Name: "big", Nodes: 1000, GPUsPerNode: 4}, ws, Policy{})
	if d.Status != StatusPlaced || d.Level != LevelAny || len(d.Workers) != 1000 {
		t.Fatalf("%s at %s with %d workers, want placed at any with 1000", d.Status, d.Level, len(d.Workers))
	}
	// Node ranks keep each network group together.
	changes := 0
	for i := 1; i < len(d.Workers); i++ {
		if d.Workers[i].Location != d.Workers[i-1].Location {
			changes++
		}
	}
	if changes != 99 {
		t.Errorf("node ranks change network group %d times, want 99", changes)
	}
	var buckets []int
	for _, lv := range d.Explanation.Levels {
		buckets = append(buckets, len(lv.Buckets))
	}
	if want := []int{100, 10, 2, 1}; !slices.Equal(buckets, want) {
		t.Errorf("buckets per level %v, want %v", buckets, want)
	}
	// 500 nodes fit one region exactly: best fit takes it whole.
	d = Schedule(Job{Name: "half", Nodes: 500, GPUsPerNode: 4}, ws, Policy{})
	if d.Level != LevelRegion || d.Location.Region != "r0" || len(d.Workers) != 500 {
		t.Errorf("500 nodes: %s at %s %v", d.Status, d.Level, d.Location)
	}
	// 95 nodes in a region: 9 whole network groups and 5 of the next, all in
	// one zone when a zone can hold it? No: a zone holds 100, so zone level.
	d = Schedule(Job{Name: "zone", Nodes: 95, GPUsPerNode: 4}, ws, Policy{})
	if d.Level != LevelZone || d.Explanation.Levels[1].Buckets[0].Groups[0].Groups != 10 {
		t.Errorf("95 nodes: %s at %s, groups %v", d.Status, d.Level, d.Explanation.Levels[1].Buckets[0].Groups)
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	if i < 10 {
		return "00" + string(b)
	}
	if i < 100 {
		return "0" + string(b)
	}
	return string(b)
}

func TestSchedulePickQualityBreaksTiesBetweenEqualWorkers(t *testing.T) {
	// Both have 5 of 8 GPUs free and no task more than the other; p1 ranks
	// first by ID, but its best 4 GPUs are joined by NV1 at worst, p2's by
	// NV18.
	p1 := Worker{ID: "p1", Location: loc("eu/z"), TorchVersion: "2.5.1", Matrix: dgx1V100(t), Free: topology.DeviceSetOf(0, 1, 2, 3, 4), RunningTasks: 1}
	p2 := Worker{ID: "p2", Location: loc("eu/z"), TorchVersion: "2.5.1", Matrix: hgxH100(t), Free: topology.DeviceSetOf(3, 4, 5, 6, 7), RunningTasks: 1}
	job := Job{Name: "j", Nodes: 1, GPUsPerNode: 4}
	d := Schedule(job, []Worker{p1, p2}, Policy{})
	if !slices.Equal(ids(d), []string{"p2"}) || d.Workers[0].Bottleneck != "NV18" {
		t.Errorf("spread: %v (%s), want p2 with NV18", ids(d), d.Workers[0].Bottleneck)
	}
	d = Schedule(job, []Worker{p1, p2}, Policy{Rank: RankFirstFit})
	if !slices.Equal(ids(d), []string{"p1"}) {
		t.Errorf("first_fit: %v, want p1 (ID order only)", ids(d))
	}
	want, err := topology.PickDevices(p1.Matrix, p1.Free, 4, topology.PickOptions{})
	if err != nil {
		t.Fatal(err)
	}
	topology.OrderLocalRanks(p1.Matrix, want.GPUs)
	if !slices.Equal(d.Workers[0].GPUs, want.GPUs) || d.Workers[0].Bottleneck != want.Bottleneck.String() {
		t.Errorf("p1 GPUs %v %s, want PickDevices' %v %s", d.Workers[0].GPUs, d.Workers[0].Bottleneck, want.GPUs, want.Bottleneck)
	}
}

// TestSchedulePlacementGPUsMatchPickDevices: a node's GPUs are
// PickDevices' set, listed in local-rank order.
func TestSchedulePlacementGPUsMatchPickDevices(t *testing.T) {
	m := dgx1V100(t)
	for _, tt := range []struct {
		name string
		free topology.DeviceSet
		k    int
	}{
		{"choice among free GPUs", topology.DeviceSetOf(1, 2, 3, 4, 5, 6, 7), 4},
		{"every free GPU", topology.DeviceSetOf(0, 2, 3, 6), 4},
		{"one GPU", topology.DeviceSetOf(5, 6), 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := Worker{ID: "x", Matrix: m, Free: tt.free}
			for _, multi := range []int{1, 2} {
				ws := []Worker{w, {ID: "y", Matrix: m, Free: tt.free}}
				d := Schedule(Job{Name: "j", Nodes: multi, GPUsPerNode: tt.k}, ws, Policy{})
				want, err := topology.PickDevices(m, tt.free, tt.k, topology.PickOptions{MultiNode: multi > 1})
				if err != nil {
					t.Fatal(err)
				}
				wantBn := ""
				if tt.k >= 2 {
					wantBn = want.Bottleneck.String()
				}
				topology.OrderLocalRanks(m, want.GPUs)
				if got := d.Workers[0]; !slices.Equal(got.GPUs, want.GPUs) || got.Bottleneck != wantBn {
					t.Errorf("nodes=%d: GPUs %v %q, want %v %q", multi, got.GPUs, got.Bottleneck, want.GPUs, wantBn)
				}
			}
		})
	}
}

func TestScheduleSurvivesMalformedMachineData(t *testing.T) {
	bad := &topology.Matrix{Links: [][]topology.Link{{topology.Self, topology.NV(2)}, {topology.NV(2)}}} // a short row
	ws := []Worker{
		{ID: "a", Matrix: bad, Free: topology.DeviceSetOf(0, 1, 63), GPUs: 2},
		{ID: "b", Matrix: bad, Free: ^topology.DeviceSet(0), GPUs: 200},
	}
	d := Schedule(Job{Name: "j", Nodes: 2, GPUsPerNode: 2}, ws, Policy{})
	if d.Status != StatusPlaced || !slices.Equal(d.Workers[0].GPUs, []int{0, 1}) {
		t.Errorf("%s %v", d.Summary, d.Workers)
	}
}

func TestScheduleRejectsInvalidInput(t *testing.T) {
	for _, tt := range []struct {
		job    Job
		policy Policy
		want   string
	}{
		{Job{Name: "j", Nodes: 1, GPUsPerNode: 1}, Policy{GroupLocality: "zonee"},
			`failed: policy: unknown group_locality "zonee" (want prefer, nvlink_domain, network_group, zone, region or any)`},
		{Job{Name: "j", Nodes: 1, GPUsPerNode: 1}, Policy{BucketChoice: "worst"},
			`failed: policy: unknown bucket_choice "worst" (want best_fit or first_fill)`},
		{Job{Name: "j", Nodes: 0, GPUsPerNode: 1}, Policy{}, `failed: job "j" asks for 0 nodes; it needs at least 1`},
		{Job{Name: "j", Nodes: 1, GPUsPerNode: -1}, Policy{}, `failed: job "j" asks for -1 GPUs per node; it needs 0 (CPU only) to 64`},
		{Job{Name: "j", Nodes: 1, GPUsPerNode: 65}, Policy{}, `failed: job "j" asks for 65 GPUs per node; it needs 0 (CPU only) to 64`},
	} {
		d := Schedule(tt.job, labFleet(), tt.policy)
		if d.Status != StatusFailed || d.Summary != tt.want {
			t.Errorf("%s %q, want failed %q", d.Status, d.Summary, tt.want)
		}
	}
}

func TestScheduleAllTakesGPUsBeforeTheNextJob(t *testing.T) {
	m := hgxH100(t)
	ws := []Worker{}
	for _, id := range []string{"a", "b", "c"} {
		ws = append(ws, Worker{ID: id, Location: loc("eu/z"), TorchVersion: "2.5.1", Matrix: m, Free: topology.AllDevices(8), FreeMemoryMiB: 8 << 10})
	}
	before := slices.Clone(ws)
	job := Job{Name: "half", Nodes: 2, GPUsPerNode: 4}
	ds := ScheduleAll([]Request{{Job: job}, {Job: job}, {Job: job}, {Job: job}}, ws)
	if !reflect.DeepEqual(ws, before) {
		t.Error("ScheduleAll changed the caller's workers")
	}
	used := map[string]topology.DeviceSet{}
	for i, d := range ds[:3] {
		if d.Status != StatusPlaced {
			t.Fatalf("job %d: %s", i, d.Summary)
		}
		for _, p := range d.Workers {
			set := topology.DeviceSetOf(p.GPUs...)
			if used[p.Worker]&set != 0 {
				t.Errorf("job %d: %s GPUs %v already taken (%v)", i, p.Worker, p.GPUs, used[p.Worker].Indices())
			}
			used[p.Worker] |= set
		}
	}
	if ds[3].Status != StatusWaiting {
		t.Errorf("fourth job: %s; want waiting, every GPU is taken", ds[3].Summary)
	}
	// Spread sends the second job to c, idle, before a second task on a or b.
	if got := ids(ds[1]); !slices.Contains(got, "c") {
		t.Errorf("second job on %v, want c among them", got)
	}
}

func TestScheduleIsDeterministic(t *testing.T) {
	fleets := map[string][]Worker{"lab": labFleet(), "zone": zoneFleet(), "adr": adrFleet(t, 120)}
	policies := []Policy{{}, {GroupLocality: LocalityZone}, {GroupLocality: LocalityAny, Rank: RankMostFreeMemory}, {BucketChoice: BucketFirstFill, Rank: RankFirstFit},
		{Rank: RankBinpack, Compatible: []string{CompatTorch, CompatGPUModel}}, {Slice: &Slice{Nodes: 1, Locality: LocalityZone}}, {GroupLocality: LocalityAny, Slice: &Slice{Nodes: 1, Locality: LocalityRegion}}}
	rng := rand.New(rand.NewPCG(1, 2))
	for name, ws := range fleets {
		for _, pol := range policies {
			for _, nodes := range []int{1, 3, 8} {
				job := Job{Name: "j", Nodes: nodes, GPUsPerNode: 4}
				want, err := json.Marshal(Schedule(job, ws, pol))
				if err != nil {
					t.Fatal(err)
				}
				for range 5 {
					shuffled := slices.Clone(ws)
					rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
					got, _ := json.Marshal(Schedule(job, shuffled, pol))
					if !bytes.Equal(got, want) {
						t.Fatalf("%s %+v nodes=%d: shuffled workers changed the decision\n%s\n%s", name, pol, nodes, got, want)
					}
				}
			}
		}
	}
}

func TestScheduleDecisionJSON(t *testing.T) {
	for _, tt := range []struct {
		name   string
		nodes  int
		gpus   int
		policy Policy
		fleet  []Worker
	}{
		{"placed-region", 5, 4, Policy{}, labFleet()},
		{"waiting-zone", 4, 4, Policy{GroupLocality: LocalityZone}, zoneFleet()},
		{"failed-zone", 5, 4, Policy{GroupLocality: LocalityZone, OnUnschedulable: UnschedulableFail}, zoneFleet()},
		{"failed-zone-no-eligible-worker", 1, 4, Policy{GroupLocality: LocalityZone, OnUnschedulable: UnschedulableFail, Regions: []string{"asia-east1"}}, zoneFleet()},
		{"placed-zone-cpu-only", 4, 0, Policy{GroupLocality: LocalityZone}, zoneFleet()},
		{"placed-slices", 12, 8, Policy{Slice: &Slice{Nodes: 2, Locality: LocalityNetworkGroup}}, sliceFleet(6, 5, 4, 3, 2)},
		{"waiting-compatible", 3, 8, Policy{GroupLocality: LocalityNetworkGroup, Compatible: []string{CompatTorch, CompatCUDADriver, CompatGPUModel}}, driverFleet()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := Schedule(Job{Name: "train", Nodes: tt.nodes, GPUsPerNode: tt.gpus}, tt.fleet, tt.policy)
			got, err := json.MarshalIndent(d, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", "placement", tt.name+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("decision JSON differs from %s:\n%s", path, got)
			}
			var back Decision
			if err := json.Unmarshal(got, &back); err != nil || !reflect.DeepEqual(back, d) {
				t.Errorf("JSON does not round-trip: %v", err)
			}
		})
	}
}

func TestLinkScoreMatchesLinkScore(t *testing.T) {
	links := []topology.Link{{}, topology.SYS, topology.NODE, topology.PHB, topology.PXB, topology.PIX, topology.Self, {Kind: 200}}
	for n := 1; n <= 255; n++ {
		links = append(links, topology.NV(n))
	}
	for _, l := range links {
		if got, want := linkScore(l), l.Score(); got != want {
			t.Errorf("linkScore(%v) = %d, Link.Score = %d", l, got, want)
		}
	}
}

func TestScheduleScoresGPUsOnlyForTiedWorkers(t *testing.T) {
	// Every worker has a different running-task count: spread never ties,
	// so no worker's GPU pick is needed to rank them.
	m := dgx1V100(t)
	var ws []Worker
	for i := range 6 {
		ws = append(ws, Worker{ID: "w" + itoa(i), Location: loc("eu/z"), Matrix: m, Free: topology.AllDevices(6), RunningTasks: i})
	}
	job := Job{Name: "j", Nodes: 2, GPUsPerNode: 4}
	var s scheduler
	s.schedule(job, ws, Policy{})
	if n := trueCount(s.qualDone); n != 0 {
		t.Errorf("untied workers: %d GPU picks scored, want 0", n)
	}
	// Equal running tasks: the picks decide, once per worker.
	for i := range ws {
		ws[i].RunningTasks = 0
	}
	s.schedule(job, ws, Policy{})
	if n := trueCount(s.qualDone); n != len(ws) {
		t.Errorf("tied workers: %d GPU picks scored, want %d", n, len(ws))
	}
	s.schedule(job, ws, Policy{Rank: RankFirstFit})
	if n := trueCount(s.qualDone); n != 0 {
		t.Errorf("first_fit: %d GPU picks scored, want 0 (ID order only)", n)
	}
}

func trueCount(xs []bool) int {
	n := 0
	for _, x := range xs {
		if x {
			n++
		}
	}
	return n
}

func TestScheduleNeverPanicsOnOddWorkers(t *testing.T) {
	asym := dgx1V100(t)
	asym.Links[0][1] = topology.NV(7) // no longer symmetric: PickDevices refuses it
	odd := []Worker{
		{ID: "neg", GPUs: -3, Free: ^topology.DeviceSet(0), RunningTasks: -5, FreeMemoryMiB: -1},
		{ID: "huge", GPUs: 1000, Free: ^topology.DeviceSet(0), RunningTasks: 1 << 62, FreeMemoryMiB: 1 << 62},
		{ID: "asym", Matrix: asym, Free: topology.DeviceSetOf(0, 1, 2, 3, 4)},
		{ID: "empty-matrix", Matrix: &topology.Matrix{}, GPUs: 4, Free: topology.AllDevices(4)},
		{ID: "", Location: loc("r/z/n"), GPUs: 8, Free: topology.AllDevices(8)},
		{ID: "dup", GPUs: 8, Free: topology.AllDevices(8)},
		{ID: "dup", GPUs: 8, Free: topology.AllDevices(8)},
	}
	for _, pol := range []Policy{{}, {GroupLocality: LocalityZone}, {Rank: RankMostFreeMemory}, {Rank: RankFirstFit, BucketChoice: BucketFirstFill}} {
		for _, job := range []Job{{Nodes: 1, GPUsPerNode: 1}, {Nodes: 2, GPUsPerNode: 4}, {Nodes: 7, GPUsPerNode: 64}, {Nodes: 1 << 30, GPUsPerNode: 1}, {Nodes: 3, GPUsPerNode: 0}} {
			d := Schedule(job, odd, pol)
			for _, p := range d.Workers {
				if len(p.GPUs) != job.GPUsPerNode {
					t.Errorf("%+v %+v: %s got GPUs %v", pol, job, p.Worker, p.GPUs)
				}
			}
			if _, err := json.Marshal(d); err != nil {
				t.Error(err)
			}
		}
	}
}

package placement

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// sliceFleet is one zone with network groups of the given free workers,
// named g1, g2, ... and their workers g1-a, g1-b, ...
func sliceFleet(sizes ...int) []Worker {
	var ws []Worker
	for g, n := range sizes {
		for i := range n {
			ws = append(ws, wk(fmt.Sprintf("g%d-%c", g+1, 'a'+i), fmt.Sprintf("eu/z/g%d", g+1), "2.5.1", 8, 8))
		}
	}
	return ws
}

// perGroup counts a placement's nodes by network group.
func perGroup(d Decision) map[string]int {
	out := map[string]int{}
	for _, p := range d.Workers {
		out[p.Location.NetworkGroup]++
	}
	return out
}

// checkSlices fails unless every run of size consecutive node ranks is
// inside one group at level l.
func checkSlices(t *testing.T, d Decision, size int, l Level) {
	t.Helper()
	for i, p := range d.Workers {
		first := d.Workers[i/size*size]
		if p.Location.At(l) == "" || p.Location.Upto(l) != first.Location.Upto(l) {
			t.Fatalf("node %d (%s, %s) is in the slice of node %d (%s, %s)", i, p.Worker, p.Location, i/size*size, first.Worker, first.Location)
		}
	}
}

func TestScheduleSlicesKueueTwoLevelExample(t *testing.T) {
	// Kueue's KEP-2724 two-level example with hosts as network groups and
	// pods as machines: groups that can take 6, 5, 4, 3 and 2 workers,
	// slices of 2 per group, 12 nodes. Kueue's BestFit places 6, -, 4, -,
	// 2: the group of 4 beats the group of 5 (both hold 2 slices, the 4
	// has none left over) and the last 2 go to the group of 2.
	sl := &Slice{Nodes: 2, Locality: LocalityNetworkGroup}
	d := Schedule(Job{Name: "j", Nodes: 12, GPUsPerNode: 8}, sliceFleet(6, 5, 4, 3, 2), Policy{Slice: sl})
	if want := map[string]int{"g1": 6, "g3": 4, "g5": 2}; !reflect.DeepEqual(perGroup(d), want) || d.Level != LevelZone {
		t.Fatalf("%v at %s, want %v at zone: %s", perGroup(d), d.Level, want, d.Summary)
	}
	checkSlices(t, d, 2, LevelNetworkGroup)
	if !reflect.DeepEqual(d.Slice, sl) {
		t.Errorf("decision slice %+v, want %+v", d.Slice, sl)
	}
	if want := "placed on worker group [g1-a g1-b g1-c g1-d g1-e g1-f g3-a g3-b g3-c g3-d g5-a g5-b] (same zone z across 3 network groups, in slices of 2 per network group, torch 2.5.1)"; d.Summary != want {
		t.Errorf("summary\n%q\nwant\n%q", d.Summary, want)
	}
}

func TestScheduleSlicesCountOnlyWholeSlices(t *testing.T) {
	// Groups of 3, 3 and 1 free workers hold 7 nodes, but in slices of 2
	// only 4 (one pair in each group of 3): a 6-node job waits.
	ws := sliceFleet(3, 3, 1)
	sl := &Slice{Nodes: 2, Locality: LocalityNetworkGroup}
	d := Schedule(Job{Name: "j", Nodes: 4, GPUsPerNode: 8}, ws, Policy{Slice: sl})
	if want := map[string]int{"g1": 2, "g2": 2}; !reflect.DeepEqual(perGroup(d), want) {
		t.Errorf("4 nodes: %v, want %v", perGroup(d), want)
	}
	checkSlices(t, d, 2, LevelNetworkGroup)
	d = Schedule(Job{Name: "j", Nodes: 6, GPUsPerNode: 8}, ws, Policy{Slice: sl, GroupLocality: LocalityZone})
	want := `waiting: no zone has 6 workers in slices of 2 per network group with torch 2.5.1, even with every worker idle (best: z with 4 of 6); on_unschedulable = "wait" keeps it waiting`
	if d.Status != StatusWaiting || !d.Unschedulable || d.Summary != want {
		t.Errorf("6 nodes: %s unschedulable=%v\n%q\nwant\n%q", d.Status, d.Unschedulable, d.Summary, want)
	}
	b := d.Explanation.Levels[0].Buckets[0]
	if want := (SliceCount{Size: 2, Free: 2, Eligible: 2}); b.Slices == nil || *b.Slices != want || b.Free != 7 {
		t.Errorf("bucket %+v slices %+v, want 7 free in %+v", b, b.Slices, want)
	}
	// Without slices the same fleet holds 6.
	if d := Schedule(Job{Name: "j", Nodes: 6, GPUsPerNode: 8}, ws, Policy{GroupLocality: LocalityZone}); d.Status != StatusPlaced {
		t.Errorf("no slices: %s", d.Summary)
	}
}

func TestScheduleSlicesAtAZoneAcrossRegionsUnderAny(t *testing.T) {
	// Slices of 3 by zone, locality any: zones of 4 (eu-1), 2 (eu-2) and 3
	// (us-1) free workers hold one slice each but eu-2; a 6-node job takes
	// 3 in eu-1 and 3 in us-1, each slice in one zone, eu-2 untouched.
	var ws []Worker
	for i, where := range []string{"eu/eu-1/r1", "eu/eu-1/r1", "eu/eu-1/r2", "eu/eu-1/r2", "eu/eu-2/r3", "eu/eu-2/r3", "us/us-1/r4", "us/us-1/r4", "us/us-1/r5"} {
		ws = append(ws, wk(fmt.Sprintf("w%d", i), where, "2.5.1", 8, 8))
	}
	sl := &Slice{Nodes: 3, Locality: LocalityZone}
	d := Schedule(Job{Name: "j", Nodes: 6, GPUsPerNode: 8}, ws, Policy{GroupLocality: LocalityAny, Slice: sl})
	if d.Status != StatusPlaced {
		t.Fatal(d.Summary)
	}
	checkSlices(t, d, 3, LevelZone)
	zones := map[string]int{}
	for _, p := range d.Workers {
		zones[p.Location.Zone]++
	}
	if want := map[string]int{"eu-1": 3, "us-1": 3}; !reflect.DeepEqual(zones, want) {
		t.Errorf("zones %v, want %v", zones, want)
	}
}

func TestScheduleSlicesExcludeWorkersWithoutTheirLevel(t *testing.T) {
	// zoneFleet's n1 and n2 report no zone: with slices by zone they hold
	// no slice, even where the group's level (region) would take them.
	sl := &Slice{Nodes: 2, Locality: LocalityZone}
	d := Schedule(Job{Name: "j", Nodes: 6, GPUsPerNode: 8}, zoneFleet(), Policy{GroupLocality: LocalityRegion, Slice: sl})
	if d.Status != StatusWaiting {
		t.Fatalf("%s, want waiting (3 free in b make one slice, 2 in c one)", d.Summary)
	}
	if want := []Exclusion{{ReasonNoSliceValue, 2}, {ReasonBusy, 1}}; !reflect.DeepEqual(d.Explanation.Excluded, want) {
		t.Errorf("excluded %v, want %v", d.Explanation.Excluded, want)
	}
	d = Schedule(Job{Name: "j", Nodes: 4, GPUsPerNode: 8}, zoneFleet(), Policy{GroupLocality: LocalityRegion, Slice: sl})
	if d.Status != StatusPlaced || slices.Contains(ids(d), "n1") || slices.Contains(ids(d), "n2") {
		t.Fatalf("4 nodes: %v %s", ids(d), d.Summary)
	}
	checkSlices(t, d, 2, LevelZone)
}

func TestScheduleFailsWhenNodesAreNotWholeSlices(t *testing.T) {
	d := Schedule(Job{Name: "train", Nodes: 5, GPUsPerNode: 8}, sliceFleet(6), Policy{Slice: &Slice{Nodes: 2, Locality: LocalityNetworkGroup}})
	if want := `failed: job "train" asks for 5 nodes, not a multiple of its policy's slices of 2`; d.Status != StatusFailed || d.Summary != want {
		t.Errorf("%s, want %s", d.Summary, want)
	}
}

func TestScheduleSlicesUnderPreferHoldAtTighterLevels(t *testing.T) {
	// A network group that holds the whole job holds its slices by zone
	// too: prefer places it there.
	sl := &Slice{Nodes: 2, Locality: LocalityZone}
	d := Schedule(Job{Name: "j", Nodes: 4, GPUsPerNode: 8}, sliceFleet(3, 5), Policy{Slice: sl})
	if d.Level != LevelNetworkGroup || !reflect.DeepEqual(perGroup(d), map[string]int{"g2": 4}) {
		t.Errorf("%v at %s, want 4 in g2 at network_group: %s", perGroup(d), d.Level, d.Summary)
	}
}

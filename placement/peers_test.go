package placement

import (
	"reflect"
	"slices"
	"testing"
)

// TestScheduleMatchesKueueKEPExamples maps the worked examples and rules of
// Kueue's topology-aware scheduling (KEP-2724, "Computing the assignment"
// and "Two-level Topology Aware scheduling") onto gpulayer: a Kueue node is
// a gpulayer network group (or a machine, for capacity in GPUs), a rack a
// zone, a pod a machine (one node of a job). Each case says what Kueue
// does and checks that gpulayer does the same.
func TestScheduleMatchesKueueKEPExamples(t *testing.T) {
	sl2 := &Slice{Nodes: 2, Locality: LocalityNetworkGroup}
	leastFree := []Worker{ // machines with 3, 3, 2 and 1 GPUs free
		wk("m3a", "eu/z/r1", "2.5.1", 8, 3), wk("m3b", "eu/z/r1", "2.5.1", 8, 3),
		wk("m2", "eu/z/r1", "2.5.1", 8, 2), wk("m1", "eu/z/r1", "2.5.1", 8, 1),
	}
	for _, tt := range []struct {
		name   string
		fleet  []Worker
		job    Job
		policy Policy
		check  func(t *testing.T, d Decision)
	}{
		{"BestFit: nodes of 3, 3, 2, 1 and 7 pods take 3 + 3 + 1",
			sliceFleet(3, 3, 2, 1), Job{Nodes: 7, GPUsPerNode: 8}, Policy{},
			wantGroups(map[string]int{"g1": 3, "g2": 3, "g4": 1})},
		{"LeastFreeCapacity: one pod goes to the node with the least free capacity that fits",
			leastFree, Job{Nodes: 1, GPUsPerNode: 1}, Policy{Rank: RankBinpack}, wantWorkers("m1")},
		{"LeastFreeCapacity: a pod needing 2 skips the node with 1",
			leastFree, Job{Nodes: 1, GPUsPerNode: 2}, Policy{Rank: RankBinpack}, wantWorkers("m2")},
		{"LeastFreeCapacity: a pod needing 3 takes a node with 3 (the first of two by ID)",
			leastFree, Job{Nodes: 1, GPUsPerNode: 3}, Policy{Rank: RankBinpack}, wantWorkers("m3a")},
		{"two-level BestFit: nodes of 6, 5, 4, 3, 2, slices of 2, 12 pods take 6, 4, 2",
			sliceFleet(6, 5, 4, 3, 2), Job{Nodes: 12, GPUsPerNode: 8}, Policy{Slice: sl2},
			wantGroups(map[string]int{"g1": 6, "g3": 4, "g5": 2})},
		{"required topology: no rack holds the pods, the workload waits",
			sliceFleet(3, 3), Job{Nodes: 4, GPUsPerNode: 8}, Policy{GroupLocality: LocalityNetworkGroup},
			wantStatus(StatusWaiting)},
		{"preferred topology: no rack holds the pods, the next level up does",
			sliceFleet(3, 3), Job{Nodes: 4, GPUsPerNode: 8}, Policy{},
			func(t *testing.T, d Decision) {
				if d.Status != StatusPlaced || d.Level != LevelZone {
					t.Errorf("%s at %s, want placed at zone", d.Status, d.Level)
				}
			}},
		{"consecutive ranks share a domain (story 4)",
			sliceFleet(1, 3, 3), Job{Nodes: 7, GPUsPerNode: 8}, Policy{},
			wantWorkers("g1-a", "g2-a", "g2-b", "g2-c", "g3-a", "g3-b", "g3-c")},
		{"slices evenly divide the pod set",
			sliceFleet(6), Job{Nodes: 5, GPUsPerNode: 8}, Policy{Slice: sl2}, wantStatus(StatusFailed)},
		{"the slice level is at or below the required level",
			sliceFleet(6), Job{Nodes: 4, GPUsPerNode: 8}, Policy{GroupLocality: LocalityNetworkGroup, Slice: &Slice{Nodes: 2, Locality: LocalityZone}},
			wantStatus(StatusFailed)},
		{"slices: a domain counts the slices it holds whole",
			sliceFleet(3, 3, 1), Job{Nodes: 6, GPUsPerNode: 8}, Policy{GroupLocality: LocalityZone, Slice: sl2}, wantStatus(StatusWaiting)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.job.Name = "j"
			tt.check(t, Schedule(tt.job, tt.fleet, tt.policy))
		})
	}
}

func wantGroups(want map[string]int) func(*testing.T, Decision) {
	return func(t *testing.T, d Decision) {
		t.Helper()
		if got := perGroup(d); !reflect.DeepEqual(got, want) {
			t.Errorf("%v, want %v: %s", got, want, d.Summary)
		}
	}
}

func wantWorkers(want ...string) func(*testing.T, Decision) {
	return func(t *testing.T, d Decision) {
		t.Helper()
		if !slices.Equal(ids(d), want) {
			t.Errorf("%v, want %v: %s", ids(d), want, d.Summary)
		}
	}
}

func wantStatus(want Status) func(*testing.T, Decision) {
	return func(t *testing.T, d Decision) {
		t.Helper()
		if d.Status != want {
			t.Errorf("%s, want %s", d.Summary, want)
		}
	}
}

package placement

import (
	"slices"
	"testing"

	"github.com/gpulayer/gpulayer/topology"
)

// mixedFleet: region us, zone us-a holds GCP machines placed by block
// (network groups cluster/block/sub-block, listed out of order) and two
// lab machines with no network group; zone us-b two more by sub-block.
func mixedFleet() []Worker {
	var ws []Worker
	for _, m := range []struct{ id, zone, group string }{
		{"g7", "us-a", "c1/b2/s1"}, {"lab2", "us-a", ""}, {"g1", "us-a", "c1/b1/s2"},
		{"g3", "us-a", "c1/b1/s1"}, {"g2", "us-a", "c1/b1/s2"}, {"lab1", "us-a", ""},
		{"h2", "us-b", "c9/b1/s1"}, {"g4", "us-a", "c1/b1/s1"}, {"h1", "us-b", "c9/b1/s1"},
	} {
		w := wk(m.id, "", "2.5.1", 8, 8)
		w.Location = Location{Region: "us", Zone: m.zone, NetworkGroup: m.group}
		ws = append(ws, w)
	}
	return ws
}

func TestScheduleRanksFollowTheTopologyTreeOnMixedFleets(t *testing.T) {
	ws := mixedFleet()
	for _, tt := range []struct {
		name   string
		nodes  int
		policy Policy
		want   []string
	}{
		// Sub-blocks of block b1 first (s1 before s2), then b2, then the
		// machines that report no network group; inside a sub-block, rank
		// order (here IDs).
		{"one zone", 7, Policy{}, []string{"g3", "g4", "g1", "g2", "g7", "lab1", "lab2"}},
		{"two zones", 9, Policy{}, []string{"g3", "g4", "g1", "g2", "g7", "lab1", "lab2", "h1", "h2"}},
		{"any", 9, Policy{GroupLocality: LocalityAny, Rank: RankFirstFit}, []string{"g3", "g4", "g1", "g2", "g7", "lab1", "lab2", "h1", "h2"}},
		// Slices of 2 by network group: the pairs are s1's and s2's of b1.
		{"slices", 4, Policy{Slice: &Slice{Nodes: 2, Locality: LocalityNetworkGroup}}, []string{"g3", "g4", "g1", "g2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rng := [...]int{8, 3, 5, 0, 7, 1, 6, 2, 4}
			shuffled := make([]Worker, len(ws))
			for i, j := range rng {
				shuffled[i] = ws[j]
			}
			d := Schedule(Job{Name: "j", Nodes: tt.nodes, GPUsPerNode: 8}, shuffled, tt.policy)
			if !slices.Equal(ids(d), tt.want) {
				t.Errorf("node ranks %v, want %v (%s)", ids(d), tt.want, d.Summary)
			}
			for i, p := range d.Workers {
				if p.NodeRank != i {
					t.Errorf("worker %d has node rank %d", i, p.NodeRank)
				}
			}
		})
	}
}

func TestSchedulePlacementListsGPUsInLocalRankOrder(t *testing.T) {
	// A 4-GPU PCIe box whose NVLink bridges join 0-2 and 1-3: a node of 4
	// GPUs lists them 0,2,3,1, so local ranks 0-1 and 2-3 are bridged.
	bridged := &topology.Matrix{Links: [][]topology.Link{
		{topology.Self, topology.PHB, topology.NV(4), topology.SYS},
		{topology.PHB, topology.Self, topology.SYS, topology.NV(4)},
		{topology.NV(4), topology.SYS, topology.Self, topology.PHB},
		{topology.SYS, topology.NV(4), topology.PHB, topology.Self},
	}}
	w := Worker{ID: "box", Location: loc("eu/z/r1"), TorchVersion: "2.5.1", Matrix: bridged, Free: topology.AllDevices(4)}
	d := Schedule(Job{Name: "j", Nodes: 1, GPUsPerNode: 4}, []Worker{w}, Policy{})
	if got := d.Workers[0].GPUs; !slices.Equal(got, []int{0, 2, 3, 1}) || d.Workers[0].Bottleneck != "SYS" {
		t.Errorf("GPUs %v (%s), want [0 2 3 1] (SYS)", got, d.Workers[0].Bottleneck)
	}
	// An NVSwitch machine's GPUs stay ascending.
	h := Worker{ID: "hgx", Location: loc("eu/z/r1"), TorchVersion: "2.5.1", Matrix: hgxH100(t), Free: topology.DeviceSetOf(1, 3, 4, 6, 7)}
	d = Schedule(Job{Name: "j", Nodes: 1, GPUsPerNode: 4}, []Worker{h}, Policy{})
	if got := d.Workers[0].GPUs; !slices.IsSorted(got) {
		t.Errorf("HGX GPUs %v, want ascending", got)
	}
}

func TestScheduleRanksGroupsInLocationOrderNotTakeOrder(t *testing.T) {
	// The fewest groups take g2 and g3 whole and the remainder from g1;
	// node ranks still go g1, g2, g3.
	d := Schedule(Job{Name: "j", Nodes: 7, GPUsPerNode: 8}, sliceFleet(1, 3, 3), Policy{})
	want := []string{"g1-a", "g2-a", "g2-b", "g2-c", "g3-a", "g3-b", "g3-c"}
	if !slices.Equal(ids(d), want) {
		t.Errorf("node ranks %v, want %v", ids(d), want)
	}
}

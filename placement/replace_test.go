package placement

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// swapFleet: a 3-node job ran on a1 a2 a3 in network group r1; a2 is
// lost. r1 has a4 free, r2 (same zone) b1, zone eu-2 c1; d1 in r1 has
// another torch.
func swapFleet() []Worker {
	return []Worker{
		wk("a1", "eu/eu-1/r1", "2.5.1", 4, 4),
		wk("a3", "eu/eu-1/r1", "2.5.1", 4, 4),
		wk("a4", "eu/eu-1/r1", "2.5.1", 4, 4),
		wk("d1", "eu/eu-1/r1", "2.4.0", 4, 4),
		wk("b1", "eu/eu-1/r2", "2.5.1", 4, 4),
		wk("c1", "eu/eu-2", "2.5.1", 4, 4),
	}
}

var swapSurvivors = []Survivor{{NodeRank: 0, Worker: "a1", GPUs: []int{0, 1, 2, 3}}, {NodeRank: 2, Worker: "a3", GPUs: []int{0, 1, 2, 3}}}

func without(ws []Worker, ids ...string) []Worker {
	var out []Worker
	for _, w := range ws {
		if !strings.Contains(" "+strings.Join(ids, " ")+" ", " "+w.ID+" ") {
			out = append(out, w)
		}
	}
	return out
}

func TestReplaceNodesKeepsTheSurvivorsGroupTight(t *testing.T) {
	job := Job{Name: "train", Nodes: 3, GPUsPerNode: 4}
	tests := []struct {
		name    string
		workers []Worker
		policy  Policy
		ok      bool
		worker  string
		level   Level
	}{
		{"a free machine in the survivors' network group", swapFleet(), Policy{}, true, "a4", LevelNetworkGroup},
		{"the next level when the group is full", without(swapFleet(), "a4"), Policy{}, true, "b1", LevelZone},
		{"looser still under prefer", without(swapFleet(), "a4", "b1"), Policy{}, true, "c1", LevelRegion},
		{"never looser than a required level", without(swapFleet(), "a4", "b1"), Policy{GroupLocality: LocalityZone}, false, "", 0},
		{"another torch never joins", without(swapFleet(), "a4", "b1", "c1"), Policy{}, false, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ReplaceNodes(job, tt.policy, tt.workers, swapSurvivors, []int{1})
			if s.OK != tt.ok {
				t.Fatalf("ok %v (%s), want %v", s.OK, s.Why, tt.ok)
			}
			if !tt.ok {
				if s.Why == "" {
					t.Error("no reason given for placing the whole job again")
				}
				return
			}
			if len(s.Nodes) != 1 || s.Nodes[0].Worker != tt.worker || s.Nodes[0].NodeRank != 1 || s.Level != tt.level {
				t.Fatalf("replacement %+v at %s, want %s as node 1 at %s", s.Nodes, s.Level, tt.worker, tt.level)
			}
			if len(s.Nodes[0].GPUs) != 4 {
				t.Errorf("replacement GPUs %v, want 4", s.Nodes[0].GPUs)
			}
		})
	}
}

func TestReplaceNodesNeedsTheSurvivorsGPUsFree(t *testing.T) {
	ws := swapFleet()
	ws[1].Free = 0 // a3's GPUs are someone else's now
	s := ReplaceNodes(Job{Name: "train", Nodes: 3, GPUsPerNode: 4}, Policy{}, ws, swapSurvivors, []int{1})
	if s.OK || !strings.Contains(s.Why, "a3") {
		t.Fatalf("ok %v why %q; a survivor without its GPUs cannot be kept", s.OK, s.Why)
	}
}

func TestReplaceNodesKeepsASliceInItsGroup(t *testing.T) {
	// Slices of 2 by network group across a zone: node 3's mate (node 2)
	// is in r2, so its replacement must be too, though r1 has room.
	ws := []Worker{
		wk("a1", "eu/eu-1/r1", "2.5.1", 4, 4), wk("a2", "eu/eu-1/r1", "2.5.1", 4, 4), wk("a4", "eu/eu-1/r1", "2.5.1", 4, 4),
		wk("b1", "eu/eu-1/r2", "2.5.1", 4, 4), wk("b3", "eu/eu-1/r2", "2.5.1", 4, 4),
	}
	surv := []Survivor{{0, "a1", []int{0, 1, 2, 3}}, {1, "a2", []int{0, 1, 2, 3}}, {2, "b1", []int{0, 1, 2, 3}}}
	pol := Policy{GroupLocality: LocalityZone, Slice: &Slice{Nodes: 2, Locality: "network_group"}}
	s := ReplaceNodes(Job{Name: "train", Nodes: 4, GPUsPerNode: 4}, pol, ws, surv, []int{3})
	if !s.OK || s.Nodes[0].Worker != "b3" || s.Level != LevelZone {
		t.Fatalf("%+v, want b3 beside its slice mate b1", s)
	}
}

func TestReplaceNodesIgnoresWorkerOrder(t *testing.T) {
	job := Job{Name: "train", Nodes: 3, GPUsPerNode: 4}
	for _, ws := range [][]Worker{swapFleet(), without(swapFleet(), "a4")} {
		want := ReplaceNodes(job, Policy{}, ws, swapSurvivors, []int{1})
		rng := rand.New(rand.NewPCG(3, 4))
		for range 20 {
			sh := slices.Clone(ws)
			rng.Shuffle(len(sh), func(i, j int) { sh[i], sh[j] = sh[j], sh[i] })
			if got := ReplaceNodes(job, Policy{}, sh, swapSurvivors, []int{1}); !reflect.DeepEqual(got, want) {
				t.Fatalf("shuffled: %+v, want %+v", got, want)
			}
		}
	}
}

func TestReplaceNodesPlacesSeveralLostNodesAtOneLevel(t *testing.T) {
	// Nodes 1 and 2 are lost; r1 has room for one only (a4): both go to
	// the zone, a4 and b1, rather than one in r1 and one wherever.
	ws := []Worker{
		wk("a1", "eu/eu-1/r1", "2.5.1", 4, 4), wk("a4", "eu/eu-1/r1", "2.5.1", 4, 4),
		wk("b1", "eu/eu-1/r2", "2.5.1", 4, 4), wk("c1", "eu/eu-2", "2.5.1", 4, 4),
	}
	s := ReplaceNodes(Job{Name: "train", Nodes: 3, GPUsPerNode: 4}, Policy{}, ws, []Survivor{{0, "a1", []int{0, 1, 2, 3}}}, []int{2, 1})
	if !s.OK || s.Level != LevelZone || len(s.Nodes) != 2 || s.Nodes[0].NodeRank != 1 || s.Nodes[1].NodeRank != 2 {
		t.Fatalf("%+v", s)
	}
	got := []string{s.Nodes[0].Worker, s.Nodes[1].Worker}
	slices.Sort(got)
	if !slices.Equal(got, []string{"a4", "b1"}) {
		t.Errorf("replacements %v, want a4 and b1 in zone eu-1", got)
	}
}

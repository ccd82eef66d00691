package placement

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gpulayer/gpulayer/internal/threadcpu"
)

// TestScheduleFewestSubGroupsAcrossLevels pins the fewest sub-groups
// counted at every tighter level: region b1 holds zone r1 with network
// groups x1, x2 and x3 of one machine each and zone r2 with x4 of two.
// Four nodes need both zones; r1 whole and one of x4 would span four
// network groups, two of r1 and x4 whole span three.
func TestScheduleFewestSubGroupsAcrossLevels(t *testing.T) {
	ws := []Worker{
		wk("a", "b1/r1/x1", "2.5.1", 4, 4),
		wk("b", "b1/r1/x2", "2.5.1", 4, 4),
		wk("c", "b1/r1/x3", "2.5.1", 4, 4),
		wk("d", "b1/r2/x4", "2.5.1", 4, 4),
		wk("e", "b1/r2/x4", "2.5.1", 4, 4),
	}
	for _, pol := range []Policy{{}, {GroupLocality: LocalityRegion}} {
		d := Schedule(Job{Name: "j", Nodes: 4, GPUsPerNode: 4}, ws, pol)
		if d.Status != StatusPlaced || d.Level != LevelRegion {
			t.Fatalf("locality %q: %s", pol.GroupLocality, d.Summary)
		}
		groups := map[string]int{}
		for _, p := range d.Workers {
			groups[p.Location.NetworkGroup]++
		}
		if len(groups) != 3 || groups["x4"] != 2 {
			t.Errorf("locality %q: took %v, want x4 whole and two of x1-x3 (3 network groups)", pol.GroupLocality, groups)
		}
		// Of r1's three equal groups, rank order (then the earlier)
		// takes the first two.
		if got := ids(d); !slices.Equal(got, []string{"a", "b", "d", "e"}) {
			t.Errorf("locality %q: took %v, want [a b d e]", pol.GroupLocality, got)
		}
		if want := "placed on worker group [a b d e] (same region b1 across 2 zones, 3 network groups, torch 2.5.1)"; d.Summary != want {
			t.Errorf("locality %q: %q, want %q", pol.GroupLocality, d.Summary, want)
		}
	}
}

// BenchmarkScheduleFewestAcrossLevels is the cost of the knapsack, on a
// fleet where the greedy split is not the fewest: region eu's zone z1 has
// 20 network groups of 5 free machines, z2 has 3 of 30; a 128-node job
// needs both zones, and z1 whole and 28 of z2 would span 21 network
// groups where z2 whole and 38 of z1 span 11.
func BenchmarkScheduleFewestAcrossLevels(b *testing.B) {
	var ws []Worker
	for g := range 20 {
		for i := range 5 {
			ws = append(ws, wk(fmt.Sprintf("a%d-%d", g, i), fmt.Sprintf("eu/z1/a%d", g), "2.5.1", 8, 8))
		}
	}
	for g := range 3 {
		for i := range 30 {
			ws = append(ws, wk(fmt.Sprintf("b%d-%d", g, i), fmt.Sprintf("eu/z2/b%d", g), "2.5.1", 8, 8))
		}
	}
	job := Job{Name: "train", Nodes: 128, GPUsPerNode: 8}
	d := Schedule(job, ws, Policy{})
	groups := map[string]bool{}
	for _, p := range d.Workers {
		groups[p.Location.NetworkGroup] = true
	}
	if d.Status != StatusPlaced || len(groups) != 11 {
		b.Fatalf("%d network groups: %s", len(groups), d.Summary)
	}
	b.ReportAllocs()
	threadcpu.Loop(b, func() { Schedule(job, ws, Policy{}) })
}

package placement

import (
	"slices"
	"testing"
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

package placement

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/gpulayer/gpulayer/topology"
)

// cloneMatrix is a deep copy of m: the same content at another pointer, as
// decoding each worker's facts gives.
func cloneMatrix(m *topology.Matrix) *topology.Matrix {
	c := *m
	c.Links = nil
	for _, r := range m.Links {
		c.Links = append(c.Links, append([]topology.Link(nil), r...))
	}
	c.NICLinks = nil
	for _, r := range m.NICLinks {
		c.NICLinks = append(c.NICLinks, append([]topology.Link(nil), r...))
	}
	c.NUMAAffinity = nil
	for _, s := range m.NUMAAffinity {
		c.NUMAAffinity = append(c.NUMAAffinity, append(topology.NUMASet(nil), s...))
	}
	return &c
}

// TestPickMemoGivesTheUncachedDecisions: on random fleets whose workers
// share matrices, carry copies of them, or carry variants (a link or a NUMA
// set changed; more variants than the memo keeps classes), with random
// free sets, every decision with the memo is the decision without it, for
// Schedule and ScheduleAll.
func TestPickMemoGivesTheUncachedDecisions(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 12))
	bases := []*topology.Matrix{hgxH100(t), dgx1V100(t)}
	var variants []*topology.Matrix
	for i := range 2 * maxPickClasses {
		v := cloneMatrix(bases[1])
		a, b := i%8, (i/8+3+i)%8
		if a != b {
			l := []topology.Link{topology.SYS, topology.NV(2), topology.PHB}[i%3]
			v.Links[a][b], v.Links[b][a] = l, l
		}
		if i%4 == 1 {
			// NUMA sets where the recording has none: GPU i%8 alone on
			// node 1.
			v.NUMAAffinity = make([]topology.NUMASet, 8)
			for g := range v.NUMAAffinity {
				v.NUMAAffinity[g] = topology.NUMASet{0}
			}
			v.NUMAAffinity[i%8] = topology.NUMASet{1}
		}
		variants = append(variants, v)
	}
	trials := 600
	if testing.Short() {
		trials = 150
	}
	memoised := 0
	for trial := range trials {
		ws := propFleet(rng, 5+rng.IntN(60), trial%3 == 0)
		many := trial%4 == 3 // more distinct matrices than classes
		for i := range ws {
			w := &ws[i]
			switch r := rng.IntN(6); {
			case many && r < 3:
				w.Matrix = variants[rng.IntN(len(variants))]
			case r < 2:
				w.Matrix = bases[rng.IntN(2)]
			case r < 5:
				w.Matrix = cloneMatrix(bases[rng.IntN(2)])
			default:
				w.Matrix = variants[rng.IntN(3)]
			}
			if rng.IntN(3) == 0 {
				w.Free = topology.DeviceSet(rng.Uint64()) & topology.AllDevices(8)
			}
		}
		pol, job := propPolicy(rng)
		if rng.IntN(2) == 0 {
			job.GPUsPerNode = 2 + rng.IntN(6) // picks of some of the free GPUs
		}
		ctx := fmt.Sprintf("trial %d: %+v %+v", trial, job, pol)

		var s scheduler
		got := s.schedule(job, ws, pol)
		if len(s.pickMemo) > 0 {
			memoised++
		}
		gotAll := ScheduleAll([]Request{{job, pol}, {Job{Name: "k", Nodes: 2, GPUsPerNode: 3}, pol}, {job, pol}}, ws)
		noPickMemo = true
		want := Schedule(job, ws, pol)
		wantAll := ScheduleAll([]Request{{job, pol}, {Job{Name: "k", Nodes: 2, GPUsPerNode: 3}, pol}, {job, pol}}, ws)
		noPickMemo = false
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\nmemoised %+v\nuncached %+v", ctx, got, want)
		}
		if !reflect.DeepEqual(gotAll, wantAll) {
			t.Fatalf("%s: ScheduleAll:\nmemoised %+v\nuncached %+v", ctx, gotAll, wantAll)
		}
	}
	if memoised < trials/10 {
		t.Fatalf("only %d of %d trials memoised a pick", memoised, trials)
	}
	t.Logf("%d of %d trials memoised picks", memoised, trials)
}

// TestReleaseKeepsNoneOfTheCallersData: a pooled scheduler, after calls on
// a fleet of many cells and then on one of few, holds no string, matrix or
// pick of either (release clears only what each call used).
func TestReleaseKeepsNoneOfTheCallersData(t *testing.T) {
	var s scheduler
	for _, ws := range [][]Worker{nvlPolicyFleet(t, 400), adrFleet(t, 30), policyFleet(t, 60, true)} {
		for _, job := range []Job{{Name: "a", Nodes: 4, GPUsPerNode: 4}, {Name: "b", Nodes: 2, GPUsPerNode: 8}} {
			if d := s.schedule(job, ws, Policy{}); d.Status != StatusPlaced {
				t.Fatal(d.Summary)
			}
			s.release()
			for i, c := range append(s.cells[:cap(s.cells)], s.sorted[:cap(s.sorted)]...) {
				if c != (cell{}) {
					t.Fatalf("after release, cell %d holds %+v", i, c.key)
				}
			}
			if len(s.index) != 0 || len(s.classes) != 0 || len(s.pickMemo) != 0 || s.lastMatrix != nil || s.fullMatrix != nil || s.ws != nil {
				t.Fatalf("after release: index %d, classes %d, picks %d, matrices %p %p, workers %d",
					len(s.index), len(s.classes), len(s.pickMemo), s.lastMatrix, s.fullMatrix, len(s.ws))
			}
		}
	}
}

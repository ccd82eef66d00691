package topology

import (
	"math/rand"
	"reflect"
	"slices"
	"testing"
)

// hostileMatrix is the machine issue 7 found: 64 GPUs with random links of
// a few kinds (seed 2 gives three), where an exact pick of 24 to 32 GPUs
// took minutes.
func hostileMatrix() *Matrix { return randomMatrix(rand.New(rand.NewSource(2)), 64) }

// manyLinkKindsMatrix is n GPUs whose pairs take one of kinds links at
// random: SYS, NODE, PHB, PXB, PIX, then NV1, NV2, ... Hundreds of kinds
// are the most expensive search node the bounds can meet.
func manyLinkKindsMatrix(rng *rand.Rand, n, kinds int) *Matrix {
	m := &Matrix{Links: make([][]Link, n)}
	for i := range m.Links {
		m.Links[i] = make([]Link, n)
		m.Links[i][i] = Self
	}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			x := rng.Intn(kinds)
			l := NV(x - 4)
			if x < 5 {
				l = [...]Link{SYS, NODE, PHB, PXB, PIX}[x]
			}
			m.Links[i][j], m.Links[j][i] = l, l
		}
	}
	return m
}

// checkPickIsItsSet fails unless p holds k distinct free GPUs, sorted, and
// its numbers are those of that set.
func checkPickIsItsSet(t *testing.T, m *Matrix, free DeviceSet, k int, opts PickOptions, p Pick) {
	t.Helper()
	set := DeviceSetOf(p.GPUs...)
	if len(p.GPUs) != k || set.Len() != k || set&^free != 0 || !slices.IsSorted(p.GPUs) {
		t.Fatalf("picked %v: want %d distinct free GPUs, sorted (free %v)", p.GPUs, k, free.Indices())
	}
	s := scoreSet(m, free, set, opts)
	want := Pick{GPUs: p.GPUs, Total: s.total, NICLocal: s.nicLocal, NUMANodes: s.numa, Cross: s.cross, Optimal: p.Optimal}
	if k >= 2 {
		want.Bottleneck = s.bneck
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("the pick's numbers are not its set's:\n got %+v\nwant %+v", p, want)
	}
}

func TestPickDevicesStopsAtItsBudgetOnAHostileMachine(t *testing.T) {
	m := hostileMatrix()
	free := AllDevices(64)
	for _, k := range []int{24, 28, 32} {
		for _, multi := range []bool{false, true} {
			opts := PickOptions{MultiNode: multi}
			p, err := PickDevices(m, free, k, opts)
			if err != nil {
				t.Fatal(err)
			}
			if p.Optimal {
				t.Fatalf("k=%d multi=%v: Optimal on a search that cannot finish within %d nodes", k, multi, PickBudget)
			}
			checkPickIsItsSet(t, m, free, k, opts, p)
			// A node budget, not a clock: the same inputs give the same set.
			again, err := PickDevices(m, free, k, opts)
			if err != nil || !reflect.DeepEqual(again, p) {
				t.Fatalf("k=%d multi=%v: a second pick gave %+v (%v), the first %+v", k, multi, again, err, p)
			}
		}
	}
}

// TestPickDevicesOutOfBudgetNeverBeatsTheReference runs out of tiny
// budgets on the recordings and on random machines, so that every way the
// search can stop is met: before any set is found, after one, at the first
// score level tried or a lower one. The result must be a valid set with its
// own numbers that ranks no better than the exhaustive reference's; when it
// says Optimal it must be the reference's.
func TestPickDevicesOutOfBudgetNeverBeatsTheReference(t *testing.T) {
	machines := loadLayouts(t)
	rng := rand.New(rand.NewSource(9))
	for i := 0; i < 40; i++ {
		machines = append(machines, layout{"random", randomMatrix(rng, 2+rng.Intn(13))})
	}
	for _, n := range []int{12, 14} {
		machines = append(machines, layout{"many link kinds", manyLinkKindsMatrix(rng, n, 30)})
	}
	cut, cutBeforeAnySet := 0, 0
	for mi, mc := range machines {
		p, err := PrepareMatrix(mc.m)
		if err != nil {
			t.Fatal(err)
		}
		n := mc.m.GPUs()
		masks := freeMasks(n, int64(mi))
		if len(masks) > 12 {
			masks = append(masks[:3], masks[len(masks)-9:]...)
		}
		for _, free := range masks {
			for k := 0; k <= free.Len(); k++ {
				for _, budget := range []int{1, 3, 10, 40} {
					opts := PickOptions{MultiNode: budget%2 == 0, budget: budget}
					got, err := p.Pick(free, k, opts)
					if err != nil {
						t.Fatalf("%s free=%v k=%d budget=%d: %v", mc.name, free.Indices(), k, budget, err)
					}
					want := pickReference(mc.m, free, k, PickOptions{MultiNode: opts.MultiNode})
					if got.Optimal {
						if !reflect.DeepEqual(got, want) {
							t.Fatalf("%s free=%v k=%d budget=%d: Optimal but\n got %+v\nwant %+v", mc.name, free.Indices(), k, budget, got, want)
						}
						continue
					}
					cut++
					if budget == 1 {
						cutBeforeAnySet++
					}
					checkPickIsItsSet(t, mc.m, free, k, opts, got)
					gs := scoreSet(mc.m, free, DeviceSetOf(got.GPUs...), opts)
					ws := scoreSet(mc.m, free, DeviceSetOf(want.GPUs...), opts)
					if better(gs, ws) {
						t.Fatalf("%s free=%v k=%d budget=%d: %+v ranks before the reference's %+v", mc.name, free.Indices(), k, budget, got, want)
					}
				}
			}
		}
	}
	if cut == 0 || cutBeforeAnySet == 0 {
		t.Fatalf("%d picks ran out of budget, %d at budget 1: the stopped search is not exercised", cut, cutBeforeAnySet)
	}
	t.Logf("%d picks ran out of budget", cut)
}

// TestPickDevicesWithManyLinkKindsEqualsReference holds the search exact
// where its total bound stops counting level by level (more than
// boundLevels kinds of link).
func TestPickDevicesWithManyLinkKindsEqualsReference(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	for i, kinds := range []int{24, 60, 260} {
		m := manyLinkKindsMatrix(rng, 13+i, kinds)
		p, err := PrepareMatrix(m)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.levels) <= boundLevels {
			t.Fatalf("%d link kinds gave %d score levels: the bound's cap is not reached", kinds, len(p.levels))
		}
		for _, free := range freeMasks(m.GPUs(), int64(i))[:6] {
			comparePicks(t, "many link kinds", m, free)
		}
	}
}

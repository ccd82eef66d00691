package topology

import (
	"math/rand"
	"slices"
	"testing"
)

// pathScore is the total score of the links between neighbours of order.
func pathScore(m *Matrix, order []int) int {
	s := 0
	for i := 1; i < len(order); i++ {
		s += m.Links[order[i-1]][order[i]].Score()
	}
	return s
}

// orderReference is the best path by exhaustion: every permutation of the
// sorted GPUs, in lexicographic order, the first with the highest total.
func orderReference(m *Matrix, gpus []int) []int {
	perm := slices.Clone(gpus)
	slices.Sort(perm)
	var best []int
	bestScore := -1
	var walk func(i int)
	walk = func(i int) {
		if i == len(perm) {
			if s := pathScore(m, perm); s > bestScore {
				best, bestScore = slices.Clone(perm), s
			}
			return
		}
		for j := i; j < len(perm); j++ {
			// Rotate perm[j] to position i, keeping the rest in order, so
			// that permutations come in lexicographic order.
			v := perm[j]
			copy(perm[i+1:j+1], perm[i:j])
			perm[i] = v
			walk(i + 1)
			copy(perm[i:j], perm[i+1:j+1])
			perm[j] = v
		}
	}
	walk(0)
	return best
}

func TestOrderLocalRanksPutsNVLinkPairsOnNeighbouringRanks(t *testing.T) {
	// A bridged PCIe box whose NVLink bridges join GPUs 0-2 and 1-3 (the
	// slots alternate between the two bridges): local ranks 0,1 and 2,3
	// get a bridge each.
	m := &Matrix{Links: [][]Link{
		{Self, PHB, NV(4), SYS},
		{PHB, Self, SYS, NV(4)},
		{NV(4), SYS, Self, PHB},
		{SYS, NV(4), PHB, Self},
	}}
	gpus := []int{0, 1, 2, 3}
	OrderLocalRanks(m, gpus)
	if want := []int{0, 2, 3, 1}; !slices.Equal(gpus, want) {
		t.Errorf("order %v, want %v (NV4, PHB, NV4)", gpus, want)
	}
}

func TestOrderLocalRanksKeepsAscendingWhenItIsBest(t *testing.T) {
	// NVSwitch (every pair NV18), PCIe only (every pair SYS), and NVLink
	// pairs 0-1 and 2-3 that are already neighbours.
	for _, file := range []string{"hgx-h100-8x-nv18-gpunumaid-nonic.txt", "8x-rtx4090-pcie-all-sys-8numa.txt", "azure-nc96ads-a100v4-4x-a100pcie-nv12-pairs-4numa-matrix-only.txt"} {
		m := mustParse(t, file)
		gpus := []int{3, 0, 2, 1}
		OrderLocalRanks(m, gpus)
		if !slices.Equal(gpus, []int{0, 1, 2, 3}) {
			t.Errorf("%s: order %v, want 0,1,2,3", file, gpus)
		}
	}
}

func TestOrderLocalRanksFollowsDGX1NV2Ring(t *testing.T) {
	// The cube mesh has a path through all 8 GPUs over NV2 links only.
	m := mustParse(t, "dgx1-v100-8x-nv1-nv2-mlx5-driver440.txt")
	gpus := []int{0, 1, 2, 3, 4, 5, 6, 7}
	OrderLocalRanks(m, gpus)
	for i := 1; i < len(gpus); i++ {
		if l := m.Links[gpus[i-1]][gpus[i]]; l != NV(2) {
			t.Fatalf("order %v: GPUs %d and %d joined by %s, want NV2 between every neighbour", gpus, gpus[i-1], gpus[i], l)
		}
	}
}

func TestOrderLocalRanksMatchesExhaustiveReference(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for trial := range 3000 {
		n := 3 + rng.Intn(6)
		m := randomMatrix(rng, n)
		k := 3 + rng.Intn(n-2)
		gpus := rng.Perm(n)[:k]
		want := orderReference(m, gpus)
		got := slices.Clone(gpus)
		OrderLocalRanks(m, got)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: %d GPUs of %d: order %v (score %d), want %v (score %d)", trial, k, n, got, pathScore(m, got), want, pathScore(m, want))
		}
	}
}

// The memo of exact orders gives what the search gives: asked again (the
// second time from the memo: it does not grow), and past its bound, where
// it starts again.
func TestOrderLocalRanksRemembersTheSameOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	type order struct {
		m    *Matrix
		gpus []int
	}
	cases := func(n int) []order {
		var out []order
		for range n {
			size := 3 + rng.Intn(6)
			out = append(out, order{randomMatrix(rng, size), rng.Perm(size)[:3+rng.Intn(size-2)]})
		}
		return out
	}
	check := func(round string, cs []order) {
		t.Helper()
		for i, c := range cs {
			want := orderReference(c.m, c.gpus)
			got := slices.Clone(c.gpus)
			OrderLocalRanks(c.m, got)
			if !slices.Equal(got, want) {
				t.Fatalf("%s, case %d: order %v, want %v", round, i, got, want)
			}
		}
	}
	exactOrders.orders = nil
	some := cases(300)
	check("first", some)
	remembered := len(exactOrders.orders)
	if remembered == 0 {
		t.Fatal("nothing remembered")
	}
	check("again", some)
	if n := len(exactOrders.orders); n != remembered {
		t.Errorf("asked again, the memo went from %d to %d orders", remembered, n)
	}
	check("past the bound", cases(2*orderMemoMax))
	if n := len(exactOrders.orders); n > orderMemoMax {
		t.Errorf("the memo holds %d orders, more than %d", n, orderMemoMax)
	}
}

func TestOrderLocalRanksBeyondEightGPUsIsAPermutation(t *testing.T) {
	m := mustParse(t, "synthetic-16x-two-boards-nv12-sys-4numa-4nic.txt")
	gpus := []int{15, 3, 9, 0, 1, 2, 8, 10, 11, 4}
	OrderLocalRanks(m, gpus)
	sorted := slices.Clone(gpus)
	slices.Sort(sorted)
	if !slices.Equal(sorted, []int{0, 1, 2, 3, 4, 8, 9, 10, 11, 15}) {
		t.Fatalf("order %v lost or repeated a GPU", gpus)
	}
	// The walk stays on a board (NV12) while it can: GPUs 0-4 are one
	// board's, 8-11 and 15 the other's, joined by SYS.
	crossings := 0
	for i := 1; i < len(gpus); i++ {
		if m.Links[gpus[i-1]][gpus[i]] == SYS {
			crossings++
		}
	}
	if crossings != 1 {
		t.Errorf("order %v crosses boards %d times, want once", gpus, crossings)
	}
}

func TestOrderLocalRanksLeavesOddInputAlone(t *testing.T) {
	m := mustParse(t, "dgx1-v100-8x-nv1-nv2-mlx5-driver440.txt")
	for _, gpus := range [][]int{{2, 1, 9}, {3, 3, 1}, {-1, 0, 1}, {5, 4}} {
		in := slices.Clone(gpus)
		OrderLocalRanks(m, gpus)
		if !slices.Equal(gpus, in) {
			t.Errorf("%v became %v", in, gpus)
		}
	}
	OrderLocalRanks(nil, []int{0, 1, 2})
}

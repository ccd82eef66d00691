package topology

import (
	"math/bits"
	"sync"
)

// exactOrderMax is the most GPUs OrderLocalRanks orders exactly: the
// search is over every path through them (2^k·k² steps, about 16,000 for
// 8 GPUs); past it, a greedy walk.
const exactOrderMax = 8

// OrderLocalRanks reorders gpus, in place, into the order a node lists
// them in CUDA_VISIBLE_DEVICES, so that consecutive local ranks share the
// fastest links: the order whose links between neighbours score highest
// in total (a path through the GPUs), and of those the one that is first
// lexicographically. On a PCIe box whose NVLink bridges join GPUs 0-2 and
// 1-3 (2 and 3 sharing a host bridge) it is 0,2,3,1: local ranks 0 and 1,
// and 2 and 3, talk over a bridge. Where every link is alike (an NVSwitch
// machine, or PCIe only) the indices stay ascending.
// Tensor- and pipeline-parallel groups are made of consecutive ranks, and
// this is what keeps them on the fast links.
//
// Up to 8 GPUs the order is exact; beyond, a walk from the lowest index to
// the best-linked next GPU each time (the lowest index on ties). gpus must
// be indices of m's rows, each once; other input is left as it is.
func OrderLocalRanks(m *Matrix, gpus []int) {
	k := len(gpus)
	if k < 3 || !orderable(m, gpus) {
		return
	}
	insertionSort(gpus)
	score := func(a, b int) int { return m.Links[gpus[a]][gpus[b]].Score() }
	uniform := true
	for a := 0; a < k && uniform; a++ {
		for b := a + 1; b < k; b++ {
			if score(a, b) != score(0, 1) {
				uniform = false
				break
			}
		}
	}
	if uniform {
		return
	}
	var order [MaxGPUs]int
	if k <= exactOrderMax {
		key := orderKey{k: k}
		for a := range k {
			for b := range k {
				key.score[a][b] = int32(score(a, b))
			}
		}
		exactOrders.order(&key, order[:k])
	} else {
		greedyOrder(k, score, order[:k])
	}
	var sorted [MaxGPUs]int
	copy(sorted[:k], gpus)
	for i, p := range order[:k] {
		gpus[i] = sorted[p]
	}
}

// orderable reports whether every index is a row of a square matrix, and
// none repeats.
func orderable(m *Matrix, gpus []int) bool {
	if m == nil || len(m.Links) > MaxGPUs {
		return false
	}
	var seen DeviceSet
	for _, g := range gpus {
		if g < 0 || g >= len(m.Links) || len(m.Links[g]) != len(m.Links) || seen.Has(g) {
			return false
		}
		seen |= DeviceSetOf(g)
	}
	return true
}

func insertionSort(xs []int) {
	for i := 1; i < len(xs); i++ {
		for j := i; j > 0 && xs[j] < xs[j-1]; j-- {
			xs[j], xs[j-1] = xs[j-1], xs[j]
		}
	}
}

// orderKey is what exactOrder's answer depends on: the number of positions
// and the scores of the links between them.
type orderKey struct {
	k     int
	score [exactOrderMax][exactOrderMax]int32
}

// orderMemo keeps exactOrder's answers by what they depend on. A fleet
// has few machine models and a plan orders the same GPUs of the same
// model again and again (every node of an 8-GPU job, and again for each
// waiting estimate), each time a search of thousands of steps; a lookup
// is a hash of the table. The answer is the same either way.
type orderMemo struct {
	mu     sync.Mutex
	orders map[orderKey][exactOrderMax]int8
}

// orderMemoMax bounds the memo: past it, it starts again empty.
const orderMemoMax = 1024

var exactOrders orderMemo

// order writes exactOrder(key.k, &key.score) into out.
func (m *orderMemo) order(key *orderKey, out []int) {
	m.mu.Lock()
	known, ok := m.orders[*key]
	m.mu.Unlock()
	if !ok {
		exactOrder(key.k, &key.score, out)
		for i, p := range out {
			known[i] = int8(p)
		}
		m.mu.Lock()
		if m.orders == nil || len(m.orders) >= orderMemoMax {
			m.orders = map[orderKey][exactOrderMax]int8{}
		}
		m.orders[*key] = known
		m.mu.Unlock()
		return
	}
	for i := range out {
		out[i] = int(known[i])
	}
}

// exactOrder writes the best path over positions 0..k-1 into out, score
// being the links' scores between positions. best[r][c] is the highest
// total of a path that starts at c and visits exactly the positions of r
// (c among them); the path is then read from the front, taking at each
// step the lowest position that keeps the total, which makes it the first
// of the best paths lexicographically. The loops visit only the positions
// in a set (a quarter of the steps of trying each of k), with the scores
// in a table: placing a job of 8-GPU nodes orders each node's GPUs, and a
// plan's waiting estimates place such jobs again and again.
func exactOrder(k int, score *[exactOrderMax][exactOrderMax]int32, out []int) {
	full := 1<<k - 1
	var best [1 << exactOrderMax][exactOrderMax]int32
	for r := 1; r <= full; r++ {
		for cs := r; cs != 0; cs &= cs - 1 {
			c := bits.TrailingZeros(uint(cs))
			rest := r &^ (1 << c)
			v := int32(-1)
			if rest == 0 {
				v = 0
			}
			row, after := &score[c], &best[rest]
			for ns := rest; ns != 0; ns &= ns - 1 {
				n := bits.TrailingZeros(uint(ns))
				v = max(v, row[n]+after[n])
			}
			best[r][c] = v
		}
	}
	cur := 0
	for c := 1; c < k; c++ {
		if best[full][c] > best[full][cur] {
			cur = c
		}
	}
	out[0] = cur
	r := full
	for i := 1; i < k; i++ {
		rest := r &^ (1 << cur)
		next := -1
		for n := 0; n < k; n++ {
			if rest&(1<<n) != 0 && score[cur][n]+best[rest][n] == best[r][cur] {
				next = n
				break
			}
		}
		out[i], r, cur = next, rest, next
	}
}

// greedyOrder walks from position 0 to the unvisited position with the
// best link each time, the lowest on ties.
func greedyOrder(k int, score func(a, b int) int, out []int) {
	var visited DeviceSet = 1
	out[0] = 0
	for i := 1; i < k; i++ {
		cur, next := out[i-1], -1
		for n := 0; n < k; n++ {
			if !visited.Has(n) && (next < 0 || score(cur, n) > score(cur, next)) {
				next = n
			}
		}
		out[i] = next
		visited |= DeviceSetOf(next)
	}
}

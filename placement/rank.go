package placement

import (
	"math"
	"slices"
	"strings"

	"github.com/gpulayer/gpulayer/topology"
)

// The rank order of free workers, and the GPU pick quality that breaks ties
// in it.

// before is the full rank order: the policy's key (spread: fewest running
// tasks, then most free GPUs; most_free_memory: most free memory;
// first_fit: none), then, for equal keys, the better GPU pick (larger
// bottleneck, then larger total; not for first_fit, whose order is worker
// ID), then worker ID, then input position (only for duplicate IDs).
func (s *scheduler) before(a, b int32) bool {
	if pa, pb := s.prim[a], s.prim[b]; pa != pb {
		return pa < pb
	}
	if s.useQ {
		if qa, qb := s.qualityOf(a), s.qualityOf(b); qa != qb {
			return qa < qb
		}
	}
	return s.idBefore(a, b)
}

// qualityOf is quality with its cached case inlined: the rank order asks for
// the same workers' keys again and again.
func (s *scheduler) qualityOf(i int32) int64 {
	if s.qualDone[i] {
		return s.qual[i]
	}
	return s.quality(i)
}

// beforeByKey is the policy's rank key alone (spread: running tasks, then
// free GPUs; most_free_memory: free memory; first_fit: worker ID), with
// equal keys unordered. It ranks groups: ties between groups go to the
// earlier group in (torch version, location) order, not to worker IDs or
// GPU picks, which would mean reading every tied worker's ID and matrix.
func (s *scheduler) beforeByKey(a, b int32) bool {
	if pa, pb := s.prim[a], s.prim[b]; pa != pb {
		return pa < pb
	}
	return s.rank == rankFirstFit && s.idBefore(a, b)
}

func (s *scheduler) idBefore(a, b int32) bool {
	if c := strings.Compare(s.ws[a].ID, s.ws[b].ID); c != 0 {
		return c < 0
	}
	return a < b
}

func (s *scheduler) rankBefore(a, b int32, full bool) bool {
	if full {
		return s.before(a, b)
	}
	return s.beforeByKey(a, b)
}

// fillRace finds, among groups offered one by one in (torch version,
// location) order, the one whose n-th worker ranks first: the group a walk
// of free workers in rank order would complete first. Between two single
// workers the comparison is the full rank order; between groups, the
// policy's key alone, and the earlier group wins a tie. Each group's n-th
// worker is found once.
type fillRace struct {
	s     *scheduler
	n     int // 0: the group's own size (a group taken whole)
	best  int
	key   int32 // n-th worker of best, when haveKey
	full  bool
	group func(i int) group
	have  bool
	// bySize: only groups of one size meet (best fit), so two single
	// workers can be compared in full. First fill compares groups of every
	// size and keeps to the key, so that the order stays transitive.
	bySize bool
}

// reset makes i the leader without comparing.
func (r *fillRace) reset(i int) { r.best, r.have = i, false }

// offer compares group i with the leader and makes it the leader when it
// fills first.
func (r *fillRace) offer(i int) {
	a, b := r.group(i), r.group(r.best)
	full := r.bySize && a.size() == 1 && b.size() == 1
	n := r.n
	if n == 0 {
		n = int(a.room)
	}
	if !r.have || r.full != full {
		r.key, r.full, r.have = r.s.nth(b, n, full), full, true
	}
	if k := r.s.nth(a, n, full); r.s.rankBefore(k, r.key, full) {
		r.best, r.key = i, k
	}
}

// nth is the group's n-th free worker in rank order (1-based).
func (s *scheduler) nth(g group, n int, full bool) int32 {
	ws := s.freeByCell[g.lo:g.hi]
	if !full && s.rank != rankFirstFit && s.samePrim(ws) {
		// By the key alone every worker is the n-th: groups often tie
		// (idle workers spread evenly), and then no heap is needed.
		return ws[0]
	}
	switch {
	case n <= 1:
		best := ws[0]
		for _, w := range ws[1:] {
			if s.rankBefore(w, best, full) {
				best = w
			}
		}
		return best
	case n >= len(ws):
		worst := ws[0]
		for _, w := range ws[1:] {
			if s.rankBefore(worst, w, full) {
				worst = w
			}
		}
		return worst
	}
	return s.firstN(ws, n, full)[0]
}

// samePrim reports whether the workers share one primary rank key.
func (s *scheduler) samePrim(ws []int32) bool {
	p := s.prim[ws[0]]
	for _, w := range ws[1:] {
		if s.prim[w] != p {
			return false
		}
	}
	return true
}

// topN returns the n first workers of ws in rank order, sorted, in s.heap's
// storage (valid until the next call).
func (s *scheduler) topN(ws []int32, n int, full bool) []int32 {
	var h []int32
	switch {
	case n >= len(ws):
		h = append(s.heap[:0], ws...)
	case full && s.useQ:
		h = s.firstByKeyThenPick(ws, n)
	default:
		h = s.firstN(ws, n, full)
	}
	s.heap = h
	slices.SortFunc(h, func(a, b int32) int {
		switch {
		case a == b:
			return 0
		case s.rankBefore(a, b, full):
			return -1
		}
		return 1
	})
	return h
}

// firstByKeyThenPick is firstN in full rank order, with GPU picks scored
// only where they can decide: the workers whose key ranks before the n-th
// worker's key are all in; of those that share that key, the best by the
// full order (pick quality, then ID) fill the rest. Picking on a machine
// can cost tens of microseconds, and a heap over every worker would score
// whichever tied workers its comparisons happen to meet.
func (s *scheduler) firstByKeyThenPick(ws []int32, n int) []int32 {
	edge := s.prim[s.firstN(ws, n, false)[0]] // the n-th key
	in, tied := s.heap[:0], s.tied[:0]
	for _, w := range ws {
		switch p := s.prim[w]; {
		case p < edge:
			in = append(in, w)
		case p == edge:
			tied = append(tied, w)
		}
	}
	s.tied = tied[:0]
	if need := n - len(in); need < len(tied) {
		s.spare = s.selectN(s.spare[:0], tied, need, true)
		tied = s.spare
	}
	return append(in, tied...)
}

// firstN returns the n first workers of ws in rank order (n < len(ws)) as a
// max-heap: its root is the n-th.
func (s *scheduler) firstN(ws []int32, n int, full bool) []int32 {
	s.heap = s.selectN(s.heap[:0], ws, n, full)
	return s.heap
}

// selectN appends to h the n first of ws in rank order (n < len(ws)) as a
// max-heap, its root the n-th. h must not share ws's storage.
func (s *scheduler) selectN(h, ws []int32, n int, full bool) []int32 {
	h = append(h, ws[:n]...)
	for i := n/2 - 1; i >= 0; i-- {
		s.siftDown(h, i, full)
	}
	for _, w := range ws[n:] {
		if s.rankBefore(w, h[0], full) {
			h[0] = w
			s.siftDown(h, 0, full)
		}
	}
	return h
}

func (s *scheduler) siftDown(h []int32, i int, full bool) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && s.rankBefore(h[l], h[r], full) {
			m = r
		}
		if !s.rankBefore(h[i], h[m], full) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// quality is the worker's GPU pick key (smaller is better), computed at
// most once per worker and only when a comparison needs it. When the job
// takes every free GPU there is nothing to choose, and the set is scored
// directly instead of searched.
func (s *scheduler) quality(i int32) int64 {
	if s.qualDone[i] {
		return s.qual[i]
	}
	q := int64(0)
	w := &s.ws[i]
	if m := usableMatrix(w); m != nil {
		free := w.freeSet()
		if count(free) == s.gpn {
			bn, total := s.fullQuality(m, free)
			q = -(int64(bn.Score())<<32 | int64(total))
			s.bneck[i] = bn
		} else if p, ok := s.pickFor(m, free); ok {
			q = -(int64(p.Bottleneck.Score())<<32 | int64(p.Total))
		}
	}
	s.qual[i], s.qualDone[i] = q, true
	return q
}

// usableMatrix is the worker's matrix when it is square and covers its
// GPUs; nil otherwise (then GPUs are taken by lowest index).
func usableMatrix(w *Worker) *topology.Matrix {
	m := w.Matrix
	n := m.GPUs()
	if n == 0 || n > topology.MaxGPUs || n < w.gpuCount() {
		return nil
	}
	for _, row := range m.Links {
		if len(row) != n {
			return nil
		}
	}
	return m
}

// setQuality scores a whole set as PickDevices does: its slowest link and
// the total of its pair scores.
func setQuality(m *topology.Matrix, set topology.DeviceSet) (topology.Link, int) {
	if set == topology.AllDevices(len(m.Links)) {
		// Every GPU (a whole machine per node, the common case): the upper
		// triangle of the matrix, row by row.
		// By index, the lowest score's place kept rather than its link:
		// ranging over the two-byte links copies each one twice.
		bs, total, at := int32(math.MaxInt32), int32(0), [2]int{-1, -1}
		for a, row := range m.Links {
			for b := a + 1; b < len(row); b++ {
				k := row[b].Kind
				sc := kindBase[k] + kindPerLink[k]*int32(row[b].NVLinks)
				total += sc
				if sc < bs {
					bs, at = sc, [2]int{a, b}
				}
			}
		}
		if at[0] < 0 {
			return topology.Link{}, 0
		}
		return m.Links[at[0]][at[1]], int(total)
	}
	var idx [topology.MaxGPUs]uint8
	n := 0
	for i := 0; set != 0; i++ {
		if set&1 != 0 {
			idx[n] = uint8(i)
			n++
		}
		set >>= 1
	}
	bn, bs, total := topology.Link{}, -1, 0
	for a := 0; a < n; a++ {
		row := m.Links[idx[a]]
		for _, j := range idx[a+1 : n] {
			l := row[j]
			sc := linkScore(l)
			total += sc
			if bs < 0 || sc < bs {
				bn, bs = l, sc
			}
		}
	}
	return bn, total
}

// kindBase and kindPerLink are Link.Score by kind, for the hot loops
// above, without a branch: the kind's score plus its score per NVLink
// (only NVLink has one) times the link count; kinds it does not know score
// 0, as in Link.Score. A test holds linkScore equal to Link.Score.
var (
	kindBase    = [256]int32{topology.LinkSYS: 1, topology.LinkNODE: 2, topology.LinkPHB: 3, topology.LinkPXB: 4, topology.LinkPIX: 5}
	kindPerLink = [256]int32{topology.LinkNV: 10}
)

func linkScore(l topology.Link) int {
	return int(kindBase[l.Kind] + kindPerLink[l.Kind]*int32(l.NVLinks))
}

package topology

import "slices"

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
		if qa, qb := s.quality(a), s.quality(b); qa != qb {
			return qa < qb
		}
	}
	return s.idBefore(a, b)
}

// beforeByKey is the rank order without the GPU pick: the policy's key,
// then worker ID. It ranks groups, which GPU picks do not (computing them
// for every worker of every tied group would cost more than it tells).
func (s *scheduler) beforeByKey(a, b int32) bool {
	if pa, pb := s.prim[a], s.prim[b]; pa != pb {
		return pa < pb
	}
	return s.idBefore(a, b)
}

func (s *scheduler) idBefore(a, b int32) bool {
	if ia, ib := s.ws[a].ID, s.ws[b].ID; ia != ib {
		return ia < ib
	}
	return a < b
}

func (s *scheduler) rankBefore(a, b int32, full bool) bool {
	if full {
		return s.before(a, b)
	}
	return s.beforeByKey(a, b)
}

// fillsBefore reports whether group a completes n workers before group b
// when free workers are walked in rank order: a's n-th worker ranks first.
// Between two single workers that is the full rank order; between groups,
// the order without GPU picks.
func (s *scheduler) fillsBefore(a, b group, n int) bool {
	full := a.size() == 1 && b.size() == 1
	return s.rankBefore(s.nth(a, n, full), s.nth(b, n, full), full)
}

// nth is the group's n-th free worker in rank order (1-based).
func (s *scheduler) nth(g group, n int, full bool) int32 {
	ws := s.freeByCell[g.lo:g.hi]
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
	top := s.topN(ws, n, full)
	return top[n-1]
}

// topN returns the n first workers of ws in rank order, sorted, in s.heap's
// storage (valid until the next call).
func (s *scheduler) topN(ws []int32, n int, full bool) []int32 {
	h := s.heap[:0]
	cmp := func(a, b int32) int {
		switch {
		case a == b:
			return 0
		case s.rankBefore(a, b, full):
			return -1
		}
		return 1
	}
	if n >= len(ws) {
		h = append(h, ws...)
		slices.SortFunc(h, cmp)
		s.heap = h
		return h
	}
	// A max-heap of the n first so far: its root ranks last among them.
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
	slices.SortFunc(h, cmp)
	s.heap = h
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
		if free.Len() == s.gpn {
			bn, total := setQuality(m, free)
			q = -(int64(bn.Score())<<32 | int64(total))
		} else if p, err := PickDevices(m, free, s.gpn, s.opts); err == nil {
			if s.picks == nil {
				s.picks = make(map[int32]Pick)
			}
			s.picks[i] = p
			q = -(int64(p.Bottleneck.Score())<<32 | int64(p.Total))
		}
	}
	s.qual[i], s.qualDone[i] = q, true
	return q
}

// usableMatrix is the worker's matrix when it is square and covers its
// GPUs; nil otherwise (then GPUs are taken by lowest index).
func usableMatrix(w *Worker) *Matrix {
	m := w.Matrix
	n := m.GPUs()
	if n == 0 || n > MaxGPUs || n < w.gpuCount() {
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
func setQuality(m *Matrix, set DeviceSet) (Link, int) {
	var idx [MaxGPUs]uint8
	n := 0
	for i := 0; set != 0; i++ {
		if set&1 != 0 {
			idx[n] = uint8(i)
			n++
		}
		set >>= 1
	}
	bn, bs, total := Link{}, -1, 0
	for a := 0; a < n; a++ {
		row := m.Links[idx[a]]
		for _, j := range idx[a+1 : n] {
			l := row[j]
			sc := l.Score()
			total += sc
			if bs < 0 || sc < bs {
				bn, bs = l, sc
			}
		}
	}
	return bn, total
}

package placement

import "slices"

// chooseBucket picks, among the buckets holding the job now, the best fit
// (fewest free workers left) or, for first_fill, the first to fill; -1 when
// none holds it.
func (s *scheduler) chooseBucket(bs []group) int {
	race := fillRace{s: s, n: s.nodes, best: -1, group: func(i int) group { return bs[i] }, bySize: s.pol.BucketChoice == BucketBestFit}
	for i := range bs {
		if bs[i].size() < s.nodes {
			continue
		}
		switch {
		case race.best < 0:
			race.reset(i)
		case s.pol.BucketChoice == BucketBestFit && bs[i].size() < bs[race.best].size():
			race.reset(i)
		case s.pol.BucketChoice == BucketBestFit && bs[i].size() > bs[race.best].size():
		default:
			race.offer(i)
		}
	}
	return race.best
}

// take appends need workers of group g to s.chosen: from as few groups of
// the next tighter level as possible (the largest first, the last by best
// fit), recursively, and inside the tightest groups in rank order.
func (s *scheduler) take(g group, need int) {
	if need <= 0 {
		return
	}
	if s.flat || g.chi == g.clo || g.depth >= 3 {
		s.chosen = append(s.chosen, s.topN(s.freeByCell[g.lo:g.hi], need, true)...)
		return
	}
	kids, singles := s.children(g)
	switch {
	case len(kids) == 0:
		// No worker knows the tighter level: each is a group of one, and
		// taking groups of one largest first is rank order.
		s.chosen = append(s.chosen, s.topN(s.freeByCell[g.lo:g.hi], need, true)...)
		return
	case len(kids) == 1 && singles == 0:
		s.take(kids[0], need)
		return
	}
	kids = s.appendSingles(kids, g)
	used := make([]bool, len(kids))
	group := func(i int) group { return kids[i] }
	for need > 0 {
		// The remainder fits one group: the smallest that holds it.
		fit := fillRace{s: s, n: need, best: -1, group: group, bySize: true}
		for i := range kids {
			switch {
			case used[i] || kids[i].size() < need:
			case fit.best < 0 || kids[i].size() < kids[fit.best].size():
				fit.reset(i)
			case kids[i].size() == kids[fit.best].size():
				fit.offer(i)
			}
		}
		if fit.best >= 0 {
			s.take(kids[fit.best], need)
			return
		}
		// Otherwise the largest, whole.
		big := fillRace{s: s, best: -1, group: group, bySize: true}
		for i := range kids {
			switch {
			case used[i]:
			case big.best < 0 || kids[i].size() > kids[big.best].size():
				big.reset(i)
			case kids[i].size() == kids[big.best].size():
				big.offer(i)
			}
		}
		used[big.best] = true
		s.take(kids[big.best], kids[big.best].size())
		need -= kids[big.best].size()
	}
}

// children splits g on the next tighter field into the groups that have
// free workers, and counts the free workers of cells with no value there.
func (s *scheduler) children(g group) ([]group, int) {
	depth := int(g.depth) + 1
	var kids []group
	singles := 0
	for i := g.clo; i < g.chi; {
		c := &s.cells[i]
		if c.key.field(depth) == "" {
			singles += int(c.free)
			i++
			continue
		}
		j := i + 1
		free := c.free
		for j < g.chi && samePrefix(&s.cells[j].key, &c.key, depth) {
			free += s.cells[j].free
			j++
		}
		if free > 0 {
			kids = append(kids, group{clo: i, chi: j, depth: int8(depth), lo: c.off, hi: c.off + free})
		}
		i = j
	}
	return kids, singles
}

// appendSingles adds a group of one for each free worker of g that has no
// value at the next tighter level.
func (s *scheduler) appendSingles(kids []group, g group) []group {
	depth := int(g.depth) + 1
	for i := g.clo; i < g.chi; i++ {
		if c := &s.cells[i]; c.key.field(depth) == "" {
			for p := c.off; p < c.off+c.free; p++ {
				kids = append(kids, group{clo: i, chi: i, depth: 3, lo: p, hi: p + 1})
			}
		}
	}
	return kids
}

// spans counts, for each level tighter than the placement's, the groups the
// chosen workers span, loosest first (see distinct).
func (s *scheduler) spans(level Level) []GroupCount {
	var out []GroupCount
	for l := level; l > LevelNetworkGroup; {
		l--
		out = append(out, GroupCount{Level: l, Groups: s.distinct(l)})
	}
	return out
}

// distinct counts the distinct locations up to level l among the chosen
// workers that report a value at l; workers that report none are not
// counted.
func (s *scheduler) distinct(l Level) int {
	seen := make([]Location, 0, 8)
	for _, i := range s.chosen {
		loc := s.ws[i].Location
		if loc.At(l) == "" {
			continue
		}
		if key := loc.Upto(l); !slices.Contains(seen, key) {
			seen = append(seen, key)
		}
	}
	return len(seen)
}

func grow[T any](xs []T, n int) []T {
	if cap(xs) < n {
		return make([]T, n)
	}
	return xs[:n]
}

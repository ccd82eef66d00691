package placement

import (
	"slices"
	"strings"
)

// chooseBucket picks, among the buckets holding the job now, the best fit
// (the least room left; with slices, then the fewest free workers left) or,
// for first_fill, the first to fill; -1 when none holds it.
func (s *scheduler) chooseBucket(bs []group) int {
	bestFit := s.pol.BucketChoice == BucketBestFit
	if bestFit && s.rank == rankBinpack {
		return s.binpackFit(bs, s.nodes, nil)
	}
	race := fillRace{s: s, n: s.nodes, best: -1, group: func(i int) group { return bs[i] }, bySize: bestFit}
	for i := range bs {
		if int(bs[i].room) < s.nodes {
			continue
		}
		switch c := fitOrder(&bs[i], &bs[max(race.best, 0)]); {
		case race.best < 0:
			race.reset(i)
		case bestFit && c < 0:
			race.reset(i)
		case bestFit && c > 0:
		default:
			race.offer(i)
		}
	}
	return race.best
}

// binpackFit is best fit under binpack, for a bucket and for the group
// that takes a remainder: the rank key comes first, so that of the groups
// with room for need (and not used) the one whose need-th worker has the
// fewest free GPUs (then the least free memory) wins, the best fit only
// between equal keys, then the earlier group; -1 when none has room. A
// one-node job goes to the machine with the fewest free GPUs that fit,
// whatever the size of its group, and whole machines stay free.
func (s *scheduler) binpackFit(gs []group, need int, used []bool) int {
	best, key := -1, int32(0)
	for i := range gs {
		if int(gs[i].room) < need || used != nil && used[i] {
			continue
		}
		k := s.nth(gs[i], need, false)
		if best < 0 || s.prim[k] < s.prim[key] || s.prim[k] == s.prim[key] && fitOrder(&gs[i], &gs[best]) < 0 {
			best, key = i, k
		}
	}
	return best
}

// fitOrder orders groups by room, then (with slices, where room can be
// less than the free workers) by free workers: Kueue's rule that between
// groups holding as many slices the one with less left over fits better.
func fitOrder(a, b *group) int {
	if a.room != b.room {
		return int(a.room - b.room)
	}
	return a.size() - b.size()
}

// take appends need workers of group g to s.chosen, spanning the fewest
// groups of the tighter levels, loosest first (fewest.go): the greedy
// choice of takeGreedy where it is already the fewest, which it nearly
// always is, and otherwise the split that is.
func (s *scheduler) take(g group, need int) {
	start := len(s.chosen)
	s.takeGreedy(g, need)
	s.fewest(g, need, start)
}

// takeGreedy appends need workers of group g to s.chosen: from as few
// groups of the next tighter level as possible (the largest first, the
// last by best fit), recursively, and inside the tightest groups in rank
// order. With slices, groups above the slices' level count only the
// workers that make whole slices, and pass each tighter group a multiple
// of the slice size.
func (s *scheduler) takeGreedy(g group, need int) {
	if need <= 0 {
		return
	}
	if s.flat || g.chi == g.clo || int(g.depth) >= depthOf(0) {
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
		s.takeGreedy(kids[0], need)
		return
	}
	if singles > 0 {
		kids = s.appendSingles(kids, g)
	}
	used := make([]bool, len(kids))
	group := func(i int) group { return kids[i] }
	for need > 0 {
		// The remainder fits one group: the smallest that holds it (under
		// binpack, the fullest machines first, as between buckets).
		if s.rank == rankBinpack {
			if b := s.binpackFit(kids, need, used); b >= 0 {
				s.takeGreedy(kids[b], need)
				return
			}
		} else {
			fit := fillRace{s: s, n: need, best: -1, group: group, bySize: true}
			for i := range kids {
				switch {
				case used[i] || int(kids[i].room) < need:
				case fit.best < 0:
					fit.reset(i)
				case fitOrder(&kids[i], &kids[fit.best]) < 0:
					fit.reset(i)
				case fitOrder(&kids[i], &kids[fit.best]) == 0:
					fit.offer(i)
				}
			}
			if fit.best >= 0 {
				s.takeGreedy(kids[fit.best], need)
				return
			}
		}
		// Otherwise the largest, whole: the most room, and of equal room
		// the one with the least left over.
		big := fillRace{s: s, best: -1, group: group, bySize: true}
		for i := range kids {
			switch {
			case used[i] || kids[i].room == 0:
			case big.best < 0:
				big.reset(i)
			case kids[i].room > kids[big.best].room || kids[i].room == kids[big.best].room && kids[i].size() < kids[big.best].size():
				big.reset(i)
			case fitOrder(&kids[i], &kids[big.best]) == 0:
				big.offer(i)
			}
		}
		if big.best < 0 {
			return // cannot happen: a group's room is its sub-groups' room
		}
		used[big.best] = true
		s.takeGreedy(kids[big.best], int(kids[big.best].room))
		need -= int(kids[big.best].room)
	}
}

// children splits g on the next tighter field into the groups that have
// free workers, and counts the free workers of cells with no value there.
// With slices, above their level, cells with no value there are one group
// like any other value, so that workers in one slice group stay together.
func (s *scheduler) children(g group) ([]group, int) {
	depth := int(g.depth) + 1
	sliced := s.slice > 0 && depth <= s.sliceDepth
	var kids []group
	singles := 0
	for i := g.clo; i < g.chi; {
		c := &s.cells[i]
		if !sliced && c.key.field(depth) == "" {
			singles += int(c.free)
			i++
			continue
		}
		j := i + 1
		free := c.free
		for j < g.chi && int(s.cells[j].split) > depth {
			free += s.cells[j].free
			j++
		}
		if free > 0 {
			kid := group{clo: i, chi: j, depth: int8(depth), lo: c.off, hi: c.off + free, room: free}
			if sliced {
				kid.room, _ = s.sliceRoom(kid.clo, kid.chi)
			}
			kids = append(kids, kid)
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
				kids = append(kids, group{clo: i, chi: i, depth: int8(depthOf(0)), lo: p, hi: p + 1, room: 1})
			}
		}
	}
	return kids
}

// topologyOrder puts the chosen workers in the order of the topology
// tree, which node ranks follow: by location from the loosest level to the
// tightest, so that the machines of one network group (zone, region) have
// consecutive ranks and groups come in a stable order (GCP's
// cluster/block/sub-block groups sort block by block), and workers that
// report nothing at a level after those that do. Inside a group they keep
// the order they were taken in, rank order. With slices, each
// group at the slices' level holds a multiple of the slice size, so
// consecutive runs of that size are each inside one group.
func (s *scheduler) topologyOrder() {
	slices.SortStableFunc(s.chosen, func(a, b int32) int {
		la, lb := &s.ws[a].Location, &s.ws[b].Location
		for l := LevelAny; l > 0; {
			l--
			va, vb := la.At(l), lb.At(l)
			switch {
			case va == vb:
				continue
			case va == "":
				return 1
			case vb == "":
				return -1
			}
			return strings.Compare(va, vb)
		}
		return 0
	})
}

// spans counts, for each level tighter than the placement's, the groups the
// chosen workers span, loosest first (see distinct). NVLink domains are
// counted only when a chosen worker is in one: most fleets have none, and
// a count of none in every explanation would say nothing.
func (s *scheduler) spans(level Level) []GroupCount {
	var out []GroupCount
	for l := level; l > LevelNVLinkDomain; {
		l--
		n := s.distinct(l)
		if l == LevelNVLinkDomain && n == 0 {
			break
		}
		out = append(out, GroupCount{Level: l, Groups: n})
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

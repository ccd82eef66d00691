package topology

import "math/bits"

// This file holds the exhaustive PickDevices that the search in pick.go is
// tested against: it scores every k-subset of the free GPUs by the ranking
// and keeps the best. It is slow and obviously right.

// pickReference is PickDevices by exhaustion.
func pickReference(m *Matrix, free DeviceSet, k int, opts PickOptions) Pick {
	n := m.GPUs()
	if n > 0 {
		free &= AllDevices(n)
	}
	if k == 0 {
		return Pick{GPUs: []int{}, Optimal: true}
	}
	if n == 0 {
		return Pick{GPUs: free.Indices()[:k], Optimal: true}
	}
	return pickExhaustive(m, free, k, opts)
}

// pickScores is the ranking key of one candidate set; better compares it.
type pickScores struct {
	set        DeviceSet
	bottleneck int
	bneck      Link
	total      int
	nicLocal   int
	numa       int
	cross      int
}

func scoreSet(m *Matrix, free, set DeviceSet, opts PickOptions) pickScores {
	s := pickScores{set: set, bottleneck: -1}
	idx := set.Indices()
	for a := 0; a < len(idx); a++ {
		for b := a + 1; b < len(idx); b++ {
			l := m.Links[idx[a]][idx[b]]
			sc := l.Score()
			s.total += sc
			if s.bottleneck < 0 || sc < s.bottleneck {
				s.bottleneck, s.bneck = sc, l
			}
		}
	}
	if opts.MultiNode {
		for _, g := range idx {
			if g < len(m.NICLinks) {
				for _, l := range m.NICLinks[g] {
					if l.Kind == LinkPIX || l.Kind == LinkPXB {
						s.nicLocal++
						break
					}
				}
			}
		}
	}
	numa := map[int]bool{}
	for _, g := range idx {
		if g < len(m.NUMAAffinity) {
			for _, node := range m.NUMAAffinity[g] {
				numa[node] = true
			}
		}
	}
	s.numa = len(numa)
	left := (free &^ set).Indices()
	for _, a := range idx {
		for _, b := range left {
			s.cross += m.Links[a][b].Score()
		}
	}
	return s
}

// better reports whether a ranks before b.
func better(a, b pickScores) bool {
	if a.bottleneck != b.bottleneck {
		return a.bottleneck > b.bottleneck
	}
	if a.total != b.total {
		return a.total > b.total
	}
	if a.nicLocal != b.nicLocal {
		return a.nicLocal > b.nicLocal
	}
	if a.numa != b.numa {
		return a.numa < b.numa
	}
	if a.cross != b.cross {
		return a.cross < b.cross
	}
	return lexLess(a.set, b.set)
}

// pickExhaustive scores every k-subset of free.
func pickExhaustive(m *Matrix, free DeviceSet, k int, opts PickOptions) Pick {
	var best pickScores
	found := false
	forEachSubset(free, k, func(set DeviceSet) {
		s := scoreSet(m, free, set, opts)
		if !found || better(s, best) {
			best, found = s, true
		}
	})
	p := Pick{GPUs: best.set.Indices(), Total: best.total, NICLocal: best.nicLocal, NUMANodes: best.numa, Cross: best.cross, Optimal: true}
	if k >= 2 {
		p.Bottleneck = best.bneck
	}
	return p
}

// forEachSubset calls fn with every subset of exactly k members of from.
func forEachSubset(from DeviceSet, k int, fn func(DeviceSet)) {
	members := from.Indices()
	var rec func(start int, cur DeviceSet, left int)
	rec = func(start int, cur DeviceSet, left int) {
		if left == 0 {
			fn(cur)
			return
		}
		for i := start; i <= len(members)-left; i++ {
			rec(i+1, cur|1<<uint(members[i]), left-1)
		}
	}
	if k <= bits.OnesCount64(uint64(from)) {
		rec(0, 0, k)
	}
}

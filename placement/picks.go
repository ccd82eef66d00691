package placement

import "github.com/gpulayer/gpulayer/topology"

// GPU picks memoised for one call. Fleets are made of few machine models,
// and workers tied on the rank key are all scored (firstByKeyThenPick): a
// 4-of-8 pick on each of a thousand idle machines of one model is one
// search, repeated. A pick depends on the matrix's content (what
// topology.Prepared.Describes checks), the free set, the GPU count and the
// options; the last two are the call's, so picks are kept by matrix class
// and free set. Matrices are classed by pointer first (reconcile gives the
// hosts of a model one matrix), then by content (workers decoded one by
// one each have their own copy).

// pickClass is one matrix content seen in the call: the first matrix of
// it, and the tables picks on it use.
type pickClass struct {
	m *topology.Matrix
	p *topology.Prepared
}

// maxPickClasses bounds the classes a call keeps: each new matrix is
// checked against every class, and a fleet of many distinct matrices picks
// on each without the memo.
const maxPickClasses = 8

// pickKey is a memoised pick: the class and the free set.
type pickKey struct {
	class int32
	free  topology.DeviceSet
}

// pickMemo is a pick found, or ok false where PickDevices failed.
type pickMemo struct {
	pick topology.Pick
	ok   bool
}

// noPickMemo turns the memo off, for tests that compare with it.
var noPickMemo = false

// pickFor is topology.PickDevices(m, free, s.gpn, s.opts), and whether it
// succeeded.
func (s *scheduler) pickFor(m *topology.Matrix, free topology.DeviceSet) (topology.Pick, bool) {
	c := s.classOf(m)
	if c < 0 {
		p, err := topology.PickDevices(m, free, s.gpn, s.opts)
		return p, err == nil
	}
	k := pickKey{int32(c), free}
	if e, ok := s.pickMemo[k]; ok {
		return e.pick, e.ok
	}
	p, err := s.classes[c].p.Pick(free, s.gpn, s.opts)
	if s.pickMemo == nil {
		s.pickMemo = make(map[pickKey]pickMemo)
	}
	s.pickMemo[k] = pickMemo{p, err == nil}
	return p, err == nil
}

// classOf is m's class in s.classes, added if new; -1 when the memo is
// off, the matrix has no valid tables, or the classes are full.
func (s *scheduler) classOf(m *topology.Matrix) int {
	if noPickMemo {
		return -1
	}
	if m == s.lastMatrix {
		return s.lastClass
	}
	c := -1
	for j := range s.classes {
		if s.classes[j].m == m {
			c = j
			break
		}
	}
	if c < 0 {
		for j := range s.classes {
			if s.classes[j].p.Describes(m) {
				c = j
				break
			}
		}
	}
	if c < 0 && len(s.classes) < maxPickClasses {
		if p, err := topology.PreparedFor(m); err == nil {
			s.classes = append(s.classes, pickClass{m, p})
			c = len(s.classes) - 1
		}
	}
	s.lastMatrix, s.lastClass = m, c
	return c
}

// fullQuality is setQuality(m, free), kept for the last matrix pointer and
// free set: the workers of one model share a matrix (reconcile), and idle
// ones a free set. Within a call a matrix does not change, so its pointer
// stands for its content; a content check would read as much as
// setQuality does.
func (s *scheduler) fullQuality(m *topology.Matrix, free topology.DeviceSet) (topology.Link, int) {
	if noPickMemo {
		return setQuality(m, free)
	}
	if m != s.fullMatrix || free != s.fullFree {
		s.fullBn, s.fullTotal = setQuality(m, free)
		s.fullMatrix, s.fullFree = m, free
	}
	return s.fullBn, s.fullTotal
}

// resetPicks forgets the previous call's picks and matrices.
func (s *scheduler) resetPicks() {
	clear(s.pickMemo)
	clear(s.classes)
	s.classes = s.classes[:0]
	s.lastMatrix, s.lastClass = nil, -1
	s.fullMatrix, s.fullFree = nil, 0
}

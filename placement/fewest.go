package placement

import "slices"

// The fewest sub-groups, across levels. takeGreedy is minimal at each
// level on its own: the fewest groups of the next tighter level, then
// inside each the fewest of the one after. It is not minimal across
// levels: taking the largest region whole can cost a network group that
// a smaller share of it would not (Kueue's "2 blocks with unbalanced
// subdomains"). The rule is the least span, regions first, then zones,
// then network groups, then NVLink domains; spans add over sub-groups and
// their lexicographic order is kept by addition, so a knapsack over the
// bucket's tree (for each group and each count it could give, the least
// span below it) finds it exactly. The greedy choice stays wherever it is
// already the least, so that the rules that break its ties (largest
// first, best fit, binpack's fullest first, rank order) still decide.

// breadth is how many groups a choice spans at each depth below its
// group's: [d-1] at depth d (regions, zones, network groups, NVLink
// domains). A worker with no value at a depth, or at a looser one below
// its group's, is a group of its own there, as take treats it. Then, at
// [4+d-1], how many groups at depth d it uses in part: between choices
// that span as many groups, the one with fewer partly used groups, the
// loosest first, keeps the greedy rule's shape (one partly used sub-group
// at each level) wherever a choice of that shape is among the fewest.
type breadth [8]int32

// counts is b's groups alone, as spanOf counts them.
func (b breadth) counts() breadth { return breadth{b[0], b[1], b[2], b[3]} }

// spanInf marks a count a group cannot give (with slices, one that is not
// a whole number of slices).
const spanInf = int32(1) << 28

var infSpan = breadth{spanInf, spanInf, spanInf, spanInf, spanInf, spanInf, spanInf, spanInf}

func (a breadth) plus(b breadth) breadth {
	if a[0] >= spanInf || b[0] >= spanInf {
		return infSpan
	}
	for i := range a {
		a[i] += b[i]
	}
	return a
}

func (a breadth) less(b breadth) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// fewest checks the workers take appended to s.chosen from start for
// group g: when another choice of need of its workers spans fewer groups
// (fewer regions, or as many and fewer zones, and so on), it replaces
// them with that choice.
func (s *scheduler) fewest(g group, need, start int) {
	if s.flat || need < 2 || g.chi == g.clo || int(g.depth) >= depthOf(0) {
		return // rank order alone
	}
	got := s.spanOf(g, s.chosen[start:])
	if s.spansLeast(g, need, got) {
		return
	}
	p := fewPlan{s: s}
	root := p.build(g, need)
	if !p.nodes[root].cost[need].counts().less(got) {
		return
	}
	s.chosen = s.chosen[:start]
	p.split(root, need)
}

// sliced reports whether groups at depth d hold whole slices: at the
// slices' level and looser, where a missing value is a value like any
// other.
func (s *scheduler) sliced(d int) bool { return s.slice > 0 && d <= s.sliceDepth }

// aloneFrom is the first depth below gd where a worker of key k is a
// group of its own (no value there, or at a looser depth below gd); past
// the tightest depth when none.
func (s *scheduler) aloneFrom(k *cellKey, gd int) int {
	for d := gd + 1; d <= depthOf(0); d++ {
		if k.field(d) == "" && !s.sliced(d) {
			return d
		}
	}
	return depthOf(0) + 1
}

// spanOf counts the groups below g that its workers ws span.
func (s *scheduler) spanOf(g group, ws []int32) breadth {
	var buf [64]int32
	cs := buf[:0]
	for _, w := range ws {
		cs = append(cs, s.cellOf[w])
	}
	slices.Sort(cs) // cells are sorted by key: a group's are neighbours
	var out breadth
	for d := int(g.depth) + 1; d <= depthOf(0); d++ {
		last := int32(-1)
		for _, c := range cs {
			k := &s.cells[c].key
			if s.aloneFrom(k, int(g.depth)) <= d {
				out[d-1]++
				continue
			}
			if last < 0 || !samePrefix(&s.cells[last].key, k, d) {
				out[d-1]++
			}
			last = c
		}
	}
	return out
}

// spansLeast reports whether got is, at every depth below g where it is
// more than one group, the fewest groups of that depth that hold need
// workers (the largest first), each depth on its own: then no choice
// spans less, and the knapsack is not needed.
func (s *scheduler) spansLeast(g group, need int, got breadth) bool {
	var buf [64]int32
	for d := int(g.depth) + 1; d <= depthOf(0); d++ {
		if got[d-1] <= 1 {
			continue
		}
		rooms, ones := buf[:0], 0
		for i := g.clo; i < g.chi; {
			k := &s.cells[i].key
			if s.aloneFrom(k, int(g.depth)) <= d {
				ones += int(s.cells[i].free)
				i++
				continue
			}
			j, room := i+1, s.cells[i].free
			for j < g.chi && samePrefix(&s.cells[j].key, k, d) {
				room += s.cells[j].free
				j++
			}
			if s.sliced(d) {
				room, _ = s.sliceRoom(i, j)
			}
			if room > 0 {
				rooms = append(rooms, room)
			}
			i = j
		}
		slices.Sort(rooms)
		n, left := 0, need
		for i := len(rooms) - 1; i >= 0 && left > 0; i-- {
			left -= int(rooms[i])
			n++
		}
		if left > 0 {
			n += min(left, ones)
		}
		if int(got[d-1]) > n {
			return false
		}
	}
	return true
}

// fewPlan is the knapsack over one bucket's tree.
type fewPlan struct {
	s     *scheduler
	nodes []fewNode
}

// fewNode is a group of the bucket's tree and the least spans below it.
type fewNode struct {
	g    group
	leaf bool    // its workers are taken in rank order: nothing below it counts
	kids []int32 // sub-groups, largest first (the order a split is read in)
	ones []int32 // workers alone at the next depth, each a group of its own
	// cost[k] is the least span below g of k of its workers; suffix[j][r]
	// the least span of r workers from kids[j:] and ones, counting each
	// sub-group used.
	cost   []breadth
	suffix [][]breadth
}

// build adds the node of g, for counts up to need, and those below it.
func (p *fewPlan) build(g group, need int) int32 {
	s := p.s
	n := min(need, int(g.room))
	id := int32(len(p.nodes))
	p.nodes = append(p.nodes, fewNode{g: g})
	if s.flat || g.chi == g.clo || int(g.depth) >= depthOf(0) {
		p.nodes[id].leaf, p.nodes[id].cost = true, make([]breadth, n+1)
		return id
	}
	kids, singles := s.children(g)
	d := int(g.depth) + 1
	var ones []int32
	if singles > 0 {
		for i := g.clo; i < g.chi; i++ {
			if c := &s.cells[i]; c.key.field(d) == "" {
				ones = append(ones, s.freeByCell[c.off:c.off+c.free]...)
			}
		}
	}
	kids = slices.DeleteFunc(kids, func(k group) bool { return k.room == 0 })
	// The order takeGreedy takes whole sub-groups in: the most room, then
	// the fewest left over, then the one whose last worker taken ranks
	// first by the policy's key, then the earlier.
	type ranked struct {
		g    group
		last int32
	}
	order := make([]ranked, len(kids))
	for i, k := range kids {
		order[i] = ranked{k, s.nth(k, int(k.room), false)}
	}
	slices.SortStableFunc(order, func(a, b ranked) int {
		switch {
		case a.g.room != b.g.room:
			return int(b.g.room - a.g.room)
		case a.g.size() != b.g.size():
			return a.g.size() - b.g.size()
		case s.beforeByKey(a.last, b.last):
			return -1
		case s.beforeByKey(b.last, a.last):
			return 1
		}
		return 0
	})
	ids := make([]int32, len(order))
	for i, k := range order {
		ids[i] = p.build(k.g, n)
	}
	// A worker alone at depth d is a group of its own there and at every
	// tighter depth.
	var alone breadth
	for i := d; i <= depthOf(0); i++ {
		alone[i-1] = 1
	}
	suffix := make([][]breadth, len(ids)+1)
	last := make([]breadth, n+1)
	for r := range last {
		last[r] = infSpan
		if r <= len(ones) {
			for i := range alone {
				last[r][i] = int32(r) * alone[i]
			}
		}
	}
	suffix[len(ids)] = last
	var gives []breadth
	held := len(ones) // workers kids[j:] and ones hold: past it, no split
	for j := len(ids) - 1; j >= 0; j-- {
		gives = gives[:0]
		for k := range p.nodes[ids[j]].cost {
			gives = append(gives, p.give(ids[j], k))
		}
		held += len(gives) - 1
		cur, next := make([]breadth, n+1), suffix[j+1]
		for r := range cur {
			best := infSpan
			if r > held {
				cur[r] = best
				continue
			}
			for k := 0; k <= r && k < len(gives); k++ {
				if gives[k][0] >= spanInf || next[r-k][0] >= spanInf {
					continue
				}
				if v := gives[k].plus(next[r-k]); v.less(best) {
					best = v
				}
			}
			cur[r] = best
		}
		suffix[j] = cur
	}
	nd := &p.nodes[id]
	nd.kids, nd.ones, nd.cost, nd.suffix = ids, ones, suffix[0], suffix
	return id
}

// give is the breadth of k workers of node id seen from its parent: the
// node itself, once (and as partly used when k is less than its room),
// and the least breadth below it; with slices, only whole slices.
func (p *fewPlan) give(id int32, k int) breadth {
	nd := &p.nodes[id]
	if k == 0 {
		return breadth{}
	}
	if p.s.sliced(int(nd.g.depth)) && k%p.s.slice != 0 {
		return infSpan
	}
	var own breadth
	own[nd.g.depth-1] = 1
	if k < int(nd.g.room) {
		own[4+nd.g.depth-1] = 1
	}
	return own.plus(nd.cost[k])
}

// take appends k workers of node id: the greedy choice when it spans the
// least, otherwise the split.
func (p *fewPlan) take(id int32, k int) {
	s := p.s
	if k == 0 {
		return
	}
	start := len(s.chosen)
	s.takeGreedy(p.nodes[id].g, k)
	if nd := &p.nodes[id]; nd.leaf || s.spanOf(nd.g, s.chosen[start:]) == nd.cost[k].counts() {
		return
	}
	s.chosen = s.chosen[:start]
	p.split(id, k)
}

// split appends r workers of node id, spread over its sub-groups as its
// least span allows: read largest first, each sub-group whole where the
// least allows it, else none, else as many as it allows (so that a
// remainder goes to the smallest that can take it, as best fit would);
// the workers alone last, in rank order.
func (p *fewPlan) split(id int32, r int) {
	nd := p.nodes[id]
	want := make([]int, len(nd.kids))
	for j, kid := range nd.kids {
		c := &p.nodes[kid]
		fits := func(k int) bool {
			return k >= 0 && k <= r && k < len(c.cost) && p.give(kid, k).plus(nd.suffix[j+1][r-k]) == nd.suffix[j][r]
		}
		var k int
		switch whole := int(c.g.room); {
		case fits(whole):
			k = whole
		case fits(0):
			k = 0
		default:
			for k = min(r, len(c.cost)-1); k > 0 && !fits(k); k-- {
			}
		}
		want[j] = k
		r -= k
	}
	for j, kid := range nd.kids {
		p.take(kid, want[j])
	}
	if r > 0 {
		p.s.chosen = append(p.s.chosen, p.s.topN(nd.ones, r, true)...)
	}
}

// samePrefix reports whether two cells' keys share the compatible
// properties and the location down to depth. The knapsack runs only where
// the greedy split was not the fewest, so it compares the strings rather
// than keep cells' split depths between cells that are not neighbours.
func samePrefix(a, b *cellKey, depth int) bool {
	if a.torch != b.torch || a.driver != b.driver || a.model != b.model {
		return false
	}
	for d := 1; d <= depth; d++ {
		if a.field(d) != b.field(d) {
			return false
		}
	}
	return true
}

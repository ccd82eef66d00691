package topology

import (
	"fmt"
	"math/bits"
	"slices"
	"sync"
)

// PickOptions tunes PickDevices.
type PickOptions struct {
	// MultiNode says the job spans machines, so GPUs with a NIC close by
	// (PIX or PXB) are worth more.
	MultiNode bool

	// budget replaces PickBudget when positive, so tests can run out of it
	// on small machines.
	budget int
}

// PickBudget is how many search nodes (sets the search extends, and
// complete sets it scores) one pick may visit before it stops and returns
// the best set found, with Pick.Optimal false. No recorded layout needs
// more than about 500, random 16-GPU matrices about 7,000; unstructured
// 48- to 64-GPU matrices would need minutes, and stop after at most about
// 75 ms instead. A count of nodes, not a clock, so the same inputs give the
// same pick on any machine.
const PickBudget = 200_000

// Pick is the chosen GPUs of one machine and the numbers that ranked them.
type Pick struct {
	GPUs       []int // sorted
	Bottleneck Link  // the slowest link inside the set; zero for fewer than 2 GPUs
	Total      int   // sum of pair scores inside the set
	NICLocal   int   // GPUs with a NIC at PIX or PXB (counted only for multi-node jobs)
	NUMANodes  int   // size of the union of the GPUs' NUMA affinity sets
	Cross      int   // sum of pair scores between the set and the free GPUs left over
	// Optimal says no other set ranks before GPUs: the search finished
	// within PickBudget. When false, GPUs is the best set found before the
	// budget ran out (and its numbers are that set's), not proven best.
	Optimal bool
}

// PickDevices returns the best set of k GPUs among free, found exactly
// unless the search needs more than PickBudget nodes (see Pick.Optimal). Best
// is, in order: the largest bottleneck (smallest pair score inside the set);
// the largest total of pair scores; for multi-node jobs the most GPUs with a
// NIC at PIX or PXB; the fewest NUMA nodes; the least cross score to the free
// GPUs left over (this keeps intact NVLink islands free for the next job); and
// the lexicographically smallest index list. Without link data it takes the
// lowest free indices.
//
// The search tables for the last few matrices are kept (see preparedFor),
// so repeated picks on one machine do not rebuild them; PrepareMatrix and
// Prepared.PickSet give the same without allocating.
func PickDevices(m *Matrix, free DeviceSet, k int, opts PickOptions) (Pick, error) {
	p, err := preparedFor(m)
	if err != nil {
		return Pick{}, err
	}
	return p.Pick(free, k, opts)
}

// preparedCache keeps the Prepared tables of the last few matrices picked
// on. An entry is used only while its matrix still holds the links, NIC
// locality and NUMA sets it was built from, so a matrix changed in place
// gets new tables. It holds at most len(entries) matrices alive.
var preparedCache struct {
	mu      sync.Mutex
	entries [8]struct {
		m *Matrix
		p *Prepared
	}
	next int
}

// PreparedFor is PrepareMatrix through PickDevices' cache: the tables of
// the last few matrices are kept, so a caller that picks on one matrix
// again and again (placement, once per call) builds them once.
func PreparedFor(m *Matrix) (*Prepared, error) { return preparedFor(m) }

func preparedFor(m *Matrix) (*Prepared, error) {
	c := &preparedCache
	c.mu.Lock()
	var cached *Prepared
	slot := -1
	for i, e := range c.entries {
		if e.m == m {
			cached, slot = e.p, i
			break
		}
	}
	c.mu.Unlock()
	// The check reads the whole matrix, so it runs outside the lock;
	// entries are never changed in place, only replaced.
	if cached != nil && cached.builtFrom(m) {
		return cached, nil
	}
	p, err := PrepareMatrix(m)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if slot < 0 || c.entries[slot].m != m {
		slot = c.next
		c.next = (c.next + 1) % len(c.entries)
	}
	c.entries[slot].m, c.entries[slot].p = m, p
	c.mu.Unlock()
	return p, nil
}

// Describes reports whether m says everything p was built from (its
// links, NIC locality and NUMA sets), so that p.Pick picks on m exactly as
// PickDevices(m, ...) does: PickDevices' own cache serves m from p on this
// check. It reads the whole matrix, without allocating.
func (p *Prepared) Describes(m *Matrix) bool { return p.builtFrom(m) }

// builtFrom reports whether m still says what p was built from.
func (p *Prepared) builtFrom(m *Matrix) bool {
	n := p.n
	if m.GPUs() != n || len(m.NUMAAffinity) != p.numaRows {
		return false
	}
	for i := 0; i < n; i++ {
		row := m.Links[i]
		if len(row) != n {
			return false
		}
		for j, l := range row {
			if l != p.links[i*n+j] {
				return false
			}
		}
	}
	if nicLocalOf(m) != p.nicLocal {
		return false
	}
	flat := p.numaFlat
	for _, set := range m.NUMAAffinity {
		if len(flat) < 1+len(set) || flat[0] != len(set) || !slices.Equal(set, flat[1:1+len(set)]) {
			return false
		}
		flat = flat[1+len(set):]
	}
	return true
}

// nicLocalOf is the set of GPUs with a NIC at PIX or PXB.
func nicLocalOf(m *Matrix) DeviceSet {
	var s DeviceSet
	for i := 0; i < m.GPUs() && i < len(m.NICLinks); i++ {
		for _, l := range m.NICLinks[i] {
			if l.Kind == LinkPIX || l.Kind == LinkPXB {
				s |= 1 << uint(i)
				break
			}
		}
	}
	return s
}

// Prepared is a matrix turned into the tables PickDevices searches with:
// pair scores, for every score level the GPUs linked at least that well,
// NUMA sets as bit masks, and the interchangeable GPUs. It is read-only
// once built, so one Prepared may serve concurrent picks.
type Prepared struct {
	n int
	// links, numaRows and numaFlat (each NUMA set as its length, then its
	// nodes) copy what the tables were built from, for the cache in
	// PickDevices to check against.
	links    []Link
	numaRows int
	numaFlat []int

	score  []int32 // n*n, row-major, 0 on the diagonal
	levels []int32 // distinct pair scores, highest first
	// atLeast[l*n+i] holds the GPUs j != i with score(i, j) >= levels[l].
	atLeast  []DeviceSet
	nicLocal DeviceSet // GPUs with a NIC at PIX or PXB
	// numa[i*numaWords:(i+1)*numaWords] is GPU i's NUMA set over densely
	// renumbered nodes: bit x of word w is node 64w+x (a set of nodes, held
	// in DeviceSet words so all masks share one allocation).
	numa      []DeviceSet
	numaWords int
	// numaSingle says every GPU has at most one NUMA node; the search then
	// bounds the NUMA count of unfinished sets (nodeGPUs[x] holds the GPUs
	// on node x).
	numaSingle bool
	nodeGPUs   []DeviceSet
	noNUMA     DeviceSet // GPUs whose NUMA affinity is unknown
	// twinsBefore[multi][i] holds the GPUs j < i that are interchangeable
	// with i: the same scores to every other GPU, the same NUMA set and, for
	// multi-node jobs, the same NIC locality. Swapping i for such a j keeps
	// every ranking number and gives a smaller index list, so the best set
	// never holds i without all of them.
	twinsBefore [2][]DeviceSet
	hasTwins    [2]bool
	// On machines of at most smallMachine GPUs where no two GPUs are
	// interchangeable (the DGX-1 cube mesh), the search would visit nearly
	// every subset, so subsetTotal[S] and subsetBottom[S] hold the total
	// and the lowest pair score of every subset S (bottom is maxInt32 below
	// two GPUs) and a pick scores each k-subset by lookups instead. With
	// interchangeable GPUs the search is cheaper: it skips all but one of
	// each group of equal sets.
	subsetTotal  []int32
	subsetBottom []int32
}

// PrepareMatrix builds the search tables for m. It fails on a matrix that
// is not square and symmetric or has more than MaxGPUs GPUs.
func PrepareMatrix(m *Matrix) (*Prepared, error) {
	p := &Prepared{}
	if err := p.build(m); err != nil {
		return nil, err
	}
	return p, nil
}

// build fills p from m.
func (p *Prepared) build(m *Matrix) error {
	n := m.GPUs()
	if err := CheckGPUCount(n); err != nil {
		return err
	}
	*p = Prepared{n: n}
	if n == 0 {
		return nil
	}
	p.numaRows = len(m.NUMAAffinity)
	flatLen := 0
	for _, set := range m.NUMAAffinity {
		flatLen += 1 + len(set)
	}
	p.numaFlat = make([]int, 0, flatLen)
	for _, set := range m.NUMAAffinity {
		p.numaFlat = append(p.numaFlat, len(set))
		p.numaFlat = append(p.numaFlat, set...)
	}
	var levelBuf [16]int32 // most machines have a handful of distinct links
	levels := levelBuf[:0]
	p.links = make([]Link, n*n)
	for i := 0; i < n; i++ {
		if len(m.Links[i]) != n {
			return fmt.Errorf("GPU%d has %d links, want %d", i, len(m.Links[i]), n)
		}
		copy(p.links[i*n:], m.Links[i])
		for j := i + 1; j < n; j++ {
			l := m.Links[i][j]
			if l != m.Links[j][i] {
				return fmt.Errorf("links are not symmetric: GPU%d-GPU%d is %s, GPU%d-GPU%d is %s", i, j, l, j, i, m.Links[j][i])
			}
			if sc := int32(l.Score()); !slices.Contains(levels, sc) {
				levels = append(levels, sc)
			}
		}
	}
	slices.Sort(levels)
	slices.Reverse(levels)

	ints := make([]int32, n*n+len(levels))
	p.score = ints[: n*n : n*n]
	p.levels = ints[n*n:]
	copy(p.levels, levels)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i != j {
				p.score[i*n+j] = int32(m.Links[i][j].Score())
			}
		}
	}

	// NUMA nodes are renumbered densely so each GPU's set is a few words.
	var nodeBuf [64]int
	nodes := nodeBuf[:0]
	p.numaSingle = true
	for i := 0; i < n && i < len(m.NUMAAffinity); i++ {
		nodes = append(nodes, m.NUMAAffinity[i]...)
		if len(m.NUMAAffinity[i]) > 1 {
			p.numaSingle = false
		}
	}
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	p.numaWords = max(1, (len(nodes)+63)/64)
	nodeSets := 0
	if p.numaSingle {
		nodeSets = len(nodes)
	}

	// One buffer holds every bit-mask table.
	nl := len(p.levels)
	sets := make([]DeviceSet, (nl+2)*n+nodeSets+n*p.numaWords)
	p.atLeast = sets[: nl*n : nl*n]
	p.twinsBefore[0] = sets[nl*n : (nl+1)*n : (nl+1)*n]
	p.twinsBefore[1] = sets[(nl+1)*n : (nl+2)*n : (nl+2)*n]
	p.nodeGPUs = sets[(nl+2)*n : (nl+2)*n+nodeSets : (nl+2)*n+nodeSets]
	p.numa = sets[(nl+2)*n+nodeSets:]

	for l, v := range p.levels {
		for i := 0; i < n; i++ {
			var s DeviceSet
			for j, sc := range p.score[i*n : i*n+n] {
				if j != i && sc >= v {
					s |= 1 << uint(j)
				}
			}
			p.atLeast[l*n+i] = s
		}
	}
	p.nicLocal = nicLocalOf(m)
	for i := 0; i < n && i < len(m.NUMAAffinity); i++ {
		for _, node := range m.NUMAAffinity[i] {
			x, _ := slices.BinarySearch(nodes, node)
			p.numa[i*p.numaWords+x/64] |= 1 << uint(x%64)
			if p.numaSingle {
				p.nodeGPUs[x] |= 1 << uint(i)
			}
		}
	}
	for i := 0; i < n; i++ {
		empty := true
		for w := 0; w < p.numaWords; w++ {
			empty = empty && p.numa[i*p.numaWords+w] == 0
		}
		if empty {
			p.noNUMA |= 1 << uint(i)
		}
	}
	// A GPU's NUMA nodes are private when no other GPU has any of them.
	var private DeviceSet
	for i := 0; i < n; i++ {
		shared := false
		for j := 0; j < n && !shared; j++ {
			for w := 0; j != i && w < p.numaWords; w++ {
				if p.numa[i*p.numaWords+w]&p.numa[j*p.numaWords+w] != 0 {
					shared = true
					break
				}
			}
		}
		if !shared {
			private |= 1 << uint(i)
		}
	}
	for i := 0; i < n; i++ {
		for j := 0; j < i; j++ {
			if p.interchangeable(i, j, private) {
				p.twinsBefore[0][i] |= 1 << uint(j)
				if p.nicLocal.Has(i) == p.nicLocal.Has(j) {
					p.twinsBefore[1][i] |= 1 << uint(j)
				}
			}
		}
	}
	for mode := range p.twinsBefore {
		for _, t := range p.twinsBefore[mode] {
			p.hasTwins[mode] = p.hasTwins[mode] || t != 0
		}
	}
	if n <= smallMachine && !(p.hasTwins[0] && p.hasTwins[1]) {
		p.buildSubsetTables()
	}
	return nil
}

// interchangeable reports whether swapping GPUs i and j in any set keeps
// its total, bottleneck, cross score and NUMA count: they have the same
// scores to every other GPU, and the same NUMA set or private NUMA sets of
// the same size (each then adds its own nodes to any set, whatever else it
// holds: one GPU per NUMA node, as on 8-socket-domain PCIe servers).
// smallMachine is the most GPUs for which Prepared keeps a table entry per
// subset (2^10 entries of two int32s: 8 KiB).
const smallMachine = 10

const maxInt32 = int32(^uint32(0) >> 1)

// buildSubsetTables fills subsetTotal and subsetBottom, each subset from
// the one without its highest GPU.
func (p *Prepared) buildSubsetTables() {
	n := p.n
	size := 1 << uint(n)
	tables := make([]int32, 2*size)
	total, bottom := tables[:size:size], tables[size:]
	bottom[0] = maxInt32
	for set := 1; set < size; set++ {
		h := bits.Len(uint(set)) - 1
		rest := set &^ (1 << uint(h))
		t, b := total[rest], bottom[rest]
		row := p.score[h*n : h*n+n]
		for r := rest; r != 0; r &= r - 1 {
			sc := row[bits.TrailingZeros(uint(r))]
			t += sc
			b = min(b, sc)
		}
		total[set], bottom[set] = t, b
	}
	p.subsetTotal, p.subsetBottom = total, bottom
}

// pickSmall scores every k-subset of free by table lookups: the bottleneck
// first, then the rest of the ranking through consider. The cross score is
// total(free) - total(set) - total(free minus set).
func (s *searcher) pickSmall(free DeviceSet, k int) {
	p := s.p
	var idx [smallMachine]int
	f := 0
	for c := free; c != 0; c &= c - 1 {
		idx[f] = bits.TrailingZeros64(uint64(c))
		f++
	}
	totalFree := p.subsetTotal[free]
	bestBottom := int32(-1)
	// Gosper's hack walks the k-subsets of f positions; each is mapped
	// onto the free GPUs.
	for comb := uint(1)<<uint(k) - 1; comb < 1<<uint(f); {
		var set DeviceSet
		for c := comb; c != 0; c &= c - 1 {
			set |= 1 << uint(idx[bits.TrailingZeros(c)])
		}
		if b := p.subsetBottom[set]; b >= bestBottom {
			if b > bestBottom {
				bestBottom = b
				s.res.found = false
			}
			t := p.subsetTotal[set]
			cross := totalFree - t - p.subsetTotal[free&^set]
			s.consider(set, t, cross+2*t)
		}
		low := comb & -comb
		r := comb + low
		comb = r | ((r^comb)>>2)>>uint(bits.TrailingZeros(low))
	}
}

func (p *Prepared) interchangeable(i, j int, private DeviceSet) bool {
	w := p.numaWords
	same := true
	ci, cj := 0, 0
	for x := 0; x < w; x++ {
		a, b := p.numa[i*w+x], p.numa[j*w+x]
		same = same && a == b
		ci += a.Len()
		cj += b.Len()
	}
	if !same && !(private.Has(i) && private.Has(j) && ci == cj) {
		return false
	}
	n := p.n
	for x := 0; x < n; x++ {
		if x != i && x != j && p.score[i*n+x] != p.score[j*n+x] {
			return false
		}
	}
	return true
}

// GPUs is the number of GPUs the tables cover.
func (p *Prepared) GPUs() int { return p.n }

// Pick is PickDevices on the prepared matrix.
func (p *Prepared) Pick(free DeviceSet, k int, opts PickOptions) (Pick, error) {
	var r pickResult
	set, err := p.pickSet(free, k, opts, &r)
	if err != nil {
		return Pick{}, err
	}
	out := Pick{GPUs: set.Indices(), Total: int(r.total), NICLocal: int(r.nicLocal), NUMANodes: int(r.numa), Cross: int(r.cross), Optimal: !r.cutShort}
	if k >= 2 && p.n > 0 {
		out.Bottleneck = p.bottleneckLink(set)
	}
	return out, nil
}

// PickSet is Pick returning only the chosen set. It allocates nothing, for
// callers that pick in a loop.
func (p *Prepared) PickSet(free DeviceSet, k int, opts PickOptions) (DeviceSet, error) {
	var r pickResult
	return p.pickSet(free, k, opts, &r)
}

// pickResult is the ranking numbers of the best set found so far.
type pickResult struct {
	set      DeviceSet
	found    bool
	total    int32
	nicLocal int32
	numa     int32
	cross    int32
	// cutShort says the search ran out of budget: set is the best found,
	// not proven best.
	cutShort bool
}

func (p *Prepared) pickSet(free DeviceSet, k int, opts PickOptions, r *pickResult) (DeviceSet, error) {
	n := p.n
	if n > 0 {
		free &= AllDevices(n)
	}
	if k < 0 {
		return 0, fmt.Errorf("cannot pick %d GPUs", k)
	}
	if have := free.Len(); k > have {
		return 0, fmt.Errorf("%d GPUs requested, %d free", k, have)
	}
	if k == 0 {
		return 0, nil
	}
	if n == 0 {
		var chosen DeviceSet
		rest := free
		for i := 0; i < k; i++ {
			low := rest & -rest
			chosen |= low
			rest &^= low
		}
		*r = pickResult{set: chosen, found: true}
		return chosen, nil
	}

	s := searcher{p: p, k: k, free: free, res: r}
	// Set apart: a constant in the literal has the compiler copy the whole
	// searcher (600 bytes) from a template, twice, where it would zero it.
	s.budget = PickBudget
	if opts.budget > 0 {
		s.budget = opts.budget
	}
	mode := 0
	if opts.MultiNode {
		s.nicLocal = p.nicLocal
		mode = 1
	}
	s.twins = p.twinsBefore[mode]
	if p.subsetTotal != nil && !p.hasTwins[mode] {
		s.pickSmall(free, k)
		return r.set, nil
	}
	// rowFree[i]: the sum of GPU i's scores to the other free GPUs. The
	// cross score of a set S is then sum(rowFree over S) - 2*total(S).
	for f := free; f != 0; f &= f - 1 {
		i := bits.TrailingZeros64(uint64(f))
		var sum int32
		row := p.score[i*n : i*n+n]
		for g := free; g != 0; g &= g - 1 {
			sc := row[bits.TrailingZeros64(uint64(g))]
			sum += sc
			s.maxScore = max(s.maxScore, sc)
		}
		s.rowFree[i] = sum
	}

	if k == 1 {
		s.adj = nil
		s.search(0, free, 0, 0)
		return r.set, nil
	}
	// The bottleneck is the highest score level whose graph (GPUs joined
	// when their link scores at least that much) has a k-clique among the
	// free GPUs; the rest of the ranking is searched among those cliques.
	for l := range p.levels {
		s.adj = p.atLeast[l*n : l*n+n]
		cand := s.core(free)
		if cand.Len() < k || s.colors(cand) < k {
			continue
		}
		s.search(0, cand, 0, 0)
		if s.stopped {
			s.bestEffort(l)
			r.cutShort = true
			return r.set, nil
		}
		if r.found {
			return r.set, nil
		}
	}
	// Unreachable: the lowest level joins every pair, so any k free GPUs
	// form a clique there.
	return 0, fmt.Errorf("no set of %d GPUs found among %d free", k, free.Len())
}

// searcher is one pick's depth-first search over sets in increasing
// lexicographic order, so that among sets that tie on every ranking number
// the first one found is kept.
type searcher struct {
	p        *Prepared
	k        int
	free     DeviceSet
	nicLocal DeviceSet   // empty unless multi-node
	twins    []DeviceSet // twinsBefore for this job kind
	adj      []DeviceSet // adjacency at the current bottleneck level; nil for k = 1
	rowFree  [MaxGPUs]int32
	// gain[v] is the sum of v's scores to the GPUs chosen so far, kept for
	// the candidates of the current search node.
	gain     [MaxGPUs]int32
	maxScore int32 // the highest score between two free GPUs
	res      *pickResult
	// nodes counts the search nodes visited; at budget the search stops
	// (stopped) and unwinds.
	nodes   int
	budget  int
	stopped bool
}

// core drops GPUs linked at the current level to fewer than k-1 other
// candidates: they cannot be in a k-clique.
func (s *searcher) core(cand DeviceSet) DeviceSet {
	need := s.k - 1
	for {
		next := cand
		for c := cand; c != 0; c &= c - 1 {
			i := bits.TrailingZeros64(uint64(c))
			if bits.OnesCount64(uint64(s.adj[i]&cand)) < need {
				next &^= 1 << uint(i)
			}
		}
		if next == cand {
			return cand
		}
		cand = next
	}
}

// colors greedily colours the candidates' graph at the current level so
// that linked GPUs differ in colour. A clique needs a colour per member, so
// fewer colours than k means no k-clique: the level fails without a search.
func (s *searcher) colors(cand DeviceSet) int {
	var classes [MaxGPUs]DeviceSet
	used := 0
	for c := cand; c != 0; c &= c - 1 {
		v := bits.TrailingZeros64(uint64(c))
		x := 0
		for x < used && classes[x]&s.adj[v] != 0 {
			x++
		}
		if x == used {
			used++
		}
		classes[x] |= 1 << uint(v)
	}
	return used
}

// search extends chosen (depth members, total pair score total, sum of
// rowFree rowSum) with members of cand, all higher than chosen's members
// and linked to all of them at the current level.
func (s *searcher) search(chosen, cand DeviceSet, total, rowSum int32) {
	if s.nodes >= s.budget {
		s.stopped = true
		return
	}
	s.nodes++
	p := s.p
	n := p.n
	left := s.k - bits.OnesCount64(uint64(chosen))
	if left >= 2 && s.res.found && !fewSets(cand.Len(), left) && s.cannotBeat(chosen, cand, left, total, rowSum) {
		return
	}
	for cand != 0 {
		if bits.OnesCount64(uint64(cand)) < left {
			return
		}
		i := bits.TrailingZeros64(uint64(cand))
		bit := DeviceSet(1) << uint(i)
		cand &^= bit
		if s.twins[i]&s.free&^chosen != 0 {
			// A free GPU interchangeable with i and lower was skipped:
			// every set through i here has an equal, earlier twin.
			continue
		}
		gain := s.gain[i]
		if left == 1 {
			// Scoring a complete set is a node too; a node scores at most
			// MaxGPUs of them, so the check at the next node suffices.
			s.nodes++
			s.consider(chosen|bit, total+gain, rowSum+s.rowFree[i])
			continue
		}
		next := cand
		if s.adj != nil {
			next &= s.adj[i]
		}
		if next.Len() < left-1 {
			continue
		}
		row := p.score[i*n : i*n+n]
		for c := next; c != 0; c &= c - 1 {
			v := bits.TrailingZeros64(uint64(c))
			s.gain[v] += row[v]
		}
		s.search(chosen|bit, next, total+gain, rowSum+s.rowFree[i])
		for c := next; c != 0; c &= c - 1 {
			v := bits.TrailingZeros64(uint64(c))
			s.gain[v] -= row[v]
		}
		if s.stopped {
			return
		}
	}
}

// bestEffort finishes a pick whose search ran out of budget at score level
// from. No level above from holds k free GPUs (those searches finished), so
// the best set has its bottleneck at from or below. From each candidate GPU
// of a level it grows a set greedily, twice (taking the candidate that adds the most
// score, or the one that keeps the most candidates), at from and, while
// none is found there, at each lower level; the lowest level joins every
// pair, so some set is always found. Each set is ranked like the search's,
// its bottleneck first, against the best the search found.
func (s *searcher) bestEffort(from int) {
	p := s.p
	n := p.n
	bestBottom := int32(-1)
	if s.res.found {
		bestBottom = p.levels[from]
	}
	for l := from; l < len(p.levels); l++ {
		s.adj = p.atLeast[l*n : l*n+n]
		cand := s.core(s.free)
		if cand.Len() < s.k || s.colors(cand) < s.k {
			continue
		}
		for c := cand; c != 0; c &= c - 1 {
			v := bits.TrailingZeros64(uint64(c))
			for _, byGain := range [...]bool{true, false} {
				set, ok := s.grow(v, cand, byGain)
				if !ok {
					continue
				}
				bottom, total, rowSum := s.scoreOf(set)
				if bottom < bestBottom {
					continue
				}
				if bottom > bestBottom {
					bestBottom = bottom
					s.res.found = false
				}
				s.consider(set, total, rowSum)
			}
		}
		if s.res.found {
			return
		}
	}
}

// grow builds a k-clique of the current level's graph from GPU v among
// cand, adding one GPU at a time: the one that adds the most score to the
// set (byGain) or the one linked to the most remaining candidates, the
// other as the tie-break, then the lowest index. Only GPUs that leave
// enough candidates to finish are taken. It fails when none is left.
func (s *searcher) grow(v int, cand DeviceSet, byGain bool) (DeviceSet, bool) {
	p := s.p
	n := p.n
	var gain [MaxGPUs]int32
	set := DeviceSet(1) << uint(v)
	next := cand & s.adj[v]
	for c := next; c != 0; c &= c - 1 {
		u := bits.TrailingZeros64(uint64(c))
		gain[u] = p.score[v*n+u]
	}
	for left := s.k - 1; left > 0; left-- {
		best, bestGain, bestLinks := -1, int32(0), 0
		for c := next; c != 0; c &= c - 1 {
			u := bits.TrailingZeros64(uint64(c))
			links := (s.adj[u] & next).Len()
			if links < left-1 {
				continue
			}
			g := gain[u]
			better := best < 0
			if !better && byGain {
				better = g > bestGain || g == bestGain && links > bestLinks
			} else if !better {
				better = links > bestLinks || links == bestLinks && g > bestGain
			}
			if better {
				best, bestGain, bestLinks = u, g, links
			}
		}
		if best < 0 {
			return 0, false
		}
		set |= 1 << uint(best)
		next &= s.adj[best]
		for c := next; c != 0; c &= c - 1 {
			u := bits.TrailingZeros64(uint64(c))
			gain[u] += p.score[best*n+u]
		}
	}
	return set, true
}

// scoreOf is a set's lowest pair score, its total and its sum of rowFree.
func (s *searcher) scoreOf(set DeviceSet) (bottom, total, rowSum int32) {
	p := s.p
	n := p.n
	bottom = maxInt32
	for a := set; a != 0; a &= a - 1 {
		i := bits.TrailingZeros64(uint64(a))
		rowSum += s.rowFree[i]
		for b := a & (a - 1); b != 0; b &= b - 1 {
			sc := p.score[i*n+bits.TrailingZeros64(uint64(b))]
			total += sc
			bottom = min(bottom, sc)
		}
	}
	return bottom, total, rowSum
}

// fewSets reports whether there are at most 24 ways to choose k of n:
// scoring that few sets costs less than bounding them.
func fewSets(n, k int) bool { return fewSetsTable[n][k] }

// fewSetsTable answers fewSets for every n and k up to MaxGPUs; the search
// asks at every node, so it is not worked out each time.
var fewSetsTable = func() (t [MaxGPUs + 1][MaxGPUs + 1]bool) {
	for n := 0; n <= MaxGPUs; n++ {
		for k := 0; k <= MaxGPUs; k++ {
			c := 1
			t[n][k] = true
			if k > n {
				continue // no way at all
			}
			for i := 1; i <= k; i++ {
				c = c * (n - k + i) / i
				if c > 24 {
					t[n][k] = false
					break
				}
			}
		}
	}
	return t
}()

// cannotBeat reports whether no set completing chosen from cand can rank
// before the best found so far. Every such set comes later in
// lexicographic order, so it must beat the best outright; an optimistic
// bound on each ranking number in turn tells when none can.
func (s *searcher) cannotBeat(chosen, cand DeviceSet, left int, total, rowSum int32) bool {
	r := s.res
	d := int32(chosen.Len())
	l := int32(left)
	most := total + (l*d+l*(l-1)/2)*s.maxScore
	if most < r.total {
		return true
	}
	if most = s.mostTotal(cand, left, total); most != r.total {
		return most < r.total
	}
	if most := int32((chosen & s.nicLocal).Len() + min(left, (cand&s.nicLocal).Len())); most != r.nicLocal {
		return most < r.nicLocal
	}
	if least := s.leastNUMA(chosen, cand, left); least != r.numa {
		return least > r.numa
	}
	// With the total fixed at the best's, the cross score is the rowFree
	// sum less twice the total; the smallest rowFree values bound it.
	if least := rowSum + s.smallestRowFree(cand, left) - 2*r.total; least != r.cross {
		return least > r.cross
	}
	// A tie on every number goes to the smaller index list: prune only
	// when every set here comes after the best. Their members below cand's
	// lowest GPU are exactly chosen, so the first difference there decides.
	below := cand&-cand - 1
	diff := (chosen ^ r.set) & below
	return diff != 0 && r.set&(diff&-diff) != 0
}

// mostTotal is an upper bound on the total of chosen plus left more GPUs
// from cand. Each new GPU v brings its scores to chosen (gain) and half its
// scores to the other new GPUs, at most half of its left-1 best scores to
// the other candidates; the bound adds the left best such values.
func (s *searcher) mostTotal(cand DeviceSet, left int, total int32) int32 {
	var w [MaxGPUs]int32
	cnt := 0
	for c := cand; c != 0; c &= c - 1 {
		v := bits.TrailingZeros64(uint64(c))
		w[cnt] = 2*s.gain[v] + s.bestScores(v, cand&^(1<<uint(v)), left-1)
		cnt++
	}
	var sum int32
	if 2*left > cnt {
		// Taking most of them: sum all and drop the cnt-left smallest,
		// the fewer selections.
		for _, x := range w[:cnt] {
			sum += x
		}
		for drop := cnt - left; drop > 0; drop-- {
			small := 0
			for x := 1; x < cnt; x++ {
				if w[x] < w[small] {
					small = x
				}
			}
			sum -= w[small]
			w[small] = w[cnt-1]
			cnt--
		}
		return total + sum/2
	}
	for ; left > 0 && cnt > 0; left-- {
		big := 0
		for x := 1; x < cnt; x++ {
			if w[x] > w[big] {
				big = x
			}
		}
		sum += w[big]
		w[big] = w[cnt-1]
		cnt--
	}
	return total + sum/2
}

// bestScores bounds the sum of the r highest scores from GPU v to GPUs in
// among, counted level by level from the atLeast masks. Past boundLevels
// levels every score left is at most the current level's, which bounds the
// rest: the bound gets looser, but its cost stays the same however many
// kinds of link a machine reports (hundreds of NV<n> counts, on a hostile
// one). Real machines have fewer than ten, so their bound is exact.
func (s *searcher) bestScores(v int, among DeviceSet, r int) int32 {
	p := s.p
	n := p.n
	var sum int32
	had := 0
	for l := 0; l < len(p.levels) && r > 0; l++ {
		if l == boundLevels {
			return sum + int32(r)*p.levels[l]
		}
		c := (p.atLeast[l*n+v] & among).Len()
		take := min(c-had, r)
		sum += int32(take) * p.levels[l]
		r -= take
		had = c
	}
	return sum
}

// boundLevels is how many score levels bestScores counts exactly.
const boundLevels = 16

// leastNUMA is a lower bound on the NUMA count of chosen plus left more
// GPUs from cand. When every GPU has one NUMA node at most, GPUs on nodes
// already covered add none, and the rest need at least as many nodes as it
// takes to hold them, largest first.
func (s *searcher) leastNUMA(chosen, cand DeviceSet, left int) int32 {
	p := s.p
	have := s.numaCount(chosen)
	if !p.numaSingle {
		return have
	}
	covered := p.noNUMA
	for x, g := range p.nodeGPUs {
		if g&chosen != 0 {
			covered |= p.nodeGPUs[x]
		}
	}
	need := left - (cand & covered).Len()
	if need <= 0 {
		return have
	}
	var sizes [MaxGPUs]int
	nodes := 0
	for _, g := range p.nodeGPUs {
		if g&chosen == 0 {
			if c := (g & cand).Len(); c > 0 {
				sizes[nodes] = c
				nodes++
			}
		}
	}
	extra := int32(0)
	for need > 0 && nodes > 0 {
		big := 0
		for x := 1; x < nodes; x++ {
			if sizes[x] > sizes[big] {
				big = x
			}
		}
		need -= sizes[big]
		sizes[big] = sizes[nodes-1]
		nodes--
		extra++
	}
	return have + extra
}

// smallestRowFree is the sum of the left smallest rowFree values in cand.
func (s *searcher) smallestRowFree(cand DeviceSet, left int) int32 {
	var sum int32
	for ; left > 0 && cand != 0; left-- {
		low := -1
		for c := cand; c != 0; c &= c - 1 {
			i := bits.TrailingZeros64(uint64(c))
			if low < 0 || s.rowFree[i] < s.rowFree[low] {
				low = i
			}
		}
		sum += s.rowFree[low]
		cand &^= 1 << uint(low)
	}
	return sum
}

// consider ranks a complete set against the best so far. The bottleneck is
// the same for every set of one search; ties on every number keep the
// lexicographically smaller set.
func (s *searcher) consider(set DeviceSet, total, rowSum int32) {
	r := s.res
	if r.found {
		if total != r.total {
			if total < r.total {
				return
			}
		} else {
			nic := int32(bits.OnesCount64(uint64(set & s.nicLocal)))
			if nic != r.nicLocal {
				if nic < r.nicLocal {
					return
				}
			} else {
				numa := s.numaCount(set)
				if numa != r.numa {
					if numa > r.numa {
						return
					}
				} else if cross := rowSum - 2*total; cross != r.cross {
					if cross > r.cross {
						return
					}
				} else if !lexLess(set, r.set) {
					return
				}
			}
		}
	}
	*r = pickResult{
		set:      set,
		found:    true,
		total:    total,
		nicLocal: int32(bits.OnesCount64(uint64(set & s.nicLocal))),
		numa:     s.numaCount(set),
		cross:    rowSum - 2*total,
	}
}

// numaCount is the size of the union of the set's NUMA sets.
func (s *searcher) numaCount(set DeviceSet) int32 {
	p := s.p
	w := p.numaWords
	var count int
	for x := 0; x < w; x++ {
		var u DeviceSet
		for c := set; c != 0; c &= c - 1 {
			u |= p.numa[bits.TrailingZeros64(uint64(c))*w+x]
		}
		count += u.Len()
	}
	return int32(count)
}

// bottleneckLink is the link of the set's lowest-scoring pair, the first
// such pair in index order.
func (p *Prepared) bottleneckLink(set DeviceSet) Link {
	n := p.n
	best := int32(-1)
	var link Link
	for a := set; a != 0; a &= a - 1 {
		i := bits.TrailingZeros64(uint64(a))
		for b := a & (a - 1); b != 0; b &= b - 1 {
			j := bits.TrailingZeros64(uint64(b))
			if sc := p.score[i*n+j]; best < 0 || sc < best {
				best, link = sc, linkOfScore(sc)
			}
		}
	}
	return link
}

// linkOfScore inverts Link.Score: every link kind has its own score.
func linkOfScore(sc int32) Link {
	switch {
	case sc >= 10:
		return NV(int(sc / 10))
	case sc >= 1 && sc <= 5:
		return [...]Link{SYS, NODE, PHB, PXB, PIX}[sc-1]
	}
	return Link{}
}

// lexLess compares two sets of equal size by their sorted index lists: the
// first differing index decides, and the set holding the smaller one wins.
func lexLess(a, b DeviceSet) bool {
	d := a ^ b
	return d != 0 && a&(d&-d) != 0
}

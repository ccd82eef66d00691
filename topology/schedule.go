package topology

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Schedule chooses the machines and GPUs of one job (ADR-0021 §2–§5):
//
//   - Eligibility: the policy's labels and regions, enough GPUs, enough free
//     GPUs now; one torch version inside a group.
//   - Levels: prefer tries one network group, then one zone, one region, and
//     any, and takes the tightest that holds the job now; a required level
//     (network_group, zone, region) is the only one tried, and workers with
//     no value there never qualify; any ignores location.
//   - Buckets: at a level, the candidate groups are buckets of (torch
//     version, location). Of those that hold the job, best fit takes the one
//     left with the fewest free workers (first_fill: the first to fill in
//     rank order).
//   - Inside a bucket, as few groups of each tighter level as possible
//     (largest first, the last by best fit), and inside those the workers
//     in rank order, with the quality of each machine's GPU pick breaking
//     ties between otherwise equal workers.
//
// Schedule only reads workers and is deterministic: the same inputs give
// the same Decision, byte for byte, whatever the order of workers.
func Schedule(job Job, workers []Worker, policy Policy) Decision {
	var s scheduler
	return s.schedule(job, workers, policy)
}

// Request is one job and its policy, for ScheduleAll.
type Request struct {
	Job    Job
	Policy Policy
}

// ScheduleAll places several jobs in one pass, in the order given: each
// placed job takes its GPUs (and one running task, and the chosen GPUs'
// share of free memory) from its workers before the next job is placed, so
// no GPU is promised twice. workers is not modified.
func ScheduleAll(requests []Request, workers []Worker) []Decision {
	ws := slices.Clone(workers)
	var s scheduler
	out := make([]Decision, 0, len(requests))
	for _, r := range requests {
		d := s.schedule(r.Job, ws, r.Policy)
		if d.Status == StatusPlaced {
			for i, p := range d.Workers {
				w := &ws[s.chosen[i]]
				taken := DeviceSetOf(p.GPUs...)
				if before := int64(w.freeSet().Len()); before > 0 {
					w.FreeMemoryMiB -= w.FreeMemoryMiB * int64(taken.Len()) / before
				}
				w.Free &^= taken
				w.RunningTasks++
			}
		}
		out = append(out, d)
	}
	return out
}

// cellKey is the full location and torch version: the finest bucket.
type cellKey struct{ torch, region, zone, ng string }

// field is the key's value at depth 0 (torch), 1 (region), 2 (zone) or 3
// (network group).
func (k *cellKey) field(depth int) string {
	switch depth {
	case 0:
		return k.torch
	case 1:
		return k.region
	case 2:
		return k.zone
	}
	return k.ng
}

func (k *cellKey) less(o *cellKey) int {
	for d := 0; d < 4; d++ {
		if c := strings.Compare(k.field(d), o.field(d)); c != 0 {
			return c
		}
	}
	return 0
}

// depthOf is the key depth whose value a level's bucket shares last.
func depthOf(l Level) int { return 3 - int(l) }

// cell is the compatible workers of one cellKey.
type cell struct {
	key    cellKey
	compat int32 // statically eligible, free or not
	free   int32 // free now
	off    int32 // first free worker in scheduler.freeByCell
}

// group is a set of free workers that placement takes from as one: a bucket,
// a sub-group of it, or a single worker whose location at the tighter level
// is unknown.
type group struct {
	clo, chi int32 // cells [clo, chi); chi == clo for a single worker
	depth    int8  // fields 0..depth are shared by its cells
	lo, hi   int32 // its free workers: freeByCell[lo:hi]
}

func (g *group) size() int { return int(g.hi - g.lo) }

// scheduler holds one call's working state; ScheduleAll reuses it.
type scheduler struct {
	ws    []Worker
	pol   Policy
	nodes int
	gpn   int
	opts  PickOptions
	flat  bool // policy any: location ignored inside the bucket
	useQ  bool // GPU pick quality ranks workers

	cellOf     []int32 // per worker: its cell, or -1
	prim       []int64 // per worker: primary rank key, smaller first
	qual       []int64 // per worker: GPU pick quality key, smaller first
	qualDone   []bool
	picks      map[int32]Pick
	cells      []cell
	freeByCell []int32
	excl       [5]int
	chosen     []int32
	heap       []int32
}

func (s *scheduler) schedule(job Job, workers []Worker, policy Policy) Decision {
	d := Decision{Job: job.Name, Level: LevelAny, Workers: []Placement{},
		Explanation: Explanation{Workers: len(workers), Needed: job.Nodes, Excluded: []Exclusion{}, Levels: []LevelExplanation{}}}
	fail := func(err error) Decision {
		d.Status, d.Unschedulable = StatusFailed, true
		d.Summary = "failed: " + err.Error()
		return d
	}
	if err := policy.Validate(); err != nil {
		return fail(err)
	}
	if job.Nodes < 1 {
		return fail(fmt.Errorf("job %q asks for %d nodes; it needs at least 1", job.Name, job.Nodes))
	}
	if job.GPUsPerNode < 1 || job.GPUsPerNode > MaxGPUs {
		return fail(fmt.Errorf("job %q asks for %d GPUs per node; it needs 1 to %d", job.Name, job.GPUsPerNode, MaxGPUs))
	}
	s.reset(job, workers, policy.withDefaults())
	s.classify()
	for r, n := range s.excl {
		if n > 0 {
			d.Explanation.Excluded = append(d.Explanation.Excluded, Exclusion{Reason: staticReasons[r], Workers: n})
		}
	}

	levels := s.pol.levels()
	var last []group
	var lastExp *LevelExplanation
	for _, level := range levels {
		buckets, exp := s.buckets(level)
		d.Explanation.Levels = append(d.Explanation.Levels, exp)
		lastExp = &d.Explanation.Levels[len(d.Explanation.Levels)-1]
		last = buckets
		b := s.chooseBucket(buckets)
		if b < 0 {
			continue
		}
		s.chosen = s.chosen[:0]
		s.take(buckets[b], s.nodes)
		spans := s.spans(level)
		be := &lastExp.Buckets[b]
		be.Choice, be.Groups = "placed", spans
		if n := s.torchPassedOver(lastExp, b, level); n > 0 {
			lastExp.Excluded = append(lastExp.Excluded, Exclusion{Reason: ReasonTorchVersion, Workers: n})
		}
		d.Status, d.Level = StatusPlaced, level
		d.Location, d.TorchVersion = be.Location, be.TorchVersion
		d.Workers = s.placements()
		d.Summary = placedSummary(&d, spans)
		return d
	}

	// Nothing holds the job now: say how close the loosest level came, and
	// whether any bucket could hold it were every compatible worker idle.
	level := levels[len(levels)-1]
	d.Level = level
	d.Unschedulable = true
	for _, b := range last {
		if s.compatOf(b) >= s.nodes {
			d.Unschedulable = false
			break
		}
	}
	d.Status = StatusWaiting
	if d.Unschedulable && s.pol.OnUnschedulable == UnschedulableFail {
		d.Status = StatusFailed
	}
	best := -1
	for i := range lastExp.Buckets {
		if best < 0 || closer(&lastExp.Buckets[i], &lastExp.Buckets[best], d.Unschedulable) {
			best = i
		}
	}
	var bestExp *BucketExplanation
	if best >= 0 {
		bestExp = &lastExp.Buckets[best]
		bestExp.Choice = "best"
		d.Location, d.TorchVersion = bestExp.Location, bestExp.TorchVersion
		if n := s.torchPassedOver(lastExp, best, level); n > 0 {
			lastExp.Excluded = append(lastExp.Excluded, Exclusion{Reason: ReasonTorchVersion, Workers: n})
		}
	}
	d.Summary = unplacedSummary(&d, level, s.nodes, bestExp, torchVersions(lastExp.Buckets))
	return d
}

var staticReasons = [...]Reason{ReasonLabel, ReasonRegion, ReasonTooFewGPUs, ReasonBusy, ReasonTooFewFreeGPUs}

// closer reports whether bucket a is closer to holding the job than b: more
// free workers (more eligible ones when none could ever hold it), then more
// eligible, then the earlier bucket.
func closer(a, b *BucketExplanation, byEligible bool) bool {
	if byEligible {
		return a.Eligible > b.Eligible
	}
	if a.Free != b.Free {
		return a.Free > b.Free
	}
	return a.Eligible > b.Eligible
}

// torchVersions counts the distinct torch versions among a level's buckets.
func torchVersions(bs []BucketExplanation) int {
	n := 0
	for i := range bs {
		if i == 0 || bs[i].TorchVersion != bs[i-1].TorchVersion {
			n++
		}
	}
	return n
}

// torchPassedOver counts the free workers at bucket b's location that were
// left out because their torch version differs.
func (s *scheduler) torchPassedOver(exp *LevelExplanation, b int, level Level) int {
	if level == LevelAny {
		n := 0
		for i := range exp.Buckets {
			if i != b {
				n += exp.Buckets[i].Free
			}
		}
		return n
	}
	n := 0
	for i := range exp.Buckets {
		if i != b && exp.Buckets[i].Location == exp.Buckets[b].Location {
			n += exp.Buckets[i].Free
		}
	}
	return n
}

func (s *scheduler) reset(job Job, workers []Worker, pol Policy) {
	n := len(workers)
	s.ws, s.pol, s.nodes, s.gpn = workers, pol, job.Nodes, job.GPUsPerNode
	s.opts = PickOptions{MultiNode: job.MultiNode()}
	s.flat = pol.GroupLocality == LocalityAny
	s.useQ = pol.Rank != RankFirstFit && job.GPUsPerNode >= 2
	s.cellOf = grow(s.cellOf, n)
	s.prim = grow(s.prim, n)
	s.qual = grow(s.qual, n)
	s.qualDone = grow(s.qualDone, n)
	clear(s.qualDone)
	s.picks = nil
	s.cells = s.cells[:0]
	s.excl = [5]int{}
}

func grow[T any](xs []T, n int) []T {
	if cap(xs) < n {
		return make([]T, n)
	}
	return xs[:n]
}

// classify is the one pass over every worker: the static checks, the primary
// rank key, and the worker's cell. Then it sorts the cells by key and lays
// the free workers out cell by cell, so that every bucket at every level is
// a contiguous run of cells and of free workers.
func (s *scheduler) classify() {
	var index map[cellKey]int32
	last := int32(-1)
	freeTotal := 0
	for i := range s.ws {
		w := &s.ws[i]
		s.cellOf[i] = -1
		r := s.staticReason(w)
		if r >= 0 && r < 3 {
			s.excl[r]++
			continue
		}
		free := w.freeSet().Len()
		k := cellKey{w.TorchVersion, w.Location.Region, w.Location.Zone, w.Location.NetworkGroup}
		c := last
		if c < 0 || s.cells[c].key != k {
			c = -1
			if index == nil {
				for j := range s.cells {
					if s.cells[j].key == k {
						c = int32(j)
						break
					}
				}
			} else if j, ok := index[k]; ok {
				c = j
			}
			if c < 0 {
				c = int32(len(s.cells))
				s.cells = append(s.cells, cell{key: k})
				if index != nil {
					index[k] = c
				} else if len(s.cells) > 16 {
					index = make(map[cellKey]int32, 64)
					for j := range s.cells {
						index[s.cells[j].key] = int32(j)
					}
				}
			}
			last = c
		}
		s.cells[c].compat++
		switch {
		case free == 0:
			s.excl[3]++
			continue
		case free < s.gpn:
			s.excl[4]++
			continue
		}
		s.cells[c].free++
		s.cellOf[i] = c
		freeTotal++
		switch s.pol.Rank {
		case RankSpread:
			s.prim[i] = int64(min(max(w.RunningTasks, 0), math.MaxInt32))<<8 | int64(MaxGPUs-free)
		case RankMostFreeMemory:
			s.prim[i] = -max(w.FreeMemoryMiB, 0)
		default:
			s.prim[i] = 0
		}
	}

	// Sort cells by key, then place free workers cell by cell (a counting
	// sort that keeps input order inside a cell; rank order is applied later
	// and only where it matters).
	order := make([]int32, len(s.cells))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return s.cells[a].key.less(&s.cells[b].key) })
	inv := make([]int32, len(s.cells)) // old cell id → sorted position
	sorted := make([]cell, len(s.cells))
	off := int32(0)
	for to, from := range order {
		inv[from] = int32(to)
		sorted[to] = s.cells[from]
		sorted[to].off = off
		off += sorted[to].free
	}
	s.cells = sorted
	s.freeByCell = grow(s.freeByCell, freeTotal)
	next := order // reuse: per sorted cell, its next free slot
	for i := range s.cells {
		next[i] = s.cells[i].off
	}
	for i, c := range s.cellOf {
		if c < 0 {
			continue
		}
		sc := inv[c]
		s.cellOf[i] = sc
		s.freeByCell[next[sc]] = int32(i)
		next[sc]++
	}
}

// staticReason is the index in staticReasons of the first check the worker
// fails that does not depend on what is free now (label, region, GPU
// count); -1 when it passes them.
func (s *scheduler) staticReason(w *Worker) int {
	for k, v := range s.pol.Labels {
		if got, ok := w.Labels[k]; !ok || got != v {
			return 0
		}
	}
	if len(s.pol.Regions) > 0 {
		ok := false
		for _, r := range s.pol.Regions {
			if r != "" && (r == w.Location.Region || r == w.Location.Zone) {
				ok = true
				break
			}
		}
		if !ok {
			return 1
		}
	}
	if w.gpuCount() < s.gpn {
		return 2
	}
	return -1
}

// buckets lists a level's buckets: runs of cells sharing the torch version
// and the location up to the level, leaving out cells with no value there.
func (s *scheduler) buckets(level Level) ([]group, LevelExplanation) {
	depth := depthOf(level)
	exp := LevelExplanation{Level: level, Excluded: []Exclusion{}, Buckets: []BucketExplanation{}}
	var out []group
	noValue := 0
	for i := 0; i < len(s.cells); {
		c := &s.cells[i]
		if depth > 0 && c.key.field(depth) == "" {
			noValue += int(c.compat)
			i++
			continue
		}
		j := i + 1
		compat, free := c.compat, c.free
		for j < len(s.cells) && samePrefix(&s.cells[j].key, &c.key, depth) {
			compat += s.cells[j].compat
			free += s.cells[j].free
			j++
		}
		out = append(out, group{clo: int32(i), chi: int32(j), depth: int8(depth), lo: c.off, hi: c.off + free})
		exp.Buckets = append(exp.Buckets, BucketExplanation{
			TorchVersion: c.key.torch,
			Location:     Location{Region: c.key.region, Zone: c.key.zone, NetworkGroup: c.key.ng}.Upto(level),
			Eligible:     int(compat), Free: int(free), Needed: s.nodes,
		})
		i = j
	}
	if noValue > 0 {
		exp.Excluded = append(exp.Excluded, Exclusion{Reason: ReasonNoValue, Workers: noValue})
	}
	return out, exp
}

func samePrefix(a, b *cellKey, depth int) bool {
	for d := 0; d <= depth; d++ {
		if a.field(d) != b.field(d) {
			return false
		}
	}
	return true
}

func (s *scheduler) compatOf(g group) int {
	n := 0
	for c := g.clo; c < g.chi; c++ {
		n += int(s.cells[c].compat)
	}
	return n
}

// chooseBucket picks, among the buckets holding the job now, the best fit
// (fewest free workers left) or, for first_fill, the first to fill; -1 when
// none holds it.
func (s *scheduler) chooseBucket(bs []group) int {
	best := -1
	for i := range bs {
		if bs[i].size() < s.nodes {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		if s.pol.BucketChoice == BucketBestFit && bs[i].size() != bs[best].size() {
			if bs[i].size() < bs[best].size() {
				best = i
			}
			continue
		}
		if s.fillsBefore(bs[i], bs[best], s.nodes) {
			best = i
		}
	}
	return best
}

// fillsBefore reports whether group a would complete n workers before group
// b when free workers are walked in rank order: a's n-th best worker ranks
// before b's.
func (s *scheduler) fillsBefore(a, b group, n int) bool {
	return s.before(s.nth(a, n), s.nth(b, n))
}

// nth is the group's n-th best free worker in rank order (1-based).
func (s *scheduler) nth(g group, n int) int32 {
	ws := s.freeByCell[g.lo:g.hi]
	switch {
	case n == 1:
		best := ws[0]
		for _, w := range ws[1:] {
			if s.before(w, best) {
				best = w
			}
		}
		return best
	case n >= len(ws):
		worst := ws[0]
		for _, w := range ws[1:] {
			if s.before(worst, w) {
				worst = w
			}
		}
		return worst
	}
	top := s.topN(ws, n)
	return top[n-1]
}

// topN returns the n best workers of ws in rank order, in s.heap's storage.
func (s *scheduler) topN(ws []int32, n int) []int32 {
	h := s.heap[:0]
	if n >= len(ws) {
		h = append(h, ws...)
		slices.SortFunc(h, s.cmp)
		s.heap = h
		return h
	}
	// A max-heap of the n best so far: its root is the worst of them.
	worse := func(i, j int) bool { return s.before(h[j], h[i]) }
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			m := l
			if r := l + 1; r < len(h) && worse(r, l) {
				m = r
			}
			if !worse(m, i) {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	h = append(h, ws[:n]...)
	for i := n/2 - 1; i >= 0; i-- {
		down(i)
	}
	for _, w := range ws[n:] {
		if s.before(w, h[0]) {
			h[0] = w
			down(0)
		}
	}
	slices.SortFunc(h, s.cmp)
	s.heap = h
	return h
}

func (s *scheduler) cmp(a, b int32) int {
	switch {
	case a == b:
		return 0
	case s.before(a, b):
		return -1
	}
	return 1
}

// before is the rank order: the policy's key (spread: fewest running tasks,
// then most free GPUs; most_free_memory: most free memory; first_fit:
// nothing), then, for equal keys, the better GPU pick (larger bottleneck,
// then larger total), then worker ID, then input position.
func (s *scheduler) before(a, b int32) bool {
	if pa, pb := s.prim[a], s.prim[b]; pa != pb {
		return pa < pb
	}
	if s.useQ {
		if qa, qb := s.quality(a), s.quality(b); qa != qb {
			return qa < qb
		}
	}
	if ia, ib := s.ws[a].ID, s.ws[b].ID; ia != ib {
		return ia < ib
	}
	return a < b
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
	var idx [MaxGPUs]int
	n := 0
	for s := set; s != 0; s &= s - 1 {
		idx[n] = trailingZeros(s)
		n++
	}
	bn, bs, total := Link{}, -1, 0
	for a := 0; a < n; a++ {
		row := m.Links[idx[a]]
		for b := a + 1; b < n; b++ {
			l := row[idx[b]]
			sc := l.Score()
			total += sc
			if bs < 0 || sc < bs {
				bn, bs = l, sc
			}
		}
	}
	return bn, total
}

func trailingZeros(s DeviceSet) int {
	n := 0
	for s&1 == 0 {
		s >>= 1
		n++
	}
	return n
}

// take appends need workers of group g to s.chosen: from as few groups of
// the next tighter level as possible (the largest first, the last by best
// fit), recursively, and inside the tightest groups in rank order.
func (s *scheduler) take(g group, need int) {
	if need <= 0 {
		return
	}
	if s.flat || g.chi == g.clo || g.depth >= 3 {
		s.chosen = append(s.chosen, s.topN(s.freeByCell[g.lo:g.hi], need)...)
		return
	}
	kids, singles := s.children(g)
	switch {
	case len(kids) == 1 && singles == 0:
		s.take(kids[0], need)
		return
	case singles == len(kids):
		// No worker knows the tighter level: each is a group of one, and
		// taking groups of one largest first is rank order.
		s.chosen = append(s.chosen, s.topN(s.freeByCell[g.lo:g.hi], need)...)
		return
	}
	used := make([]bool, len(kids))
	for need > 0 {
		fit := -1
		for i := range kids {
			if used[i] || kids[i].size() < need {
				continue
			}
			if fit < 0 || kids[i].size() < kids[fit].size() ||
				kids[i].size() == kids[fit].size() && s.fillsBefore(kids[i], kids[fit], need) {
				fit = i
			}
		}
		if fit >= 0 {
			s.take(kids[fit], need)
			return
		}
		big := -1
		for i := range kids {
			if used[i] {
				continue
			}
			if big < 0 || kids[i].size() > kids[big].size() ||
				kids[i].size() == kids[big].size() && s.fillsBefore(kids[i], kids[big], kids[i].size()) {
				big = i
			}
		}
		used[big] = true
		s.take(kids[big], kids[big].size())
		need -= kids[big].size()
	}
}

// children splits g on the next tighter field. Cells with no value there
// give one group per free worker. It returns the groups with free workers
// and how many of them are single workers.
func (s *scheduler) children(g group) ([]group, int) {
	depth := int(g.depth) + 1
	var kids []group
	singles := 0
	for i := g.clo; i < g.chi; {
		c := &s.cells[i]
		if c.key.field(depth) == "" {
			for p := c.off; p < c.off+c.free; p++ {
				kids = append(kids, group{clo: i, chi: i, depth: 3, lo: p, hi: p + 1})
				singles++
			}
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

// placements turns the chosen workers into node ranks with their GPUs.
func (s *scheduler) placements() []Placement {
	out := make([]Placement, len(s.chosen))
	for rank, i := range s.chosen {
		w := &s.ws[i]
		p := Placement{NodeRank: rank, Worker: w.ID, Location: w.Location, LocationTrusted: w.LocationTrusted}
		free := w.freeSet()
		m := usableMatrix(w)
		switch {
		case free.Len() == s.gpn:
			p.GPUs = free.Indices()
			if m != nil && s.gpn >= 2 {
				bn, _ := setQuality(m, free)
				p.Bottleneck = bn.String()
			}
		case m != nil:
			pick, ok := s.picks[i]
			if !ok {
				var err error
				if pick, err = PickDevices(m, free, s.gpn, s.opts); err != nil {
					pick = Pick{GPUs: lowest(free, s.gpn)}
				}
			}
			p.GPUs = pick.GPUs
			if s.gpn >= 2 && len(pick.GPUs) >= 2 {
				p.Bottleneck = pick.Bottleneck.String()
			}
		default:
			p.GPUs = lowest(free, s.gpn)
		}
		out[rank] = p
	}
	return out
}

// lowest is the k lowest indices of free.
func lowest(free DeviceSet, k int) []int {
	out := make([]int, 0, k)
	for i := 0; free != 0 && len(out) < k; i++ {
		if free&1 != 0 {
			out = append(out, i)
		}
		free >>= 1
	}
	return out
}

package placement

import (
	"fmt"
	"slices"
	"sync"

	"github.com/gpulayer/gpulayer/topology"
)

// Schedule chooses the machines and GPUs of one job (ADR-0021 §2–§5):
//
//   - Eligibility: the policy's labels and regions, enough GPUs, enough free
//     GPUs now (a CPU-only job needs neither); one torch version inside a
//     group.
//   - Levels: prefer tries one NVLink domain (for a job of several nodes,
//     where a worker is in one), then one network group, one zone, one
//     region, and any, and takes the tightest that holds the job now; a
//     required level (nvlink_domain, network_group, zone, region) is the
//     only one tried, and workers with no value there never qualify; any
//     ignores location.
//   - Buckets: at a level, the candidate groups are buckets of (torch
//     version, location). Of those that hold the job, best fit takes the one
//     left with the fewest free workers (first_fill: the first to fill in
//     rank order).
//   - Inside a bucket, the fewest groups of the tighter levels, loosest
//     level first (regions, then zones, network groups, NVLink domains:
//     take.go's greedy, largest first and the last by best fit, where it
//     is the fewest; fewest.go's knapsack where not), and inside those the workers
//     in rank order, with the quality of each machine's GPU pick breaking
//     ties between otherwise equal workers.
//
// Schedule only reads workers and is deterministic: the same inputs give
// the same Decision, byte for byte, whatever the order of workers.
func Schedule(job Job, workers []Worker, policy Policy) Decision {
	s := schedulers.Get().(*scheduler)
	d := s.schedule(job, workers, policy)
	s.release()
	schedulers.Put(s)
	return d
}

// Request is one job and its policy, for ScheduleAll.
type Request struct {
	Job    Job
	Policy Policy
}

// ScheduleAll places several jobs in one pass, in the order given: each
// placed job takes its GPUs (and one running task, and the chosen GPUs'
// share of free memory) from its workers before the next job is placed, so
// no GPU is promised twice. A CPU-only job takes no GPU, only the running
// task: its machines stay open to the jobs after it, CPU-only ones
// included. workers is not modified.
func ScheduleAll(requests []Request, workers []Worker) []Decision {
	ws := slices.Clone(workers)
	var s scheduler
	out := make([]Decision, 0, len(requests))
	for _, r := range requests {
		d := s.schedule(r.Job, ws, r.Policy)
		if d.Status == StatusPlaced {
			for i, p := range d.Workers {
				w := &ws[s.chosen[i]]
				taken := topology.DeviceSetOf(p.GPUs...)
				if before := int64(count(w.freeSet())); before > 0 {
					w.FreeMemoryMiB -= w.FreeMemoryMiB * int64(count(taken)) / before
				}
				w.Free &^= taken
				w.RunningTasks++
			}
		}
		out = append(out, d)
	}
	return out
}

// scheduler holds one call's working state; ScheduleAll reuses it.
type scheduler struct {
	ws    []Worker
	pol   Policy
	nodes int
	gpn   int
	opts  topology.PickOptions
	flat  bool // policy any: location ignored inside the bucket
	rank  rankKind
	useQ  bool // GPU pick quality ranks workers

	cellOf   []int32 // per worker: its cell, or -1
	prim     []int64 // per worker: primary rank key, smaller first
	qual     []int64 // per worker: GPU pick quality key, smaller first
	qualDone []bool
	bneck    []topology.Link // per worker: its GPU set's slowest link, when quality found it
	// The call's GPU picks (picks.go).
	classes    []pickClass
	pickMemo   map[pickKey]pickMemo
	lastMatrix *topology.Matrix
	lastClass  int
	fullMatrix *topology.Matrix // fullQuality's
	fullFree   topology.DeviceSet
	fullBn     topology.Link
	fullTotal  int
	cells      []cell
	freeByCell []int32
	excl       [exclCount]int
	torchrun   bool // the job runs under torchrun
	keys       keyMask
	// slice is the nodes of a slice, 0 without slices; sliceLevel and
	// sliceDepth where each slice stays.
	slice      int
	sliceLevel Level
	sliceDepth int
	chosen     []int32
	heap       []int32
	tied       []int32 // scratch of firstByKeyThenPick
	spare      []int32
	order, inv []int32
	sorted     []cell
	groups     []group
	index      map[cellKey]int32 // cells by key once there are many (indexed); kept empty between calls
	indexed    bool
	slots      [slotCount]int32  // cell+1 by slotHash; 0 empty
	prints     [printSlots]int32 // cell+1 by the fingerprint's hash, for cellFor; 0 empty

	// bucketSpace is the unused part of the allocation that the levels'
	// bucket explanations are cut from; bucketsLeft, how many they may
	// still need.
	bucketSpace []BucketExplanation
	bucketsLeft int
	bucketsCut  bool // a level's buckets were allocated
}

// rankKind is Policy.Rank decoded once, not compared as a string per worker.
type rankKind uint8

const (
	rankSpread rankKind = iota
	// rankSpreadCPU is spread for a CPU-only job: fewest running tasks,
	// then the fewest free GPUs. Free GPUs are no headroom to a job that
	// uses none, so between equally loaded machines it takes a CPU box or
	// a busy machine and leaves idle GPUs' machines to GPU jobs.
	rankSpreadCPU
	rankFirstFit
	rankMostFreeMemory
	rankBinpack
)

// keyMask is the policy's compatible properties, one bit each, in the
// order of compatProps.
type keyMask uint8

const (
	keyTorch keyMask = 1 << iota
	keyDriver
	keyModel
)

func maskOf(props []string) keyMask {
	var m keyMask
	for i, p := range compatProps {
		if slices.Contains(props, p) {
			m |= 1 << i
		}
	}
	return m
}

// schedulers keeps the working state of finished calls for the next ones:
// Schedule runs often (every plan, every job) and its scratch space is
// proportional to the fleet.
var schedulers = sync.Pool{New: func() any { return new(scheduler) }}

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
	if job.GPUsPerNode < 0 || job.GPUsPerNode > topology.MaxGPUs {
		return fail(fmt.Errorf("job %q asks for %d GPUs per node; it needs 0 (CPU only) to %d", job.Name, job.GPUsPerNode, topology.MaxGPUs))
	}
	if sl := policy.Slice; sl != nil && job.Nodes%sl.Nodes != 0 {
		return fail(fmt.Errorf("job %q asks for %d nodes, not a multiple of its policy's slices of %d", job.Name, job.Nodes, sl.Nodes))
	}
	s.reset(job, workers, policy.withDefaults())
	if policy.Slice != nil {
		d.Slice = &Slice{Nodes: s.slice, Locality: s.sliceLevel.String()}
	}
	s.classify()
	reasons := 0
	for _, n := range s.excl {
		if n > 0 {
			reasons++
		}
	}
	if reasons > 0 {
		d.Explanation.Excluded = make([]Exclusion, 0, reasons)
	}
	for r, n := range s.excl {
		if n > 0 {
			d.Explanation.Excluded = append(d.Explanation.Excluded, Exclusion{Reason: staticReasons[r], Workers: n})
		}
	}

	levels := s.pol.levels()
	if len(levels) > 1 && levels[0] == LevelNVLinkDomain && (s.nodes < 2 || !s.anyDomain()) {
		// prefer's NVLink domains: a one-node job gains nothing from
		// NVLink between machines, and should leave a domain's trays to
		// the jobs that do; without a worker in a domain the level holds
		// no bucket, and its explanation would only say so.
		levels = levels[1:]
	}
	d.Explanation.Levels = make([]LevelExplanation, 0, len(levels))
	s.bucketSpace, s.bucketsLeft, s.bucketsCut = nil, s.countBuckets(levels), false
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
		s.topologyOrder()
		spans := s.spans(level)
		be := &lastExp.Buckets[b]
		be.Choice, be.Groups = "placed", spans
		s.passedOver(lastExp, b, level)
		d.Status, d.Level = StatusPlaced, level
		d.Location, d.TorchVersion, d.CUDADriver, d.GPUModel = be.Location, be.TorchVersion, be.CUDADriver, be.GPUModel
		d.Workers = s.placements()
		d.Summary = placedSummary(&d, spans, s.keys)
		return d
	}

	// Nothing holds the job now: say how close the loosest level came, and
	// whether any bucket could hold it were every compatible worker idle.
	level := levels[len(levels)-1]
	d.Level = level
	d.Unschedulable = true
	for _, b := range last {
		if int(b.compatRoom) >= s.nodes {
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
		d.Location, d.TorchVersion, d.CUDADriver, d.GPUModel = bestExp.Location, bestExp.TorchVersion, bestExp.CUDADriver, bestExp.GPUModel
		s.passedOver(lastExp, best, level)
	}
	eligible := len(workers) - s.excl[exclLabel] - s.excl[exclRegion] - s.excl[exclNoTorchrun] - s.excl[exclTooFewGPUs]
	d.Summary = unplacedSummary(&d, level, s.nodes, bestExp, distinctKeys(lastExp.Buckets), eligible, s.keys)
	return d
}

// anyDomain reports whether a compatible worker is in an NVLink domain.
func (s *scheduler) anyDomain() bool {
	for i := range s.cells {
		if s.cells[i].key.domain != "" {
			return true
		}
	}
	return false
}

// Indices of scheduler.excl, in the order a worker is checked.
const (
	exclLabel = iota
	exclRegion
	exclNoTorchrun
	exclTooFewGPUs
	exclNoSliceValue
	exclBusy
	exclTooFewFreeGPUs
	exclCount
)

// staticReasons names each index of scheduler.excl.
var staticReasons = [exclCount]Reason{ReasonLabel, ReasonRegion, ReasonNoTorchrun, ReasonTooFewGPUs, ReasonNoSliceValue, ReasonBusy, ReasonTooFewFreeGPUs}

// closer reports whether bucket a is closer to holding the job than b: more
// free workers, then more eligible ones (eligible first when no bucket could
// ever hold the job); with slices, counted in whole slices first. Equal
// buckets keep the earlier.
func closer(a, b *BucketExplanation, byEligible bool) bool {
	if a.Slices != nil && b.Slices != nil {
		if byEligible && a.Slices.Eligible != b.Slices.Eligible {
			return a.Slices.Eligible > b.Slices.Eligible
		}
		if a.Slices.Free != b.Slices.Free {
			return a.Slices.Free > b.Slices.Free
		}
	}
	if byEligible && a.Eligible != b.Eligible {
		return a.Eligible > b.Eligible
	}
	if a.Free != b.Free {
		return a.Free > b.Free
	}
	return a.Eligible > b.Eligible
}

// distinctKeys counts the distinct compatibility keys among a level's
// buckets (sorted by them, so equal keys are neighbours).
func distinctKeys(bs []BucketExplanation) int {
	n := 0
	for i := range bs {
		if i == 0 || !bs[i].sameKey(&bs[i-1]) {
			n++
		}
	}
	return n
}

// passedOver counts, under the property that split them off, the free
// workers at bucket b's location (any location, at level any) that were
// left out because a compatible property differs: the first of
// compatProps whose value is not b's.
func (s *scheduler) passedOver(exp *LevelExplanation, b int, level Level) {
	var n [len(compatProps)]int
	chosen := &exp.Buckets[b]
	for i := range exp.Buckets {
		o := &exp.Buckets[i]
		if i == b || o.Free == 0 || level != LevelAny && o.Location != chosen.Location {
			continue
		}
		for p := range compatProps {
			if o.compat(p) != chosen.compat(p) {
				n[p] += o.Free
				break
			}
		}
	}
	for p, c := range n {
		if c > 0 {
			exp.Excluded = append(exp.Excluded, Exclusion{Reason: compatReasons[p], Workers: c})
		}
	}
}

func (s *scheduler) reset(job Job, workers []Worker, pol Policy) {
	n := len(workers)
	s.ws, s.pol, s.nodes, s.gpn, s.torchrun = workers, pol, job.Nodes, job.GPUsPerNode, job.Torchrun
	s.opts = topology.PickOptions{MultiNode: job.MultiNode()}
	s.flat = pol.GroupLocality == LocalityAny
	switch {
	case pol.Rank == RankFirstFit:
		s.rank = rankFirstFit
	case pol.Rank == RankMostFreeMemory:
		s.rank = rankMostFreeMemory
	case pol.Rank == RankBinpack:
		s.rank = rankBinpack
	case job.GPUsPerNode == 0:
		s.rank = rankSpreadCPU
	default:
		s.rank = rankSpread
	}
	s.useQ = pol.Rank != RankFirstFit && job.GPUsPerNode >= 2
	s.keys = maskOf(pol.Compatible)
	s.slice, s.sliceLevel, s.sliceDepth = 0, 0, 0
	if pol.Slice != nil {
		// Validate has checked the level.
		s.sliceLevel, _ = pol.sliceLevel()
		s.slice, s.sliceDepth = pol.Slice.Nodes, depthOf(s.sliceLevel)
		// Slices keep to their groups at every level, so any does not
		// take workers by rank order alone.
		s.flat = false
	}
	s.cellOf = grow(s.cellOf, n)
	s.prim = grow(s.prim, n)
	s.qual = grow(s.qual, n)
	s.qualDone = grow(s.qualDone, n)
	s.bneck = grow(s.bneck, n)
	clear(s.qualDone)
	s.resetPicks()
	s.cells = s.cells[:0]
	s.excl = [exclCount]int{}
}

// release drops every reference to the caller's data, so that a pooled
// scheduler does not keep a fleet alive.
func (s *scheduler) release() {
	s.ws, s.bucketSpace = nil, nil
	s.resetPicks() // its matrices are the caller's
	clear(s.index) // its keys are the caller's strings
	// Only the cells of this call hold strings: every call before it
	// cleared its own, and classify's sort left the unsorted copies in
	// s.sorted's first len(s.cells).
	n := len(s.cells)
	clear(s.cells)
	clear(s.sorted[:min(n, cap(s.sorted))])
	s.pol = Policy{}
}

// placements turns the chosen workers into node ranks with their GPUs.
func (s *scheduler) placements() []Placement {
	out := make([]Placement, len(s.chosen))
	gpus := make([]int, 0, len(s.chosen)*s.gpn) // one backing array for every node's GPUs
	var lastLink topology.Link
	lastName := ""
	linkName := func(l topology.Link) string {
		if lastName == "" || l != lastLink {
			lastLink, lastName = l, l.String()
		}
		return lastName
	}
	for rank, i := range s.chosen {
		w := &s.ws[i]
		p := Placement{NodeRank: rank, Worker: w.ID, Location: w.Location, LocationTrusted: w.LocationTrusted}
		free := w.freeSet()
		m := usableMatrix(w)
		start := len(gpus)
		// alike: every link between the node's GPUs is the same (an
		// NVSwitch machine), so their order cannot matter; known from
		// the set's score without looking at the links again.
		alike := false
		switch {
		case s.gpn == 0:
			// A CPU-only node: no GPU, so nothing to pick and no link.
		case count(free) == s.gpn:
			gpus = appendIndices(gpus, free, s.gpn)
			if m != nil && s.gpn >= 2 {
				bn, total := s.bneck[i], int(-s.qual[i]&(1<<32-1))
				if !s.qualDone[i] {
					bn, total = s.fullQuality(m, free)
				}
				p.Bottleneck = linkName(bn)
				alike = total == linkScore(bn)*s.gpn*(s.gpn-1)/2
			}
		case m != nil:
			pick, ok := s.pickFor(m, free)
			if !ok {
				pick = topology.Pick{GPUs: appendIndices(nil, free, s.gpn)}
			}
			gpus = append(gpus, pick.GPUs...)
			if s.gpn >= 2 && len(pick.GPUs) >= 2 {
				p.Bottleneck = linkName(pick.Bottleneck)
				alike = pick.Total == linkScore(pick.Bottleneck)*len(pick.GPUs)*(len(pick.GPUs)-1)/2
			}
		default:
			gpus = appendIndices(gpus, free, s.gpn)
		}
		p.GPUs = gpus[start:len(gpus):len(gpus)]
		if m != nil && !alike {
			topology.OrderLocalRanks(m, p.GPUs)
		}
		out[rank] = p
	}
	return out
}

// appendIndices appends the k lowest indices of free.
func appendIndices(out []int, free topology.DeviceSet, k int) []int {
	for i := 0; free != 0 && k > 0; i++ {
		if free&1 != 0 {
			out = append(out, i)
			k--
		}
		free >>= 1
	}
	return out
}

package placement

import (
	"cmp"
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/gpulayer/gpulayer/topology"
)

// cellKey is the compatibility properties the policy keys on (torch,
// CUDA driver, GPU model; "" for those it does not list) and the full
// location: the finest bucket.
type cellKey struct{ torch, driver, model, region, zone, ng, domain string }

// field is the key's location value at depth 1 (region), 2 (zone), 3
// (network group) or 4 (NVLink domain). Depth 0 is the compatibility
// properties.
func (k *cellKey) field(depth int) string {
	switch depth {
	case 1:
		return k.region
	case 2:
		return k.zone
	case 3:
		return k.ng
	}
	return k.domain
}

// part is the key's i-th part in sort order: the compatible properties,
// then the location loosest first (cellPrint's order).
func (c *cell) part(i int) string {
	switch i {
	case partTorch:
		return c.key.torch
	case partDriver:
		return c.key.driver
	case partModel:
		return c.key.model
	case partRegion:
		return c.key.region
	case partZone:
		return c.key.zone
	case partNG:
		return c.key.ng
	}
	return c.key.domain
}

// The parts of a key, in sort order.
const (
	partTorch = iota
	partDriver
	partModel
	partRegion
	partZone
	partNG
	partDomain
	keyParts // how many
)

// less orders cells by key: the compatible properties, then the location
// loosest first. Equal parts, the most, are found from the fingerprints.
func (c *cell) less(o *cell) int {
	for i := range keyParts {
		ka, kb := &c.print[i], &o.print[i]
		if *ka == *kb {
			if ka.exact() {
				continue
			}
		} else if ka.exact() && kb.exact() {
			// Different fingerprints that hold every byte: the strings
			// differ.
			return strings.Compare(c.part(i), o.part(i))
		}
		a, b := c.part(i), o.part(i)
		if a != b {
			return strings.Compare(a, b)
		}
	}
	return 0
}

// splitFrom is the depth at which c's key first differs from o's: 0 for a
// compatible property, 1 to 4 for the location's region to NVLink domain,
// 5 when equal.
func (c *cell) splitFrom(o *cell) int8 {
	for i := range keyParts {
		ka, kb := &c.print[i], &o.print[i]
		if *ka == *kb {
			if ka.exact() {
				continue
			}
		} else if ka.n != kb.n || ka.exact() && kb.exact() {
			return int8(max(0, i-len(compatProps)+1))
		}
		if c.part(i) != o.part(i) {
			return int8(max(0, i-len(compatProps)+1))
		}
	}
	return int8(depthOf(0) + 1)
}

// maxRanked is how many cells rankCells ranks: a part's place among at
// most that many values fits in a byte.
const maxRanked = 256

// rankCells sets each cell's rank: its key as one word, a byte per part
// (loosest first: the compatible properties, then region to NVLink domain),
// the byte being the place of the cell's value among the cells' distinct
// values of that part. Words compare as the keys do (less), and the first
// part in which two keys differ is the first byte in which their words
// do (splitRanked). Each part's distinct values are few (zones, network
// groups, two drivers), so finding and sorting them costs less than
// comparing whole keys in the cell sort: a key compare walked up to seven
// parts and then compared strings. At most maxRanked cells.
func (s *scheduler) rankCells() {
	cells := s.cells
	var rep [maxRanked]int32   // the part's distinct values: a cell of each, in order of appearance
	var which [maxRanked]uint8 // per cell: its value's index in rep
	var perm [maxRanked]int32
	var place [maxRanked]uint64 // per index in rep: its value's place in string order
	for i := range cells {
		cells[i].rank = 0
	}
	for p := range keyParts {
		k := 0
		for c := range cells {
			pc := &cells[c].print[p]
			j := 0
			for ; j < k; j++ {
				// Equal fingerprints that hold every byte are equal
				// strings, and different fingerprints different ones.
				if r := &cells[rep[j]]; r.print[p] == *pc && (pc.exact() || r.part(p) == cells[c].part(p)) {
					break
				}
			}
			if j == k {
				rep[k] = int32(c)
				k++
			}
			which[c] = uint8(j)
		}
		if k == 1 {
			continue // every cell's byte is 0
		}
		for j := range k {
			perm[j] = int32(j)
		}
		slices.SortFunc(perm[:k], func(a, b int32) int { return strings.Compare(cells[rep[a]].part(p), cells[rep[b]].part(p)) })
		for at, j := range perm[:k] {
			place[j] = uint64(at)
		}
		shift := uint(8 * (keyParts - 1 - p))
		for c := range cells {
			cells[c].rank |= place[which[c]] << shift
		}
	}
}

// splitRanked is splitFrom from the cells' ranks.
func (c *cell) splitRanked(o *cell) int8 {
	x := c.rank ^ o.rank
	if x == 0 {
		return int8(depthOf(0) + 1)
	}
	part := (bits.LeadingZeros64(x) - (64 - 8*keyParts)) / 8
	return int8(max(0, part-len(compatProps)+1))
}

// depthOf is the key depth whose value a level's bucket shares last.
func depthOf(l Level) int { return int(LevelAny - l) }

// cell is the compatible workers of one cellKey.
type cell struct {
	key    cellKey
	compat int32 // statically eligible, free or not
	free   int32 // free now
	off    int32 // first free worker in scheduler.freeByCell
	// split is the depth at which the key first differs from the cell
	// before it in key order (splitFrom; 0 for the first): a run of cells
	// shares the key up to depth d when every cell after its first has
	// split > d.
	split int8
	// rank is the key as one word (rankCells), when the call has at most
	// maxRanked cells.
	rank  uint64
	print cellPrint
	sum   uint64 // print's hash, for cellFor
}

// group is a set of free workers that placement takes from as one: a bucket,
// a sub-group of it, or a single worker whose location at the tighter level
// is unknown.
type group struct {
	clo, chi int32 // cells [clo, chi); chi == clo for a single worker
	depth    int8  // fields 0..depth are shared by its cells
	lo, hi   int32 // its free workers: freeByCell[lo:hi]
	compat   int32 // its compatible workers, free or not (buckets only)
	// room is how many of its free workers placement can take: all of
	// them, or with slices those that make whole slices (sliceRoom);
	// compatRoom the same of its compatible workers (buckets only).
	room, compatRoom int32
}

func (g *group) size() int { return int(g.hi - g.lo) }

// classify is the one pass over every worker: the static checks, the primary
// rank key, and the worker's cell. Then it sorts the cells by key and lays
// the free workers out cell by cell, so that every bucket at every level is
// a contiguous run of cells and of free workers.
func (s *scheduler) classify() {
	clear(s.index)
	s.indexed = false
	clear(s.slots[:])
	clear(s.prints[:])
	freeTotal := 0
	filtered := len(s.pol.Labels) > 0 || len(s.pol.Regions) > 0
	more := s.keys&^keyTorch != 0 // keyed on more than torch
	for i := range s.ws {
		w := &s.ws[i]
		s.cellOf[i] = -1
		if filtered {
			if r := s.staticReason(w); r >= 0 {
				s.excl[r]++
				continue
			}
		} else if s.torchrun && w.NoTorchrun {
			s.excl[exclNoTorchrun]++ // staticReason's checks after labels and regions, inline
			continue
		} else if w.gpuCount() < s.gpn {
			s.excl[exclTooFewGPUs]++
			continue
		} else if s.slice > 0 && w.Location.At(s.sliceLevel) == "" {
			s.excl[exclNoSliceValue]++
			continue
		}
		// A direct-mapped cache on a few bytes of the key finds the cell
		// whether the fleet is listed zone by zone or round robin.
		// The properties the policy does not key on are "" for every
		// worker, so they never split a bucket.
		torch, driver, model := w.TorchVersion, "", ""
		if s.keys&keyTorch == 0 {
			torch = ""
		}
		if more {
			if s.keys&keyDriver != 0 {
				driver = w.CUDADriver
			}
			if s.keys&keyModel != 0 {
				model = w.GPUModel
			}
		}
		// Two slots per key: a cell whose first slot another cell holds
		// takes its second, so two cells sharing a slot do not push each
		// other out for every worker.
		h := slotHash(w)
		if more {
			h ^= moreHash(driver, model)
		}
		h *= 0x9E3779B97F4A7C15
		first, second := &s.slots[h>>(64-slotBits)], &s.slots[h>>(64-2*slotBits)&(slotCount-1)]
		c := *first - 1
		// holds, written out for the first slot, where nearly every
		// worker's cell is: too large for the compiler to inline, and a
		// call per worker spilled the loop's registers.
		hit := false
		if c >= 0 {
			cc := &s.cells[c]
			hit = cc.print[partZone].is(w.Location.Zone, cc.key.zone) && cc.print[partNG].is(w.Location.NetworkGroup, cc.key.ng) &&
				cc.print[partRegion].is(w.Location.Region, cc.key.region) && cc.print[partTorch].is(torch, cc.key.torch) &&
				cc.print[partDomain].is(w.Location.NVLinkDomain, cc.key.domain) &&
				(!more || cc.print[partDriver].is(driver, cc.key.driver) && cc.print[partModel].is(model, cc.key.model))
		}
		if !hit {
			c = *second - 1
			if c < 0 || !s.cells[c].holds(w, torch) || more && !s.cells[c].holdsMore(driver, model) {
				c = s.cellFor(cellKey{torch, driver, model, w.Location.Region, w.Location.Zone, w.Location.NetworkGroup, w.Location.NVLinkDomain})
				if *first == 0 {
					*first = c + 1
				} else {
					*second = c + 1
				}
			}
		}
		s.cells[c].compat++
		// Free enough means gpus_per_node free GPUs: any worker for a
		// CPU-only job, which needs none (busy GPUs, or none at all).
		free := count(w.freeSet())
		if free < s.gpn {
			if free == 0 {
				s.excl[exclBusy]++
			} else {
				s.excl[exclTooFewFreeGPUs]++
			}
			continue
		}
		s.cells[c].free++
		s.cellOf[i] = c
		freeTotal++
		switch s.rank {
		case rankSpread:
			s.prim[i] = int64(min(max(w.RunningTasks, 0), math.MaxInt32))<<8 | int64(topology.MaxGPUs-free)
		case rankSpreadCPU:
			s.prim[i] = int64(min(max(w.RunningTasks, 0), math.MaxInt32))<<8 | int64(free)
		case rankMostFreeMemory:
			s.prim[i] = -max(w.FreeMemoryMiB, 0)
		case rankBinpack:
			s.prim[i] = int64(free)<<48 | min(max(w.FreeMemoryMiB, 0), 1<<48-1)
		default:
			s.prim[i] = 0
		}
	}

	// Sort cells by key, then place free workers cell by cell (a counting
	// sort that keeps input order inside a cell; rank order is applied later
	// and only where it matters).
	order := grow(s.order, len(s.cells))
	s.order = order
	for i := range order {
		order[i] = int32(i)
	}
	ranked := len(s.cells) <= maxRanked
	if ranked {
		s.rankCells()
		slices.SortFunc(order, func(a, b int32) int { return cmp.Compare(s.cells[a].rank, s.cells[b].rank) })
	} else {
		slices.SortFunc(order, func(a, b int32) int { return s.cells[a].less(&s.cells[b]) })
	}
	inv := grow(s.inv, len(s.cells)) // old cell id → sorted position
	s.inv = inv
	sorted := grow(s.sorted, len(s.cells))
	off := int32(0)
	for to, from := range order {
		inv[from] = int32(to)
		sorted[to] = s.cells[from]
		sorted[to].off = off
		off += sorted[to].free
		sorted[to].split = 0
		if to > 0 && ranked {
			sorted[to].split = sorted[to].splitRanked(&sorted[to-1])
		} else if to > 0 {
			sorted[to].split = sorted[to].splitFrom(&sorted[to-1])
		}
	}
	s.cells, s.sorted = sorted, s.cells[:0]
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

// holds reports whether a worker with this torch value ("" when the policy
// does not key on torch) belongs to the cell by location and torch, by the
// key's fingerprint: word compares, no calls. Zones and network groups
// differ most often, so they are compared first.
func (c *cell) holds(w *Worker, torch string) bool {
	return c.print[partZone].is(w.Location.Zone, c.key.zone) && c.print[partNG].is(w.Location.NetworkGroup, c.key.ng) &&
		c.print[partRegion].is(w.Location.Region, c.key.region) && c.print[partTorch].is(torch, c.key.torch) &&
		c.print[partDomain].is(w.Location.NVLinkDomain, c.key.domain)
}

// holdsMore is holds for the CUDA driver and GPU model, checked only when
// the policy keys on one of them.
func (c *cell) holdsMore(driver, model string) bool {
	return c.print[partDriver].is(driver, c.key.driver) && c.print[partModel].is(model, c.key.model)
}

// strKey is a string's fingerprint: its length and two words of its bytes.
// Up to 16 bytes the words hold every byte (the first and last eight, or
// four, overlapping; under four, the first, middle and last byte), so
// equal keys mean equal strings, and different keys different strings.
type strKey struct {
	lo, hi uint64
	n      int
}

// keyOf is s's fingerprint. The []byte conversions do not copy: the
// compiler sees that the bytes are only read.
func keyOf(s string) strKey {
	n := len(s)
	switch {
	case n >= 8:
		return strKey{binary.LittleEndian.Uint64([]byte(s)), binary.LittleEndian.Uint64([]byte(s[n-8:])), n}
	case n >= 4:
		return strKey{uint64(binary.LittleEndian.Uint32([]byte(s))), uint64(binary.LittleEndian.Uint32([]byte(s[n-4:]))), n}
	case n > 0:
		w := short(s)
		return strKey{w, w, n}
	}
	return strKey{}
}

// short packs the bytes of a string of 1 to 3 bytes: its first, middle
// and last, which are all of them.
func short(s string) uint64 {
	n := len(s)
	return uint64(s[0]) | uint64(s[n/2])<<8 | uint64(s[n-1])<<16
}

// is reports whether s equals orig, the string k was made from: from the
// fingerprint's words alone when they hold every byte. (Strings under four
// bytes are compared in full: a third case would stop the compiler from
// inlining is.)
func (k *strKey) is(s, orig string) bool {
	n := len(s)
	switch {
	case n != k.n:
		return false
	case n >= 8 && n <= 16:
		return binary.LittleEndian.Uint64([]byte(s)) == k.lo && binary.LittleEndian.Uint64([]byte(s[n-8:])) == k.hi
	case n >= 4 && n < 8:
		return uint64(binary.LittleEndian.Uint32([]byte(s))) == k.lo && uint64(binary.LittleEndian.Uint32([]byte(s[n-4:]))) == k.hi
	}
	return n == 0 || s == orig
}

// exact reports whether the fingerprint holds every byte of its string, so
// that equal fingerprints mean equal strings.
func (k *strKey) exact() bool { return k.n <= 16 }

// cellPrint is the fingerprint of a cellKey, its parts in the order of
// cell.part.
type cellPrint [keyParts]strKey

// sum hashes the fingerprint into one word.
func (p *cellPrint) sum() uint64 {
	h := uint64(0)
	for i := range p {
		h = (h ^ p[i].lo ^ p[i].hi<<1 ^ uint64(p[i].n)<<40) * 0x9E3779B97F4A7C15
	}
	return h
}

// slotCount is the size of the cell cache in classify: 2^slotBits.
const (
	slotBits  = 9
	slotCount = 1 << slotBits
)

// slotHash hashes the bytes where locations usually differ: the zone's
// and network group's lengths and last bytes, and the region's and torch
// version's last bytes; mixed by a multiply (in classify), its top bits
// pick a key's two slots. It reads the strings up front, so that the
// memory loads of a worker's key overlap instead of following one another.
func slotHash(w *Worker) uint64 {
	z, r, t, g := w.Location.Zone, w.Location.Region, w.TorchVersion, w.Location.NetworkGroup
	h := uint64(len(z)) | uint64(len(g))<<8
	if len(z) > 0 {
		h |= uint64(z[len(z)-1]) << 16
	}
	if len(g) > 0 {
		h |= uint64(g[len(g)-1]) << 24
	}
	if len(r) > 0 {
		h |= uint64(r[len(r)-1]) << 32
	}
	if len(t) > 0 {
		h |= uint64(t[len(t)-1]) << 40
	}
	// An NVLink domain id ends in its clique id and starts with its
	// cluster's UUID: the domains of one network group differ in one or
	// the other.
	if d := w.Location.NVLinkDomain; len(d) > 8 {
		h ^= uint64(d[len(d)-1])<<16 ^ uint64(d[7])<<24
	}
	return h
}

// moreHash adds the driver's and model's lengths and last bytes, for a
// policy that keys on them.
func moreHash(driver, model string) uint64 {
	h := uint64(len(driver))<<48 ^ uint64(len(model))<<56
	if len(driver) > 0 {
		h ^= uint64(driver[len(driver)-1]) << 52
	}
	if len(model) > 0 {
		h ^= uint64(model[len(model)-1]) << 44
	}
	return h
}

// cellFor finds or adds the cell of key k: a scan while there are few
// cells (fleets have tens of zones and network groups; the slot cache in
// classify finds most workers' cells without calling this), a map beyond.
// The map is kept, emptied, for the next call.
func (s *scheduler) cellFor(k cellKey) int32 {
	print := cellPrint{keyOf(k.torch), keyOf(k.driver), keyOf(k.model), keyOf(k.region), keyOf(k.zone), keyOf(k.ng), keyOf(k.domain)}
	sum := print.sum()
	slot := -1
	if !s.indexed {
		// A table by the fingerprint's hash (linear probing), not a scan
		// of every cell: a scan per new cell was quadratic in the cells
		// (40 cells: 6% of a call). Fingerprints first: word compares
		// reject the other cells without reading their strings.
		for h := int(sum >> (64 - printBits)); ; h = (h + 1) & (printSlots - 1) {
			j := s.prints[h] - 1
			if j < 0 {
				slot = h
				break
			}
			if s.cells[j].sum == sum && s.cells[j].print == print && s.cells[j].key == k {
				return j
			}
		}
	} else if j, ok := s.index[k]; ok {
		return j
	}
	c := int32(len(s.cells))
	s.cells = append(s.cells, cell{key: k, print: print, sum: sum})
	if slot >= 0 {
		s.prints[slot] = c + 1
	}
	switch {
	case s.indexed:
		s.index[k] = c
	case len(s.cells) > scanCells:
		if s.index == nil {
			s.index = make(map[cellKey]int32, 4*scanCells)
		}
		for j := range s.cells {
			s.index[s.cells[j].key] = int32(j)
		}
		s.indexed = true
	}
	return c
}

// scanCells is how many cells cellFor finds by scheduler.prints before it
// keeps a map; printSlots (2^printBits) is that table's size, twice as
// many, so that probes stay short.
const (
	scanCells  = 64
	printBits  = 7
	printSlots = 1 << printBits
)

// staticReason is the index in staticReasons of the first check the worker
// fails that does not depend on what is free now (label, region,
// torchrun, GPU count, a value at the slices' level); -1 when it passes
// them.
func (s *scheduler) staticReason(w *Worker) int {
	if len(s.pol.Labels) > 0 {
		for k, v := range s.pol.Labels {
			if got, ok := w.Labels[k]; !ok || got != v {
				return exclLabel
			}
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
			return exclRegion
		}
	}
	if s.torchrun && w.NoTorchrun {
		return exclNoTorchrun
	}
	if w.gpuCount() < s.gpn {
		return exclTooFewGPUs
	}
	if s.slice > 0 && w.Location.At(s.sliceLevel) == "" {
		return exclNoSliceValue
	}
	return -1
}

// buckets lists a level's buckets: runs of cells sharing the torch version
// and the location up to the level, leaving out cells with no value there.
func (s *scheduler) buckets(level Level) ([]group, LevelExplanation) {
	depth := depthOf(level)
	exp := LevelExplanation{Level: level, Excluded: []Exclusion{}}
	out := s.groups[:0]
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
		for j < len(s.cells) && int(s.cells[j].split) > depth {
			compat += s.cells[j].compat
			free += s.cells[j].free
			j++
		}
		g := group{clo: int32(i), chi: int32(j), depth: int8(depth), lo: c.off, hi: c.off + free, compat: compat, room: free, compatRoom: compat}
		if s.slice > 0 {
			g.room, g.compatRoom = s.sliceRoom(g.clo, g.chi)
		}
		out = append(out, g)
		i = j
	}
	s.groups = out
	if len(s.bucketSpace) < len(out) {
		// The first level with buckets gets its own, the levels after it
		// one allocation for all (countBuckets): most jobs are placed at
		// the first level that has buckets, and prefer's five levels
		// would otherwise clear and scan buckets of four never built.
		n := len(out)
		if s.bucketsCut {
			n = max(n, s.bucketsLeft)
		}
		s.bucketSpace, s.bucketsCut = make([]BucketExplanation, n), true
	}
	exp.Buckets = s.bucketSpace[:len(out):len(out)]
	if len(out) == 0 {
		exp.Buckets = []BucketExplanation{} // "buckets": [], as "excluded" is, not null
	}
	s.bucketSpace = s.bucketSpace[len(out):]
	s.bucketsLeft -= len(out)
	var counts []SliceCount
	for i, g := range out {
		k := &s.cells[g.clo].key
		exp.Buckets[i] = BucketExplanation{
			TorchVersion: k.torch, CUDADriver: k.driver, GPUModel: k.model,
			Location: Location{Region: k.region, Zone: k.zone, NetworkGroup: k.ng, NVLinkDomain: k.domain}.Upto(level),
			Eligible: int(g.compat), Free: g.size(), Needed: s.nodes,
		}
		if s.slice > 0 {
			if i == 0 {
				counts = make([]SliceCount, len(out)) // one allocation for the level's buckets
			}
			counts[i] = SliceCount{Size: s.slice, Free: int(g.room) / s.slice, Eligible: int(g.compatRoom) / s.slice}
			exp.Buckets[i].Slices = &counts[i]
		}
	}
	if noValue > 0 {
		exp.Excluded = []Exclusion{{Reason: ReasonNoValue, Workers: noValue}}
	}
	return out, exp
}

// countBuckets counts the buckets of the given levels without building
// them, so that their explanations can share one allocation.
func (s *scheduler) countBuckets(levels []Level) int {
	n := 0
	for _, level := range levels {
		depth := depthOf(level)
		for i := 0; i < len(s.cells); i++ {
			c := &s.cells[i]
			if depth > 0 && c.key.field(depth) == "" {
				continue
			}
			if i == 0 || int(c.split) <= depth || depth > 0 && s.cells[i-1].key.field(depth) == "" {
				n++
			}
		}
	}
	return n
}

// sliceRoom is how many of the free and of the compatible workers of
// cells [lo, hi) make whole slices: in each group at the slices' level,
// its count rounded down to a multiple of the slice size. A group at the
// slices' level or tighter is inside one such group.
func (s *scheduler) sliceRoom(lo, hi int32) (free, compat int32) {
	size := int32(s.slice)
	for i := lo; i < hi; {
		j := i + 1
		f, c := s.cells[i].free, s.cells[i].compat
		for j < hi && int(s.cells[j].split) > s.sliceDepth {
			f += s.cells[j].free
			c += s.cells[j].compat
			j++
		}
		free += f / size * size
		compat += c / size * size
		i = j
	}
	return free, compat
}

package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpulayer/gpulayer/topology"
)

// Property tests on random fleets larger than the exhaustive reference's:
// whatever the policy (every locality, rank, bucket choice, compatible
// properties, slices), every decision keeps ADR-0021's properties, slices
// stay in their groups, node ranks follow the topology tree, and binpack
// takes a machine with more free GPUs only when none with fewer that fits
// is left where the placement could take it.

// propFleet draws n eight-GPU workers. With known, every worker reports
// every level.
func propFleet(rng *rand.Rand, n int, known bool) []Worker {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	ws := make([]Worker, n)
	for i := range ws {
		loc := Location{Region: pick("", "r1", "r1", "r2"), Zone: pick("", "a", "a", "b", "c"), NetworkGroup: pick("", "g1", "g2", "c1/b1/s1", "c1/b1/s2", "c1/b2/s1")}
		if known {
			loc = Location{Region: pick("r1", "r2"), Zone: pick("a", "b"), NetworkGroup: pick("g1", "g2", "c1/b1/s1", "c1/b2/s1")}
		}
		// NVLink domains on a third of the fleets (every worker of a
		// known one in one), so that others keep prefer without them.
		switch {
		case known:
			loc.NVLinkDomain = pick("d1", "d2")
		case n%3 == 1:
			loc.NVLinkDomain = pick("", "", "d1", "d2")
		}
		free := rng.IntN(9)
		ws[i] = Worker{
			ID:            fmt.Sprintf("w%02d", rng.IntN(1000)*100+i),
			Location:      loc,
			TorchVersion:  pick("2.5.1", "2.5.1", "2.4.0"),
			CUDADriver:    pick("550.54.15", "550.54.15", "535.104.05"),
			GPUModel:      pick("H100", "H100", "A100"),
			GPUs:          8,
			Free:          topology.AllDevices(free),
			FreeMemoryMiB: max(0, int64(free)*80<<10-int64(rng.IntN(3))<<10),
			RunningTasks:  rng.IntN(3),
		}
	}
	return ws
}

// propPolicy draws a valid policy and a job it can take.
func propPolicy(rng *rand.Rand) (Policy, Job) {
	localities := []string{LocalityPrefer, LocalityNVLinkDomain, LocalityNetworkGroup, LocalityZone, LocalityRegion, LocalityAny}
	ranks := []string{RankSpread, RankFirstFit, RankMostFreeMemory, RankBinpack}
	p := Policy{
		GroupLocality: localities[rng.IntN(len(localities))],
		Rank:          ranks[rng.IntN(len(ranks))],
		BucketChoice:  []string{BucketBestFit, BucketFirstFill}[rng.IntN(2)],
	}
	for _, c := range compatProps {
		if rng.IntN(3) == 0 {
			p.Compatible = append(p.Compatible, c)
		}
	}
	job := Job{Name: "j", Nodes: 1 + rng.IntN(8), GPUsPerNode: []int{0, 1, 2, 4, 8}[rng.IntN(5)]}
	if rng.IntN(2) == 0 {
		top := LevelRegion
		if l, err := ParseLevel(p.GroupLocality); err == nil && l < LevelAny {
			top = l
		}
		size := 1 + rng.IntN(3)
		p.Slice = &Slice{Nodes: size, Locality: Level(rng.IntN(int(top) + 1)).String()}
		job.Nodes = size * (1 + rng.IntN(3))
	}
	return p, job
}

// propKey is what binpack ranks by: free GPUs, then free memory.
func propKey(w *Worker) [2]int64 {
	return [2]int64{int64(w.freeSet().Len()), w.FreeMemoryMiB}
}

func TestScheduleRandomFleetsKeepThePlacementProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 2))
	trials := 4000
	if testing.Short() {
		trials = 500
	}
	placed, sliced, binpacked := 0, 0, 0
	for trial := range trials {
		ws := propFleet(rng, 5+rng.IntN(40), trial%3 == 0)
		pol, job := propPolicy(rng)
		d := Schedule(job, ws, pol)
		ctx := fmt.Sprintf("trial %d: %+v %+v %+v: %s", trial, job, pol, pol.Slice, d.Summary)
		if d.Status == StatusFailed && !d.Unschedulable {
			t.Fatalf("%s: failed although schedulable", ctx)
		}
		checkLevels(t, ws, job, pol, d, ctx)
		if d.Status != StatusPlaced {
			continue
		}
		placed++
		checkPlacement(t, ws, job, pol, d, ctx)
		checkTopologyOrder(t, d, ctx)
		if pol.Slice != nil {
			sliced++
			l, _ := ParseLevel(pol.Slice.Locality)
			for i, p := range d.Workers {
				first := d.Workers[i/pol.Slice.Nodes*pol.Slice.Nodes]
				if p.Location.At(l) == "" || p.Location.Upto(l) != first.Location.Upto(l) {
					t.Fatalf("%s: node %d (%s) is not in its slice's %s %s", ctx, i, p.Location, l, first.Location.Upto(l))
				}
			}
		}
		if pol.Rank == RankBinpack {
			binpacked++
			checkBinpack(t, ws, job, pol, d, trial%3 == 0, ctx)
		}
	}
	t.Logf("%d trials: %d placed, %d with slices, %d under binpack", trials, placed, sliced, binpacked)
}

// eligibleFree reports whether w could hold a node of the job now.
func eligibleFree(w *Worker, job Job, pol Policy) bool {
	if w.freeSet().Len() < job.GPUsPerNode {
		return false
	}
	if pol.Slice != nil {
		l, _ := ParseLevel(pol.Slice.Locality)
		return w.Location.At(l) != ""
	}
	return true
}

// compatOf is w's values of the policy's compatible properties.
func compatOf(w *Worker, pol Policy) [3]string {
	var k [3]string
	props := pol.withDefaults().Compatible
	for i, v := range [3]string{w.TorchVersion, w.CUDADriver, w.GPUModel} {
		if slices.Contains(props, compatProps[i]) {
			k[i] = v
		}
	}
	return k
}

// roomAt is the most nodes one group at level l could hold now: the free
// eligible workers sharing the compatible properties and the location up to
// l, counted in whole slices of groups at the slices' level.
func roomAt(ws []Worker, job Job, pol Policy, l Level) int {
	size, dom := 1, l
	if pol.Slice != nil {
		size = pol.Slice.Nodes
		s, _ := ParseLevel(pol.Slice.Locality)
		dom = min(l, s)
	}
	type key struct {
		compat [3]string
		group  Location
	}
	domains := map[key]int{}
	for i := range ws {
		w := &ws[i]
		if !eligibleFree(w, job, pol) || l != LevelAny && w.Location.At(l) == "" {
			continue
		}
		domains[key{compatOf(w, pol), w.Location.Upto(dom)}]++
	}
	groups := map[key]int{}
	for k, n := range domains {
		groups[key{k.compat, k.group.Upto(l)}] += n / size * size
	}
	best := 0
	for _, n := range groups {
		best = max(best, n)
	}
	return best
}

// checkLevels: a placement is at the tightest level of the policy's that
// holds the job now; a job not placed fits none of them.
func checkLevels(t *testing.T, ws []Worker, job Job, pol Policy, d Decision, ctx string) {
	t.Helper()
	for _, l := range refLevels(pol.withDefaults(), job.Nodes, ws) {
		fits := roomAt(ws, job, pol, l) >= job.Nodes
		switch {
		case d.Status == StatusPlaced && l == d.Level:
			if !fits {
				t.Fatalf("%s: placed at %s, where no group holds it", ctx, l)
			}
			return
		case fits:
			t.Fatalf("%s: %s at %s, but a group at %s holds it", ctx, d.Status, d.Level, l)
		}
	}
	if d.Status == StatusPlaced {
		t.Fatalf("%s: placed at %s, a level the policy does not try", ctx, d.Level)
	}
}

// checkPlacement: distinct free workers with the job's GPUs among their
// free ones, one value of every compatible property, one location at the
// decision's level.
func checkPlacement(t *testing.T, ws []Worker, job Job, pol Policy, d Decision, ctx string) {
	t.Helper()
	byID := map[string]*Worker{}
	for i := range ws {
		byID[ws[i].ID] = &ws[i]
	}
	if len(d.Workers) != job.Nodes {
		t.Fatalf("%s: %d workers for %d nodes", ctx, len(d.Workers), job.Nodes)
	}
	first := byID[d.Workers[0].Worker]
	seen := map[string]bool{}
	for _, p := range d.Workers {
		w := byID[p.Worker]
		set := topology.DeviceSetOf(p.GPUs...)
		switch {
		case w == nil || seen[p.Worker]:
			t.Fatalf("%s: worker %q unknown or twice", ctx, p.Worker)
		case !eligibleFree(w, job, pol) || len(p.GPUs) != job.GPUsPerNode || set.Len() != len(p.GPUs) || set&^w.freeSet() != 0:
			t.Fatalf("%s: %s cannot hold a node on GPUs %v", ctx, p.Worker, p.GPUs)
		case compatOf(w, pol) != compatOf(first, pol):
			t.Fatalf("%s: %s and %s differ in a compatible property", ctx, p.Worker, first.ID)
		case d.Level != LevelAny && (w.Location.At(d.Level) == "" || w.Location.Upto(d.Level) != first.Location.Upto(d.Level)):
			t.Fatalf("%s: %s (%s) is not in %s's %s", ctx, p.Worker, w.Location, first.ID, d.Level)
		}
		seen[p.Worker] = true
	}
}

// topoCompare orders locations as node ranks do (loosest level first,
// values before none): topologyOrder's order written out again, as the
// reference.
func topoCompare(a, b Location) int {
	for l := LevelAny; l > 0; {
		l--
		va, vb := a.At(l), b.At(l)
		switch {
		case va == vb:
			continue
		case va == "":
			return 1
		case vb == "":
			return -1
		case va < vb:
			return -1
		}
		return 1
	}
	return 0
}

func checkTopologyOrder(t *testing.T, d Decision, ctx string) {
	t.Helper()
	for i := 1; i < len(d.Workers); i++ {
		if topoCompare(d.Workers[i-1].Location, d.Workers[i].Location) > 0 {
			t.Fatalf("%s: node %d (%s) ranks after node %d (%s)", ctx, i-1, d.Workers[i-1].Location, i, d.Workers[i].Location)
		}
	}
}

// checkBinpack: in every tightest group the placement took workers from
// (the whole bucket under any without slices), no free worker left out
// has fewer free GPUs (or as many and less free memory) than one taken.
// A one-node job under best fit on a fleet whose workers report every
// level takes the fullest machine that fits anywhere.
func checkBinpack(t *testing.T, ws []Worker, job Job, pol Policy, d Decision, known bool, ctx string) {
	t.Helper()
	chosen := map[string]bool{}
	for _, p := range d.Workers {
		chosen[p.Worker] = true
	}
	flat := pol.GroupLocality == LocalityAny && pol.Slice == nil
	type leaf struct {
		compat [3]string
		loc    Location
	}
	leafOf := func(w *Worker) (leaf, bool) {
		if flat {
			return leaf{compat: compatOf(w, pol)}, true
		}
		for l := Level(0); l < d.Level; l++ {
			if w.Location.At(l) == "" {
				return leaf{}, false // a group of one
			}
		}
		return leaf{compatOf(w, pol), w.Location}, true
	}
	worst := map[leaf][2]int64{} // per leaf, the largest key taken
	for i := range ws {
		if w := &ws[i]; chosen[w.ID] {
			if lf, ok := leafOf(w); ok {
				if k, seen := worst[lf]; !seen || cmpKey(propKey(w), k) > 0 {
					worst[lf] = propKey(w)
				}
			}
		}
	}
	for i := range ws {
		w := &ws[i]
		if chosen[w.ID] || !eligibleFree(w, job, pol) {
			continue
		}
		if lf, ok := leafOf(w); ok {
			if k, taken := worst[lf]; taken && cmpKey(propKey(w), k) < 0 {
				t.Fatalf("%s: left %s (%d GPUs free) out of its group but took one with key %v", ctx, w.ID, w.freeSet().Len(), k)
			}
		}
	}
	if known && job.Nodes == 1 && pol.BucketChoice == BucketBestFit {
		taken := propKey(byIDOf(ws, d.Workers[0].Worker))
		for i := range ws {
			if eligibleFree(&ws[i], job, pol) && cmpKey(propKey(&ws[i]), taken) < 0 {
				t.Fatalf("%s: one node on %s (key %v), but %s fits with key %v", ctx, d.Workers[0].Worker, taken, ws[i].ID, propKey(&ws[i]))
			}
		}
	}
}

func cmpKey(a, b [2]int64) int {
	if a[0] != b[0] {
		return int(a[0] - b[0])
	}
	return int(a[1] - b[1])
}

func byIDOf(ws []Worker, id string) *Worker {
	for i := range ws {
		if ws[i].ID == id {
			return &ws[i]
		}
	}
	return nil
}

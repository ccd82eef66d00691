package placement

import (
	"fmt"
	"slices"

	"github.com/gpulayer/gpulayer/topology"
)

// Survivor is a node of a running group that keeps its machine and GPUs
// while its lost nodes are replaced (Kueue's node hot swap).
type Survivor struct {
	NodeRank int
	Worker   string
	GPUs     []int
}

// Swap is ReplaceNodes' answer.
type Swap struct {
	// OK says every lost node has a replacement; otherwise Why says why
	// not, and the whole group is placed again.
	OK  bool
	Why string
	// Level is the level the group shares after the swap, the tightest
	// that held a replacement, and Location the survivors' location at
	// it.
	Level    Level
	Location Location
	// Nodes are the replacements in rank order, each with the rank of the
	// node it replaces.
	Nodes []Placement
}

// ReplaceNodes chooses machines for the lost node ranks of a running group
// whose other nodes (survivors) keep their machines and GPUs: each
// replacement as close to the survivors as possible, trying the
// survivors' own group first (the tightest level they share) and then
// each looser level up to the policy's group_locality (a required level
// is never left; prefer may go up to any). At a level, a replacement is a
// worker in the survivors' group there, not one of theirs, that shares
// the properties the policy keeps a group to (its compatible list, the
// torch version by default) and its slice's location, picked in the
// policy's rank order by Schedule itself. workers are the machines as
// they are now, with the group's own GPUs free (the caller releases the
// run). A survivor whose GPUs are no longer free, or no level that holds
// every lost node, is !OK: the caller places the whole group again.
// Pure and deterministic.
func ReplaceNodes(job Job, policy Policy, workers []Worker, survivors []Survivor, lost []int) Swap {
	pol := policy.withDefaults()
	if err := pol.Validate(); err != nil {
		return Swap{Why: err.Error()}
	}
	if len(survivors) == 0 || len(lost) == 0 {
		return Swap{Why: "no node survives to keep"}
	}
	byID := make(map[string]int, len(workers))
	for i := range workers {
		byID[workers[i].ID] = i
	}
	var kept []*Worker // survivors' workers, in survivors' order
	for _, s := range survivors {
		i, ok := byID[s.Worker]
		if !ok {
			return Swap{Why: fmt.Sprintf("machine %s of node %d cannot be placed on now", s.Worker, s.NodeRank)}
		}
		w := &workers[i]
		if want := topology.DeviceSetOf(s.GPUs...); w.freeSet()&want != want {
			return Swap{Why: fmt.Sprintf("the GPUs of node %d on %s are no longer free", s.NodeRank, s.Worker)}
		}
		kept = append(kept, w)
	}
	from := sharedLevel(kept)
	to := LevelAny
	if pol.GroupLocality != LocalityPrefer && pol.GroupLocality != LocalityAny {
		to, _ = ParseLevel(pol.GroupLocality)
	}
	if pol.GroupLocality == LocalityAny {
		from = LevelAny
	}
	if from > to {
		return Swap{Why: fmt.Sprintf("the surviving nodes no longer share one %s", to.words())}
	}
	one := Job{Name: job.Name, Nodes: 1, GPUsPerNode: job.GPUsPerNode, Torchrun: job.Torchrun}
	// A replacement is picked among the candidates by the policy's filters
	// and rank order alone: the level and the compatible properties are
	// this function's to keep.
	pick := Policy{GroupLocality: LocalityAny, Rank: pol.Rank, Regions: pol.Regions, Labels: pol.Labels, BucketChoice: pol.BucketChoice}
	var sliceLevel Level
	if pol.Slice != nil {
		sliceLevel, _ = pol.sliceLevel()
	}
	lost = slices.Sorted(slices.Values(lost))
	for l := from; l <= to; l++ {
		home := kept[0].Location.Upto(l)
		nodes := make([]Placement, 0, len(lost))
		// mates are the nodes placed so far, survivors and replacements,
		// by rank: a slice's new node goes where its slice is.
		mates := map[int]Location{}
		for i, s := range survivors {
			mates[s.NodeRank] = kept[i].Location
		}
		taken := map[string]bool{}
		for _, s := range survivors {
			taken[s.Worker] = true
		}
		for _, rank := range lost {
			var sliceAt *Location
			if pol.Slice != nil && sliceLevel < l {
				for r, loc := range mates {
					if r/pol.Slice.Nodes == rank/pol.Slice.Nodes {
						at := loc.Upto(sliceLevel)
						sliceAt = &at
						break
					}
				}
			}
			var cands []Worker
			for i := range workers {
				w := &workers[i]
				if taken[w.ID] || !sameKey(w, kept[0], pol.Compatible) {
					continue
				}
				if l < LevelAny && (w.Location.At(l) == "" || w.Location.Upto(l) != home) {
					continue
				}
				if sliceAt != nil && (w.Location.At(sliceLevel) == "" || w.Location.Upto(sliceLevel) != *sliceAt) {
					continue
				}
				cands = append(cands, *w)
			}
			d := Schedule(one, cands, pick)
			if d.Status != StatusPlaced {
				break
			}
			p := d.Workers[0]
			p.NodeRank = rank
			nodes = append(nodes, p)
			taken[p.Worker] = true
			mates[rank] = p.Location
		}
		if len(nodes) == len(lost) {
			return Swap{OK: true, Level: l, Location: home, Nodes: nodes}
		}
	}
	return Swap{Why: fmt.Sprintf("no free machine near the surviving nodes (up to the %s level) holds %s", to, nodeWords(len(lost)))}
}

// sharedLevel is the tightest level every worker shares a value at.
func sharedLevel(ws []*Worker) Level {
	for l := tightest; l < LevelAny; l++ {
		home := ws[0].Location.Upto(l)
		if ws[0].Location.At(l) == "" {
			continue
		}
		same := true
		for _, w := range ws[1:] {
			if w.Location.At(l) == "" || w.Location.Upto(l) != home {
				same = false
				break
			}
		}
		if same {
			return l
		}
	}
	return LevelAny
}

// sameKey says w shares with k every property of compatible (the torch
// version when it is empty).
func sameKey(w, k *Worker, compatible []string) bool {
	if len(compatible) == 0 {
		compatible = defaultCompatible
	}
	for _, c := range compatible {
		switch {
		case c == CompatTorch && w.TorchVersion != k.TorchVersion,
			c == CompatCUDADriver && w.CUDADriver != k.CUDADriver,
			c == CompatGPUModel && w.GPUModel != k.GPUModel:
			return false
		}
	}
	return true
}

func nodeWords(n int) string {
	if n == 1 {
		return "the lost node"
	}
	return fmt.Sprintf("the %d lost nodes", n)
}

package reconcile

import (
	"fmt"
	"slices"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/placement"
	"github.com/gpulayer/gpulayer/topology"
)

// SwapReport says a restart keeps the nodes that survived a lost machine
// on their machines and GPUs, and replaces only the lost ones, next to
// them (docs/lifecycle.md, "Hot swap").
type SwapReport struct {
	// Kept are the ranks of the surviving nodes; Nodes the replacements.
	Kept  []int         `json:"kept"`
	Nodes []SwappedNode `json:"nodes"`
	// Level and Location are the group the survivors and replacements
	// share: the tightest level that held a replacement.
	Level    placement.Level    `json:"level"`
	Location placement.Location `json:"location"`
}

// SwappedNode is one lost node and the machine that replaces it; it keeps
// the node's rank.
type SwappedNode struct {
	Rank int `json:"rank"`
	// Lost is the host the node ran on; Host the one it runs on now.
	Lost string `json:"lost"`
	Host string `json:"host"`
}

// swapCandidate says whether a verdict's restart may keep its survivors: a
// gang that lost machines (not processes on machines that answer), and not
// all of them, restarted by on_lost.
func swapCandidate(v *verdict) bool {
	return v.place && v.run != nil && v.run.Restart && v.run.Budget == "on_lost" &&
		len(v.lostRanks) > 0 && v.prior != nil && len(v.lostRanks) < len(v.prior.Nodes)
}

// hotSwaps replaces the lost nodes of the gangs that lost machines, before
// the rest of the jobs are placed (they are jobs in state, which go first
// anyway): each survivor keeps its machine and GPUs, taken from workers
// here, and each lost node gets a machine next to them. A gang whose lost
// nodes cannot all be replaced so is left to ScheduleAll, as a whole.
func (pl *planner) hotSwaps(workers []placement.Worker) map[string]placement.Decision {
	out := map[string]placement.Decision{}
	at := make(map[string]int, len(workers))
	for i := range workers {
		at[workers[i].ID] = i
	}
	for _, v := range pl.verdicts {
		v.swap = nil
		if !swapCandidate(v) {
			continue
		}
		var survivors []placement.Survivor
		lostHost := map[int]string{}
		for _, n := range v.prior.Nodes {
			if slices.Contains(v.lostRanks, n.Rank) {
				lostHost[n.Rank] = n.Host
				continue
			}
			survivors = append(survivors, placement.Survivor{NodeRank: n.Rank, Worker: n.Host, GPUs: n.GPUs})
		}
		job := placement.Job{Name: v.name, Nodes: v.spec.Nodes, GPUsPerNode: v.spec.GPUsPerNode, Torchrun: v.spec.Launcher == config.LauncherTorchrun}
		s := placement.ReplaceNodes(job, Policy(v.spec.Policy), workers, survivors, v.lostRanks)
		if !s.OK {
			v.swapWhy = s.Why
			continue
		}
		v.swapWhy = ""
		rep := &SwapReport{Kept: []int{}, Level: s.Level, Location: s.Location}
		d := placement.Decision{Job: v.name, Status: placement.StatusPlaced, Level: s.Level, Location: s.Location}
		for _, sv := range survivors {
			w := &workers[at[sv.Worker]]
			p := placement.Placement{NodeRank: sv.NodeRank, Worker: sv.Worker, GPUs: slices.Clone(sv.GPUs), Location: w.Location, LocationTrusted: w.LocationTrusted}
			// State records GPUs ascending; the launch lists them in
			// local-rank order, as for any placement.
			topology.OrderLocalRanks(w.Matrix, p.GPUs)
			if h := pl.hosts[sv.Worker]; h != nil && h.facts != nil {
				p.Bottleneck = bottleneckOf(h.facts.Topology, sv.GPUs)
			}
			d.Workers = append(d.Workers, p)
			rep.Kept = append(rep.Kept, sv.NodeRank)
		}
		for _, p := range s.Nodes {
			d.Workers = append(d.Workers, p)
			rep.Nodes = append(rep.Nodes, SwappedNode{Rank: p.NodeRank, Lost: lostHost[p.NodeRank], Host: p.Worker})
		}
		slices.SortFunc(d.Workers, func(a, b placement.Placement) int { return a.NodeRank - b.NodeRank })
		if len(d.Workers) > 0 {
			d.TorchVersion = workers[at[d.Workers[0].Worker]].TorchVersion
		}
		// The gang's GPUs are its own from here: no later job is placed
		// on them.
		for _, p := range d.Workers {
			w := &workers[at[p.Worker]]
			w.Free &^= topology.DeviceSetOf(p.GPUs...)
			w.RunningTasks++
		}
		d.Summary = swapSummary(rep)
		v.swap = rep
		out[v.name] = d
	}
	return out
}

// swapSummary is "kept nodes 0, 2 on their machines; node 1 replaced in
// network group r1".
func swapSummary(s *SwapReport) string {
	var ranks []int
	for _, n := range s.Nodes {
		ranks = append(ranks, n.Rank)
	}
	return fmt.Sprintf("hot swap: %s %s kept on %s; %s %s replaced in %s",
		plural(len(s.Kept), "node", "nodes"), topology.FormatList(s.Kept), plural(len(s.Kept), "its machine and GPUs", "their machines and GPUs"),
		plural(len(ranks), "node", "nodes"), topology.FormatList(ranks), swapWhere(s.Level, s.Location))
}

// swapWhere is "network group r1", "zone eu-1", or "any location".
func swapWhere(l placement.Level, loc placement.Location) string {
	if l == placement.LevelAny {
		return "any location"
	}
	return levelWords(l) + " " + loc.At(l)
}

// swapReasons are the node_replaced reasons of a swap: `replace node 2:
// machine gpu-07 lost; gpu-11 joins the survivors in network group
// rack-3`.
func swapReasons(s *SwapReport) []Reason {
	var out []Reason
	for _, n := range s.Nodes {
		rank := n.Rank
		out = append(out, Reason{Code: ReasonNodeReplaced, Node: &rank, Host: n.Host,
			Message: fmt.Sprintf("replace node %d: machine %s lost; %s joins the survivors in %s", n.Rank, n.Lost, n.Host, swapWhere(s.Level, s.Location))})
	}
	return out
}

package reconcile

import (
	"cmp"
	"slices"
	"strings"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/placement"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/topology"
)

// Cost is the plan's estimate of what a new placement's links cost
// (docs/plan.md): the slowest link between the GPUs of a node, the link
// between its machines by the tightest level they all share, and the
// tighter groups the scheduler passed over, each with what kept the job
// out of it. The bandwidths are estimates from documented defaults and
// the fleets' link_bandwidth blocks, not measurements.
type Cost struct {
	// Inside is the slowest link inside a node; nil for nodes of one GPU
	// (or none) or without link data.
	Inside *InsideCost `json:"inside_nodes,omitempty"`
	// Between is the link between the nodes; nil for a one-node job.
	Between *BetweenCost `json:"between_nodes,omitempty"`
	// Slowest is "inside_nodes" or "between_nodes", whichever is slower;
	// "" when only one is known, or neither.
	Slowest string `json:"slowest,omitempty"`
	// Rejected are the tighter groups not taken, tightest level first,
	// at most maxRejectedPerLevel per level, closest to holding the job
	// first.
	Rejected []RejectedOption `json:"rejected_tighter,omitempty"`
}

// InsideCost is the slowest link between the GPUs of any node.
type InsideCost struct {
	Link string `json:"link"` // "NV12", "SYS"
	Host string `json:"host"` // the first node (by rank) with it
	// GPUModel is that node's GPUs' model; Over what carries the link for
	// that model ("NVLink3", "PCIe gen4"), and Bandwidth its estimate in
	// one direction; both empty when the model's generation is unknown.
	GPUModel  string            `json:"gpu_model,omitempty"`
	Over      string            `json:"over,omitempty"`
	Bandwidth *config.Bandwidth `json:"bandwidth,omitempty"`
}

// BetweenCost is the link between a placement's machines.
type BetweenCost struct {
	// Level is the tightest level every node shares ("any": the nodes
	// span regions, or report no region).
	Level     placement.Level  `json:"level"`
	Bandwidth config.Bandwidth `json:"bandwidth"`
	// Fleet names the fleet whose link_bandwidth block set Bandwidth
	// (the lowest of the nodes' fleets'); "" for the default.
	Fleet string `json:"fleet,omitempty"`
}

// RejectedOption is a group at a level tighter than the placement's that
// could not hold the job: the best of its level by free, then eligible
// workers.
type RejectedOption struct {
	Level    placement.Level    `json:"level"`
	Location placement.Location `json:"location"`
	Free     int                `json:"free"`     // machines free enough now
	Eligible int                `json:"eligible"` // compatible machines, free or not
	Needed   int                `json:"needed"`
	// Incompatible counts the free machines at the same location that
	// another value of a compatible property keeps out of this group
	// (torch_version, cuda_driver, gpu_model: the first that differs).
	Incompatible []placement.Exclusion `json:"incompatible,omitempty"`
	// HeldBy are what holds its machines that are not free: jobs of this
	// configuration (kept, or placed earlier in this plan), claims of
	// other configurations, processes gpulayer did not start; at most
	// maxHolders, each naming at most maxHolderHosts hosts.
	HeldBy []Holder `json:"held_by,omitempty"`
}

// Holder is one thing holding GPUs of a rejected group's machines.
type Holder struct {
	// Kind is "job" (Job names it), "other_configuration" or
	// "other_processes".
	Kind  string   `json:"kind"`
	Job   string   `json:"job,omitempty"`
	Hosts []string `json:"hosts"`
	// More counts the hosts beyond those listed.
	More int `json:"more,omitempty"`
}

// Holder kinds.
const (
	HolderJob        = "job"
	HolderOtherState = "other_configuration"
	HolderProcesses  = "other_processes"
)

// Bounds of the rejected options: a plan over thousands of machines says
// the few that matter.
const (
	maxRejectedPerLevel = 2
	maxHolders          = 3
	maxHolderHosts      = 3
)

// DefaultLinkBandwidth is the bandwidth assumed between two machines by
// the tightest level they share, unless a fleet's link_bandwidth block
// says otherwise (docs/plan.md gives where each comes from).
var DefaultLinkBandwidth = map[placement.Level]config.Bandwidth{
	placement.LevelNVLinkDomain: {BitsPerSecond: 900 * 8e9, Unit: "GB/s"}, // GB200 NVL72: 18 NVLink5 links per GPU
	placement.LevelNetworkGroup: {BitsPerSecond: 400e9, Unit: "Gb/s"},     // one 400G NIC (NDR InfiniBand, 400GbE)
	placement.LevelZone:         {BitsPerSecond: 200e9, Unit: "Gb/s"},     // between racks of one zone, oversubscribed
	placement.LevelRegion:       {BitsPerSecond: 100e9, Unit: "Gb/s"},     // between zones of a region
	placement.LevelAny:          {BitsPerSecond: 10e9, Unit: "Gb/s"},      // between regions, over the WAN
}

// scheduled is what the last placement pass saw, for the costs of its
// placements: the workers before any job took GPUs, and the requests'
// job names in the order they were placed.
type scheduled struct {
	workers []placement.Worker
	order   []string
	// holders, built on first use, are per host what holds its GPUs
	// before the pass; takenIn, per host, the jobs of the pass placed on
	// it, in pass order, with the GPUs each took.
	holders map[string][]Holder
	takenIn map[string][]taken
}

// taken is a job of the pass placed on a host: its index in order and
// how many of the host's GPUs it took.
type taken struct{ job, gpus int }

// cost is a placed decision's cost, from the last pass's workers.
func (pl *planner) cost(d placement.Decision, p *Placement, pol placement.Policy, gpn int, decisions map[string]placement.Decision) *Cost {
	c := &Cost{Inside: pl.insideCost(p), Between: pl.betweenCost(p)}
	if c.Inside != nil && c.Inside.Bandwidth != nil && c.Between != nil {
		c.Slowest = "between_nodes"
		if c.Inside.Bandwidth.BitsPerSecond < c.Between.Bandwidth.BitsPerSecond {
			c.Slowest = "inside_nodes"
		}
	}
	c.Rejected = pl.rejected(d, pol, gpn, decisions)
	if c.Inside == nil && c.Between == nil && c.Rejected == nil {
		return nil
	}
	return c
}

// insideCost is the slowest known link inside a node: of the nodes whose
// GPU generation is known, the lowest bandwidth; when none is known, the
// lowest-scored link.
func (pl *planner) insideCost(p *Placement) *InsideCost {
	var best *InsideCost
	bestScore := 0
	for _, n := range p.Nodes {
		if n.Bottleneck == "" {
			continue
		}
		l, err := topology.ParseLink(n.Bottleneck)
		if err != nil {
			continue
		}
		model := ""
		if h := pl.hosts[n.Host]; h != nil && h.facts != nil {
			model = gpuModel(h.facts)
		}
		ic := &InsideCost{Link: l.String(), Host: n.Host, GPUModel: model}
		// A machine of several models (their names joined by " + ") has
		// links of more than one kind: its generation is not one.
		if gen, ok := topology.GenerationOf(model); ok && !strings.Contains(model, " + ") {
			if gbps, over := topology.LinkBandwidth(l, gen); gbps > 0 {
				ic.Over, ic.Bandwidth = over, &config.Bandwidth{BitsPerSecond: gbps * 8e9, Unit: "GB/s"}
			}
		}
		switch {
		case best == nil:
		case ic.Bandwidth != nil && best.Bandwidth != nil:
			if ic.Bandwidth.BitsPerSecond >= best.Bandwidth.BitsPerSecond {
				continue
			}
		case best.Bandwidth != nil:
			continue // a known bandwidth says more than an unknown one
		case ic.Bandwidth == nil && l.Score() >= bestScore:
			continue
		}
		best, bestScore = ic, l.Score()
	}
	return best
}

// betweenCost is the link between the nodes: the tightest level they all
// share and its bandwidth, the lowest of the nodes' fleets' (a fleet
// without a link_bandwidth value there takes the default).
func (pl *planner) betweenCost(p *Placement) *BetweenCost {
	if len(p.Nodes) < 2 {
		return nil
	}
	level := placement.LevelAny
	for l := placement.LevelNVLinkDomain; l < placement.LevelAny; l++ {
		if shared(p.Nodes, l) {
			level = l
			break
		}
	}
	// The lowest of the nodes' fleets' values: a link is as fast as its
	// slower end says. The default wins ties, then the first fleet.
	bc := &BetweenCost{Level: level}
	first := true
	var seen []*config.Fleet // a job's nodes are in few fleets
	for _, n := range p.Nodes {
		h := pl.hosts[n.Host]
		if h == nil || h.fleet == nil || slices.Contains(seen, h.fleet) {
			continue
		}
		seen = append(seen, h.fleet)
		bw, fleet := DefaultLinkBandwidth[level], ""
		if lb := h.fleet.LinkBandwidth; lb != nil {
			if v, ok := lb.ByLevel[level.String()]; ok {
				bw, fleet = v, h.fleet.Name
			}
		}
		if first || bw.BitsPerSecond < bc.Bandwidth.BitsPerSecond || bw.BitsPerSecond == bc.Bandwidth.BitsPerSecond && fleet == "" {
			bc.Bandwidth, bc.Fleet, first = bw, fleet, false
		}
	}
	if first {
		bc.Bandwidth = DefaultLinkBandwidth[level]
	}
	return bc
}

// rejected lists, for each level tried before the one the job was placed
// at, the groups closest to holding it and what holds their busy
// machines.
func (pl *planner) rejected(d placement.Decision, pol placement.Policy, gpn int, decisions map[string]placement.Decision) []RejectedOption {
	levels := d.Explanation.Levels
	if len(levels) < 2 || d.Job == "" {
		return nil
	}
	var out []RejectedOption
	keys := compatKeys(pol)
	for _, lv := range levels[:len(levels)-1] {
		idx := make([]int, len(lv.Buckets))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int {
			x, y := &lv.Buckets[a], &lv.Buckets[b]
			return cmp.Or(cmp.Compare(y.Free, x.Free), cmp.Compare(y.Eligible, x.Eligible))
		})
		var listed []placement.Location
		for _, i := range idx {
			b := &lv.Buckets[i]
			// One line per place: another bucket at the same location
			// (another torch version) is counted in Incompatible.
			if len(listed) == maxRejectedPerLevel || slices.Contains(listed, b.Location) {
				continue
			}
			listed = append(listed, b.Location)
			r := RejectedOption{Level: lv.Level, Location: b.Location, Free: b.Free, Eligible: b.Eligible, Needed: b.Needed,
				Incompatible: incompatible(lv.Buckets, i)}
			if b.Free < b.Eligible {
				r.HeldBy = pl.heldBy(d.Job, gpn, lv.Level, b, keys, decisions)
			}
			out = append(out, r)
		}
	}
	return out
}

// incompatible counts, by the first compatible property that differs, the
// free workers of the other buckets at bucket i's location.
func incompatible(bs []placement.BucketExplanation, i int) []placement.Exclusion {
	var n [3]int
	me := &bs[i]
	for j := range bs {
		o := &bs[j]
		if j == i || o.Free == 0 || o.Location != me.Location {
			continue
		}
		switch {
		case o.TorchVersion != me.TorchVersion:
			n[0] += o.Free
		case o.CUDADriver != me.CUDADriver:
			n[1] += o.Free
		case o.GPUModel != me.GPUModel:
			n[2] += o.Free
		}
	}
	var out []placement.Exclusion
	for p, reason := range [3]placement.Reason{placement.ReasonTorchVersion, placement.ReasonCUDADriver, placement.ReasonGPUModel} {
		if n[p] > 0 {
			out = append(out, placement.Exclusion{Reason: reason, Workers: n[p]})
		}
	}
	return out
}

// compatKeys is which of torch, CUDA driver and GPU model the policy's
// groups share.
func compatKeys(pol placement.Policy) [3]bool {
	props := pol.Compatible
	if len(props) == 0 {
		props = []string{placement.CompatTorch}
	}
	return [3]bool{slices.Contains(props, placement.CompatTorch), slices.Contains(props, placement.CompatCUDADriver), slices.Contains(props, placement.CompatGPUModel)}
}

// heldBy is what holds the machines of bucket b (at level) that job, of
// gpn GPUs per node, could not take: for each machine with fewer than gpn
// GPUs free at the job's turn, the jobs and others holding GPUs on it
// before the pass, and the jobs placed on it earlier in the pass.
func (pl *planner) heldBy(job string, gpn int, level placement.Level, b *placement.BucketExplanation, keys [3]bool, decisions map[string]placement.Decision) []Holder {
	s := &pl.sched
	if s.holders == nil {
		pl.buildHolders(decisions)
	}
	me := slices.Index(s.order, job)
	var out []Holder
	add := func(h Holder, host string) {
		for i := range out {
			if out[i].Kind == h.Kind && out[i].Job == h.Job {
				if len(out[i].Hosts) < maxHolderHosts {
					out[i].Hosts = append(out[i].Hosts, host)
				} else {
					out[i].More++
				}
				return
			}
		}
		if len(out) < maxHolders {
			out = append(out, Holder{Kind: h.Kind, Job: h.Job, Hosts: []string{host}})
		}
	}
	for i := range s.workers {
		w := &s.workers[i]
		if w.Location.At(level) == "" || w.Location.Upto(level) != b.Location ||
			keys[0] && w.TorchVersion != b.TorchVersion || keys[1] && w.CUDADriver != b.CUDADriver || keys[2] && w.GPUModel != b.GPUModel {
			continue
		}
		free := (w.Free & topology.AllDevices(min(w.GPUs, topology.MaxGPUs))).Len()
		for _, t := range s.takenIn[w.ID] {
			if t.job < me {
				free -= t.gpus
			}
		}
		if free >= gpn {
			continue // free enough at the job's turn: nothing holds it
		}
		for _, h := range s.holders[w.ID] {
			add(h, w.ID)
		}
		for _, t := range s.takenIn[w.ID] {
			if t.job < me {
				add(Holder{Kind: HolderJob, Job: s.order[t.job]}, w.ID)
			}
		}
	}
	return out
}

// buildHolders indexes what holds each host's GPUs before the pass (jobs
// kept running, other configurations' claims, processes gpulayer did not
// start) and the jobs the pass placed on each.
func (pl *planner) buildHolders(decisions map[string]placement.Decision) {
	s := &pl.sched
	s.holders, s.takenIn = map[string][]Holder{}, map[string][]taken{}
	for _, v := range pl.verdicts {
		if v.prior == nil || !v.keep || v.ended {
			continue
		}
		for _, n := range v.prior.Nodes {
			if !slices.ContainsFunc(s.holders[n.Host], func(h Holder) bool { return h.Job == v.name }) {
				s.holders[n.Host] = append(s.holders[n.Host], Holder{Kind: HolderJob, Job: v.name})
			}
		}
	}
	for _, name := range pl.hostNames {
		h := pl.hosts[name]
		if !h.usable() {
			continue
		}
		if len(claimedByOthers(h.facts, pl.st.Lineage)) > 0 {
			s.holders[name] = append(s.holders[name], Holder{Kind: HolderOtherState})
		}
		for _, g := range h.facts.GPUs {
			if slices.ContainsFunc(g.Processes, func(p facts.Process) bool { return p.RunID == "" }) {
				s.holders[name] = append(s.holders[name], Holder{Kind: HolderProcesses})
				break
			}
		}
	}
	for j, name := range s.order {
		d, ok := decisions[name]
		if !ok || d.Status != placement.StatusPlaced {
			continue
		}
		for _, w := range d.Workers {
			s.takenIn[w.Worker] = append(s.takenIn[w.Worker], taken{job: j, gpus: len(w.GPUs)})
		}
	}
}

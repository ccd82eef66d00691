package reconcile

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/placement"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/topology"
)

// place frees and holds GPUs as the verdicts say, places the jobs to place
// in one ScheduleAll pass, and writes every job's change.
func (pl *planner) place() {
	var decisions map[string]placement.Decision
	for {
		decisions = pl.schedule()
		// A healthy job replaced only for its configuration keeps running
		// when its new shape cannot be placed; place the rest again
		// without freeing its GPUs.
		again := false
		for _, v := range pl.verdicts {
			if v.place && v.prior != nil && v.healthy && onlyConfigChanged(v.reasons) &&
				decisions[v.name].Status != placement.StatusPlaced {
				d := decisions[v.name]
				v.place, v.keep, v.unplaced = false, true, &d
				again = true
			}
		}
		if !again {
			again = pl.waits(decisions)
		}
		if !again {
			break
		}
	}
	for _, v := range pl.verdicts {
		if v.keep && pl.leftAlone(v.name) {
			continue
		}
		pl.plan.Jobs = append(pl.plan.Jobs, pl.change(v, decisions))
	}
}

func onlyConfigChanged(rs []Reason) bool {
	for _, r := range rs {
		if r.Code != ReasonConfigChanged {
			return false
		}
	}
	return len(rs) > 0
}

// schedule builds the workers (GPUs of jobs that keep running held, those
// of jobs that stop or are replaced freed) and places the jobs to place.
func (pl *planner) schedule() map[string]placement.Decision {
	released := map[string]bool{} // run ids whose GPUs are given back
	held := map[string][]int{}    // host -> GPUs kept jobs hold
	kept := map[string]int{}      // host -> kept job nodes on it
	for _, v := range pl.verdicts {
		if v.prior == nil {
			continue
		}
		if v.keep && !v.ended {
			for _, n := range v.prior.Nodes {
				held[n.Host] = append(held[n.Host], n.GPUs...)
				kept[n.Host]++
			}
		} else if v.prior.RunID != "" {
			released[v.prior.RunID] = true
		}
	}
	var workers []placement.Worker
	domains := domainNames{}
	for _, name := range pl.hostNames {
		h := pl.hosts[name]
		if _, gone := pl.machineGone[name]; gone || !h.usable() {
			continue
		}
		w := worker(h, released, held[name], kept[name], pl.st.Lineage)
		w.Free &^= pl.promised[name] // held for a job that waits for them (wait.go)
		w.Location.NVLinkDomain = domains.intern(w.Location.NVLinkDomain)
		workers = append(workers, w)
	}
	if pl.mayWait() {
		pl.workers = slices.Clone(workers) // before any GPU is taken
	}
	swapped := pl.hotSwaps(workers)
	// Jobs already in state go first, then new ones; each in name order.
	var reqs []placement.Request
	var order []*verdict
	for pass := 0; pass < 2; pass++ {
		for _, v := range pl.verdicts {
			if _, ok := swapped[v.name]; v.place && !ok && (v.prior != nil) == (pass == 0) {
				reqs = append(reqs, placement.Request{
					Job: placement.Job{Name: v.name, Nodes: v.spec.Nodes, GPUsPerNode: v.spec.GPUsPerNode,
						Torchrun: v.spec.Launcher == config.LauncherTorchrun},
					Policy: Policy(v.spec.Policy),
				})
				order = append(order, v)
			}
		}
	}
	pl.sched = scheduled{workers: workers, order: make([]string, len(order))}
	for i, v := range order {
		pl.sched.order[i] = v.name
	}
	out := swapped
	for i, d := range placement.ScheduleAll(reqs, workers) {
		out[order[i].name] = d
	}
	return out
}

// worker is a usable host as the scheduler sees it. A GPU is free when no
// process uses it, or only processes of released runs, no kept job holds
// it, and no other configuration (another state lineage than lineage)
// claims it on the machine.
func worker(h *host, released map[string]bool, held []int, keptNodes int, lineage string) placement.Worker {
	fh := h.facts
	w := placement.Worker{
		ID:              h.cfg.Name,
		Location:        h.loc,
		LocationTrusted: h.trusted,
		Labels:          h.cfg.Labels,
		TorchVersion:    fh.TorchVersion,
		CUDADriver:      fh.CUDADriverVersion,
		GPUModel:        gpuModel(fh),
		Matrix:          h.matrix,
		GPUs:            len(fh.GPUs),
		RunningTasks:    keptNodes,
		NoTorchrun:      noTorchrun(fh),
	}
	if w.GPUs == 0 {
		w.GPUs = h.matrix.GPUs()
	}
	w.Location.NVLinkDomain = nvlinkDomain(fh)
	free := topology.DeviceSetOf(fh.FreeGPUs...)
	foreign := map[int]bool{}
	for _, g := range fh.GPUs {
		if g.Index < 0 || g.Index >= topology.MaxGPUs {
			continue
		}
		freed := len(g.Processes) > 0
		var releasedMiB int64
		for _, pr := range g.Processes {
			if pr.RunID == "" || !released[pr.RunID] {
				freed = false
				if pr.RunID == "" {
					foreign[pr.PID] = true
				}
			} else {
				releasedMiB += pr.UsedMemoryMiB
			}
		}
		if freed {
			free |= topology.DeviceSetOf(g.Index)
		}
		if free.Has(g.Index) && !slices.Contains(held, g.Index) {
			w.FreeMemoryMiB += max(0, g.MemoryTotalMiB-g.MemoryUsedMiB+releasedMiB)
		}
	}
	for _, i := range held {
		if i >= 0 && i < topology.MaxGPUs {
			free &^= topology.DeviceSetOf(i)
		}
	}
	for _, g := range claimedByOthers(fh, lineage) {
		if free.Has(g) {
			free &^= topology.DeviceSetOf(g)
			w.FreeMemoryMiB -= max(0, gpuAt(fh, g).MemoryTotalMiB-gpuAt(fh, g).MemoryUsedMiB)
		}
	}
	w.Free = free
	w.RunningTasks += len(foreign)
	return w
}

// gpuModel is the model of a host's GPUs as the probe named them
// ("NVIDIA H100 80GB HBM3"); a machine of several models is their names,
// sorted, joined by " + ", so that it matches only machines of the same
// mix; "" without GPUs.
func gpuModel(fh *facts.Host) string {
	one := ""
	for _, g := range fh.GPUs {
		switch {
		case g.Name == "" || g.Name == one:
		case one == "":
			one = g.Name
		default:
			return gpuModels(fh) // a mix; the common case allocates nothing
		}
	}
	return one
}

func gpuModels(fh *facts.Host) string {
	var names []string
	for _, g := range fh.GPUs {
		if g.Name != "" && !slices.Contains(names, g.Name) {
			names = append(names, g.Name)
		}
	}
	slices.Sort(names)
	return strings.Join(names, " + ")
}

// noTorchrun says the host's probe looked for torchrun and found none;
// facts that do not say (a probe that did not ask) let it be placed on,
// as before gpulayer asked.
func noTorchrun(fh *facts.Host) bool { return fh.Torchrun != nil && *fh.Torchrun == "" }

// torchrunWarnings name the usable hosts without torchrun when a job to
// place runs under it: the plan leaves them out of its placements
// (no_torchrun), and says which they are, as the exclusion counts do not.
func (pl *planner) torchrunWarnings() {
	var jobs []string
	for _, v := range pl.verdicts {
		if v.place && v.spec.Launcher == config.LauncherTorchrun {
			jobs = append(jobs, fmt.Sprintf("%q", v.name))
		}
	}
	if len(jobs) == 0 {
		return
	}
	which := "job " + jobs[0]
	if len(jobs) > 1 {
		which = "jobs " + strings.Join(jobs, ", ")
	}
	for _, name := range pl.hostNames {
		if h := pl.hosts[name]; h.usable() && noTorchrun(h.facts) {
			pl.plan.Warnings = append(pl.plan.Warnings, fmt.Sprintf("host %s: no torchrun on the PATH; torchrun jobs are not placed on it (%s)", name, which))
		}
	}
}

// claimedByOthers are the GPUs of a host that a live claim of another
// configuration than lineage holds, ascending.
func claimedByOthers(fh *facts.Host, lineage string) []int {
	var out []int
	for _, g := range fh.GPUs {
		if g.Claim != nil && (lineage == "" || g.Claim.Lineage != lineage) {
			out = append(out, g.Index)
		}
	}
	slices.Sort(out)
	return out
}

// claimWarnings say, per usable host, which GPUs other configurations
// claim: the plan leaves them alone, and says why.
func (pl *planner) claimWarnings() {
	for _, name := range pl.hostNames {
		h := pl.hosts[name]
		if !h.usable() {
			continue
		}
		byOwner := map[string][]int{}
		var owners []string
		for _, i := range claimedByOthers(h.facts, pl.st.Lineage) {
			c := gpuAt(h.facts, i).Claim
			owner := fmt.Sprintf("job %q of another configuration (state %s, run %s, pid %d)", c.Job, c.Lineage, c.RunID, c.PID)
			if _, ok := byOwner[owner]; !ok {
				owners = append(owners, owner)
			}
			byOwner[owner] = append(byOwner[owner], i)
		}
		for _, o := range owners {
			pl.plan.Warnings = append(pl.plan.Warnings, fmt.Sprintf("host %s: GPU %s claimed by %s; not placed on", name, topology.FormatList(byOwner[o]), o))
		}
	}
}

// change writes a job's part of the plan from its verdict and decision.
func (pl *planner) change(v *verdict, decisions map[string]placement.Decision) JobChange {
	c := JobChange{
		Job:         v.name,
		Reasons:     v.reasons,
		Nodes:       v.spec.Nodes,
		GPUsPerNode: v.spec.GPUsPerNode,
		Launcher:    v.spec.Launcher,
		Policy:      v.spec.Policy.Name,
	}
	if c.Reasons == nil {
		c.Reasons = []Reason{}
	}
	if v.cfg != nil {
		c.ConfigHash = v.spec.Hash()
	}
	if v.prior != nil {
		c.Prior = pl.prior(v)
	}
	c.Run = v.run
	c.Wait, c.Swap = v.wait, v.swap
	if v.swapWhy != "" {
		pl.plan.Warnings = append(pl.plan.Warnings, fmt.Sprintf("job %q: its lost %s cannot be replaced next to the nodes that survived (%s); the whole job is placed again",
			v.name, plural(len(v.lostRanks), "node", "nodes"), v.swapWhy))
	}
	switch {
	case v.cfg == nil:
		c.Action, c.StopPrior = ActionDestroy, true
	case v.stopOnly:
		// The run ended (or its restart waits out a delay): what may
		// still run of it is stopped, and the job kept as it ended.
		c.Action, c.StopPrior = ActionStop, true
		if v.run != nil {
			c.Reasons = append(c.Reasons, Reason{Code: ReasonRunEnded, Message: runEndWords(v.run)})
		}
	case v.wait != nil && v.wait.Waiting:
		pl.waitingChange(&c, v)
	case v.keep && v.ended:
		c.Action = ActionNoOp
	case v.keep && v.unplaced != nil:
		// Waiting for its new configuration, running its old one.
		c.Action = ActionWaiting
		c.Placement = pl.recordedPlacement(v)
		expl := v.unplaced.Explanation
		c.Decision = &Decision{Status: v.unplaced.Status, Summary: v.unplaced.Summary, Explanation: &expl}
		c.Reasons = append(c.Reasons, Reason{Code: ReasonUnschedulableNow,
			Message: v.unplaced.Summary + "; the job keeps running as it was launched"})
	case v.keep:
		c.Action = ActionNoOp
		c.Placement = pl.recordedPlacement(v)
	default:
		d := decisions[v.name]
		c.Decision = &Decision{Status: d.Status, Summary: d.Summary}
		switch d.Status {
		case placement.StatusPlaced:
			c.Action = ActionCreate
			if v.prior != nil {
				c.Action, c.StopPrior = ActionReplace, true
			}
			c.Placement = pl.newPlacement(d)
			if v.swap != nil {
				c.Reasons = append(c.Reasons, swapReasons(v.swap)...)
			}
			if v.wait != nil {
				c.Reasons = append(c.Reasons, placedNowReason(v.wait, d.Level, pl.in.Now))
			}
			c.Placement.Cost = pl.cost(d, c.Placement, Policy(v.spec.Policy), v.spec.GPUsPerNode, decisions)
		default:
			expl := d.Explanation
			c.Decision.Explanation = &expl
			// A run that ended was stopped when it ended: a restart
			// that waits has nothing left to stop.
			c.Action, c.StopPrior = ActionWaiting, v.prior != nil && !v.prior.Ended()
			code := ReasonUnschedulableNow
			if d.Status == placement.StatusFailed {
				c.Action, code = ActionFailed, ReasonUnschedulable
			}
			if v.prior == nil {
				c.Reasons = nil // "not running yet" says nothing the wait does not
			}
			c.Reasons = append(c.Reasons, Reason{Code: code, Message: d.Summary})
		}
	}
	return c
}

// prior is what state records of a job, with the refresh's liveness.
func (pl *planner) prior(v *verdict) *PriorJob {
	j := v.prior
	out := &PriorJob{Status: j.Status, RunID: j.RunID, ConfigHash: j.ConfigHash, Nodes: []PriorNode{}}
	for i, n := range j.Nodes {
		pn := PriorNode{Rank: n.Rank, Host: n.Host, Address: n.Address, GPUs: slices.Clone(n.GPUs)}
		if n.Process != nil {
			pn.PID = n.Process.PID
		}
		if i < len(v.alive) {
			pn.Alive = v.alive[i]
		}
		out.Nodes = append(out.Nodes, pn)
	}
	return out
}

// recordedPlacement is a kept job's placement as state records it, with
// links and NUMA from the current facts where the host has them.
func (pl *planner) recordedPlacement(v *verdict) *Placement {
	out := &Placement{Level: placement.LevelAny, Nodes: []PlacedNode{}}
	for i, n := range v.prior.Nodes {
		pn := PlacedNode{
			Rank: n.Rank, Host: n.Host, Fleet: n.Fleet, Address: n.Address, Port: n.Port,
			GPUs: slices.Clone(n.GPUs), GPUUUIDs: slices.Clone(n.GPUUUIDs),
			Location: placement.Location{Region: n.Location.Region, Zone: n.Location.Zone, NetworkGroup: n.Location.NetworkGroup},
		}
		if h := pl.hosts[n.Host]; h != nil {
			pn.LocationTrusted = h.trusted
			// State records no domain: the host's facts now say it.
			pn.Location.NVLinkDomain = nvlinkDomain(h.facts)
			if h.facts != nil {
				pn.Bottleneck = bottleneckOf(h.facts.Topology, n.GPUs)
				pn.NUMA = numaOf(h.facts.Topology, n.GPUs)
			}
		}
		out.Nodes = append(out.Nodes, pn)
		if i == 0 {
			out.Location = pn.Location
		}
	}
	// The level is the tightest every node shares.
	for _, l := range []placement.Level{placement.LevelNVLinkDomain, placement.LevelNetworkGroup, placement.LevelZone, placement.LevelRegion} {
		if shared(out.Nodes, l) {
			out.Level = l
			out.Location = out.Location.Upto(l)
			return out
		}
	}
	out.Location = placement.Location{}
	return out
}

func shared(nodes []PlacedNode, l placement.Level) bool {
	if len(nodes) == 0 || nodes[0].Location.At(l) == "" {
		return false
	}
	for _, n := range nodes[1:] {
		if n.Location.Upto(l) != nodes[0].Location.Upto(l) {
			return false
		}
	}
	return true
}

// newPlacement is a placed decision with each node's host, address and
// GPU details.
func (pl *planner) newPlacement(d placement.Decision) *Placement {
	out := &Placement{Level: d.Level, Location: d.Location.Upto(d.Level), TorchVersion: d.TorchVersion, Nodes: []PlacedNode{}}
	for _, w := range d.Workers {
		h := pl.hosts[w.Worker]
		gpus := slices.Clone(w.GPUs) // in local-rank order: CUDA_VISIBLE_DEVICES lists them so
		n := PlacedNode{
			Rank: w.NodeRank, Host: w.Worker, Fleet: h.fleet.Name,
			Address: h.cfg.Address, Port: h.cfg.Port,
			GPUs: gpus, GPUUUIDs: gpuUUIDs(h.facts, gpus),
			Bottleneck: w.Bottleneck, NUMA: numaOf(h.facts.Topology, gpus),
			Location: w.Location, LocationTrusted: w.LocationTrusted,
		}
		out.Nodes = append(out.Nodes, n)
	}
	return out
}

// summarize counts the changes.
func (pl *planner) summarize() {
	pl.plan.Summary = summaryOf(pl.plan)
}

// summaryOf counts a plan's changes; the leftovers to stop are counted
// where they are planned, and kept.
func summaryOf(p *Plan) Summary {
	s := Summary{Leftovers: p.Summary.Leftovers}
	for _, c := range p.Jobs {
		switch c.Action {
		case ActionNoOp:
			s.NoOp++
		case ActionCreate:
			s.Launch++
		case ActionReplace:
			s.Replace++
		case ActionDestroy, ActionStop:
			s.Stop++
		case ActionWaiting:
			s.Waiting++
		case ActionFailed:
			s.Failed++
		}
	}
	for _, f := range p.Fleets {
		for _, m := range f.Machines {
			switch m.Action {
			case ActionCreate:
				s.CreateMachines++
			case ActionDestroy:
				s.DeleteMachines++
			case ActionReplace:
				s.CreateMachines++
				s.DeleteMachines++
			}
		}
	}
	return s
}

package reconcile

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/placement"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/topology"
)

// Input is everything a plan is made from.
type Input struct {
	Config *config.Config
	// State is what gpulayer did before; nil means none yet.
	State *state.State
	// Facts are what the refresh found; nil means nothing is known of any
	// machine.
	Facts *facts.Document
	// Refresh says where Facts came from (Source and File); MakePlan fills
	// in the rest.
	Refresh Refresh
	// Targets, when not empty, limits the plan to these jobs (names
	// without the "job." prefix); every other job is left as it is and
	// keeps its GPUs.
	Targets []string
	// Version is gpulayer's version, recorded in the plan.
	Version string
	// Destroy plans to stop every job state records, as if none were
	// configured (gpulayer destroy).
	Destroy bool
	// Listed is what each fleet's provider reported at refresh, by fleet;
	// a fleet missing from it was not asked (--refresh=false, --facts),
	// and state's record of its machines is taken as it is.
	Listed map[string]Listing
	// Replace names jobs to launch again whatever their state (--replace
	// job.NAME), their restart budgets reset.
	Replace []string
	// Now is the time the lifecycle pass decides by (restart delays,
	// lost_after, completion_grace, deadlines); zero means time.Now().
	Now time.Time
	// Code is each job's code directory as read now (jobs with a code
	// block), by job name.
	Code map[string]*state.CodeSpec
	// Hold names jobs the plan leaves as they are, holding their GPUs, as
	// --target leaves the jobs it does not name, while fleets and
	// leftovers are planned as without it: gpulayer watch holds the jobs
	// whose changes are the configuration's (Plan.LifecycleOnly), so
	// that a restart is never placed on GPUs only those changes free.
	Hold []string
	// RecreatePreempted replaces (deletes and creates again) a Spot VM
	// its provider reports preempted, rather than leaving it for a person
	// to start: gpulayer watch keeps lost gangs somewhere to run.
	RecreatePreempted bool
}

// MakePlan compares the configuration with state and facts and returns
// what must change. It is pure and deterministic: the same input gives the
// same plan, byte for byte once marshalled.
//
// Jobs are decided in three steps. First each job is classified: a
// configured job not in state is to be launched; a job in state and no
// longer configured is to be stopped; a job in both is kept when nothing
// is wrong with it, and replaced otherwise, with every reason that
// applies. Then the GPUs of the jobs to be stopped or replaced are freed,
// and those of kept jobs held. Last, the jobs to place go through one
// placement.ScheduleAll pass, so no two placements share a GPU: jobs
// already in state first (a replacement keeps its turn ahead of new
// work), then new ones, each group in name order. A job that is replaced
// only because its configuration changed, whose processes all still run,
// and that cannot be placed now keeps running its old configuration until
// it can (no churn); the pass is then made again without it.
func MakePlan(in Input) *Plan {
	st := in.State
	if st == nil {
		st = state.New()
	}
	if in.Now.IsZero() {
		in.Now = time.Now()
	}
	p := &Plan{
		FormatVersion:   PlanFormatVersion,
		GpulayerVersion: in.Version,
		State:           StateRef{Lineage: st.Lineage, Serial: st.Serial},
		Refresh:         in.Refresh,
		Targets:         slices.Clone(in.Targets),
		Jobs:            []JobChange{},
		Leftovers:       []Leftover{},
		Fleets:          []FleetChange{},
		Warnings:        []string{},
		MadeAt:          in.Now.UTC(),
	}
	// Created machines are hosts of their fleets from here on, located by
	// their provider's record as this refresh listed it.
	machines, _ := ListedMachines(st.Machines, in.Listed)
	in.Config = WithMachines(in.Config, machines)
	hosts, hostNames := hostsOf(in.Config, in.Facts)
	p.Refresh.Hosts = len(hostNames)
	p.Refresh.Problems = []HostProblem{}
	for _, n := range hostNames {
		if h := hosts[n]; h.problem != nil {
			p.Refresh.Problems = append(p.Refresh.Problems, *h.problem)
		} else {
			p.Refresh.Usable++
		}
	}

	pl := planner{in: in, st: st, machines: machines, hosts: hosts, hostNames: hostNames, plan: p}
	pl.planFleets()
	pl.claimWarnings()
	pl.classify()
	pl.torchrunWarnings()
	pl.place()
	pl.endedWaits()
	pl.leftovers()
	pl.awaitMachines()
	pl.summarize()
	return p
}

// verdict is a job's classification before placement.
type verdict struct {
	name    string
	cfg     *config.Job // nil: no longer configured
	spec    state.JobSpec
	prior   *state.Job // nil: not in state
	reasons []Reason
	// keep: left as it is (no-op, or not targeted); place: goes through
	// the scheduler.
	keep, place bool
	// healthy says every recorded process still runs on a reachable host
	// (so a replacement that cannot be placed may keep the old one).
	healthy bool
	// alive is the refresh's word on each prior node's process.
	alive []*bool
	// unplaced is the decision that kept a healthy job running its old
	// configuration: its new one could not be placed.
	unplaced *placement.Decision
	// run is the lifecycle pass's report on the job's run (nil when it
	// has nothing to say); ended says the run is over, so it holds no
	// GPU; stopOnly that what may still run of it is stopped, and the job
	// kept in state as it ended.
	run             *RunReport
	ended, stopOnly bool
	// wait is the max_wait decision (wait.go); lostRanks the nodes whose
	// machines the lifecycle pass found lost, swap the hot swap that
	// replaces them, swapWhy why none could (hotswap.go).
	wait      *WaitReport
	lostRanks []int
	swap      *SwapReport
	swapWhy   string
}

type planner struct {
	in Input
	st *state.State
	// machines are state's created machines with the physical records
	// this refresh listed (ListedMachines).
	machines  []state.Machine
	hosts     map[string]*host
	hostNames []string
	plan      *Plan
	verdicts  []*verdict
	// machineGone are the created machines that can hold no job after
	// this plan (deleted, replaced, missing, stopped), with the reason
	// their jobs move; creating, the machines it creates.
	machineGone map[string]Reason
	creating    []creation
	// workers are the workers of the last placement pass, before it
	// placed anything (what a wait estimate starts from); promised, the
	// GPUs the jobs that wait for a tighter group count on (wait.go),
	// which no other job is placed on.
	workers  []placement.Worker
	promised map[string]topology.DeviceSet
	// sched is the last placement pass, for its placements' costs.
	sched scheduled
}

func (pl *planner) targeted(name string) bool {
	return len(pl.in.Targets) == 0 || slices.Contains(pl.in.Targets, name)
}

// leftAlone says the plan leaves job name as it is and out of its
// changes: not targeted, or held.
func (pl *planner) leftAlone(name string) bool {
	return !pl.targeted(name) || slices.Contains(pl.in.Hold, name)
}

// classify decides, for every job named by the configuration or state,
// whether it is launched, kept, replaced or stopped, and why.
func (pl *planner) classify() {
	cfgJobs := map[string]*config.Job{}
	var names []string
	for _, j := range pl.in.Config.Jobs {
		if pl.in.Destroy {
			break
		}
		cfgJobs[j.Name] = j
		names = append(names, j.Name)
	}
	for i := range pl.st.Jobs {
		if _, ok := cfgJobs[pl.st.Jobs[i].Name]; !ok {
			names = append(names, pl.st.Jobs[i].Name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		v := &verdict{name: name, cfg: cfgJobs[name], prior: pl.st.Job(name)}
		if v.cfg != nil {
			v.spec = JobSpec(v.cfg, pl.in.Code[name])
		} else {
			v.spec = v.prior.Spec
		}
		if v.prior != nil {
			v.alive = make([]*bool, len(v.prior.Nodes))
		}
		switch {
		case pl.leftAlone(name):
			v.keep = true
		case v.prior == nil:
			v.place = true
			v.reasons = []Reason{{Code: ReasonNewJob, Message: "not running yet"}}
		case v.cfg == nil:
			msg := "no job \"" + name + "\" is declared any more"
			if pl.in.Destroy {
				msg = "gpulayer destroy stops every job"
			}
			v.reasons = []Reason{{Code: ReasonRemovedFromConfig, Message: msg}}
			pl.checkPrior(v)
		case slices.Contains(pl.in.Replace, name):
			v.place = true
			v.reasons = []Reason{{Code: ReasonReplaceRequested, Message: "--replace job." + name + " launches it again; its restart budgets start over"}}
		case v.spec.Hash() == v.prior.ConfigHash && pl.lifecycle(v):
		default:
			pl.checkPrior(v)
			if len(v.reasons) == 0 {
				v.keep = true
			} else {
				v.place = true
			}
		}
		pl.verdicts = append(pl.verdicts, v)
	}
}

// checkPrior finds what is wrong with a job state records, node by node,
// and notes each recorded process's liveness.
func (pl *planner) checkPrior(v *verdict) {
	j := v.prior
	v.healthy = j.Status == state.JobRunning
	var reasons []Reason
	if v.cfg != nil {
		if hash := v.spec.Hash(); hash != j.ConfigHash {
			fields := state.ChangedFields(j.Spec, v.spec)
			var own []Reason
			fields = slices.DeleteFunc(fields, func(f string) bool {
				switch f {
				case state.FieldCode:
					own = append(own, codeChanged(j.Spec.Code, v.spec.Code))
				case state.FieldSetup:
					own = append(own, Reason{Code: ReasonSetupChanged, Message: setupWords(j.Spec.Setup, v.spec.Setup)})
				default:
					return false
				}
				return true
			})
			if len(fields) > 0 || len(own) == 0 {
				msg := "changed: " + strings.Join(fields, ", ")
				if len(fields) == 0 {
					msg = "the configuration hash differs from the recorded one"
				}
				reasons = append(reasons, Reason{Code: ReasonConfigChanged, Message: msg, Fields: fields})
			}
			reasons = append(reasons, own...)
		}
	}
	if j.Status != state.JobRunning {
		msg := "the last apply left the job " + j.Status
		if j.Error != "" {
			msg += ": " + j.Error
		}
		reasons = append(reasons, Reason{Code: ReasonLaunchIncomplete, Message: msg})
	}
	for i, n := range j.Nodes {
		rank := n.Rank
		at := describeNode(n.Host, rank)
		node := func(code ReasonCode, msg string) Reason {
			return Reason{Code: code, Message: msg, Node: &rank, Host: n.Host}
		}
		h := pl.hosts[n.Host]
		if gone, ok := pl.machineGone[n.Host]; ok {
			gone.Node, gone.Host = &rank, n.Host
			reasons = append(reasons, gone)
			v.healthy = false
			continue
		}
		switch {
		case h == nil:
			reasons = append(reasons, node(ReasonHostRemoved, "host "+at+" is no longer declared"+reachWords(n)))
			v.healthy = false
			continue
		case movedFrom(h, n):
			reasons = append(reasons, node(ReasonAddressChanged, fmt.Sprintf("host %s is now declared at %s, not %s where the run was started%s",
				at, hostPort(h.cfg.Address, h.cfg.Port), hostPort(n.Address, n.Port), reachWords(n))))
			v.healthy = false
			continue
		case h.problem != nil && h.problem.Status == StatusNoFacts:
			pl.plan.Warnings = append(pl.plan.Warnings, fmt.Sprintf("job %q: no facts for host %s; its process is assumed to run", j.Name, at))
			continue
		case h.problem != nil:
			msg := fmt.Sprintf("host %s is %s", at, h.problem.Status)
			if h.problem.Error != "" {
				msg += ": " + h.problem.Error
			}
			reasons = append(reasons, node(ReasonHostUnreachable, msg))
			v.healthy = false
			continue
		}
		if r, alive, known := processState(h.facts, n, at); known {
			v.alive[i] = &alive
			if !alive {
				r.Node, r.Host = &rank, n.Host
				reasons = append(reasons, r)
				v.healthy = false
			}
		} else if n.Process == nil {
			v.healthy = false
		}
		if taken := takenGPUs(h.facts, n.GPUs, j.RunID); len(taken) > 0 {
			reasons = append(reasons, node(ReasonGPUsTaken, fmt.Sprintf("GPU %s on %s used by %s", topology.FormatList(taken), at, foreignWords(h.facts, taken, j.RunID))))
		}
		if now := stateLocation(h.loc); now != n.Location && !locatedSince(h, n.Location) {
			reasons = append(reasons, node(ReasonLocationChanged, fmt.Sprintf("host %s moved from %s to %s", at, locationWords(n.Location), locationWords(now))))
		}
	}
	slices.SortStableFunc(reasons, func(a, b Reason) int { return reasonOrder(a.Code) - reasonOrder(b.Code) })
	v.reasons = append(v.reasons, reasons...)
}

// processState is what the facts say of a node's recorded process: known
// is false when the refresh was not asked about it (a facts document from
// elsewhere) or nothing was started there.
func processState(fh *facts.Host, n state.Node, at string) (r Reason, alive, known bool) {
	p := n.Process
	if p == nil {
		return Reason{}, false, false
	}
	if fh.BootID != "" && p.BootID != "" && fh.BootID != p.BootID {
		return Reason{Code: ReasonProcessExited, Message: fmt.Sprintf("process %d on %s is gone: the machine rebooted", p.PID, at)}, false, true
	}
	for _, got := range fh.PIDs {
		if got.PID != p.PID {
			continue
		}
		switch {
		case !got.Alive:
			r = Reason{Code: ReasonProcessExited, Message: fmt.Sprintf("process %d on %s exited", p.PID, at)}
			if got.ExitStatus != nil {
				status := *got.ExitStatus
				r.ExitStatus = &status
				r.Message += fmt.Sprintf(" with status %d", status)
			}
			if len(got.NotRegular) > 0 {
				r.Message += fmt.Sprintf(" (its %s not a regular file: not read)", notRegularWords(got.NotRegular))
			}
			r.LogTail = slices.Clone(got.LogTail)
			return r, false, true
		case p.StartTime != 0 && got.StartTime != p.StartTime:
			return Reason{Code: ReasonProcessExited, Message: fmt.Sprintf("process %d on %s exited (the pid now belongs to another process)", p.PID, at)}, false, true
		}
		return Reason{}, true, true
	}
	return Reason{}, false, false
}

// notRegularWords names a node's files the probe left unread: "exit file
// is", "log is", "exit file and log are".
func notRegularWords(files []string) string {
	var words []string
	for _, f := range files {
		switch f {
		case facts.NodeFileExit:
			words = append(words, "exit file")
		case facts.NodeFileLog:
			words = append(words, "log")
		}
	}
	switch len(words) {
	case 0:
		return "files are"
	case 1:
		return words[0] + " is"
	}
	return strings.Join(words, " and ") + " are"
}

// takenGPUs are the node's GPUs that run a process of another run than
// runID (or one whose run the probe could not read).
func takenGPUs(fh *facts.Host, gpus []int, runID string) []int {
	var out []int
	for _, i := range gpus {
		g := gpuAt(fh, i)
		if g == nil {
			continue
		}
		for _, pr := range g.Processes {
			if pr.RunID != runID || runID == "" {
				out = append(out, i)
				break
			}
		}
	}
	return out
}

// foreignWords names the processes on GPUs that are not the run's: "pid
// 812" or "pids 812, 990".
func foreignWords(fh *facts.Host, gpus []int, runID string) string {
	var pids []int
	for _, i := range gpus {
		for _, pr := range gpuAt(fh, i).Processes {
			if (pr.RunID != runID || runID == "") && !slices.Contains(pids, pr.PID) {
				pids = append(pids, pr.PID)
			}
		}
	}
	slices.Sort(pids)
	words := make([]string, len(pids))
	for i, p := range pids {
		words[i] = fmt.Sprint(p)
	}
	if len(pids) == 1 {
		return "pid " + words[0]
	}
	return "pids " + strings.Join(words, ", ")
}

func locationWords(l state.Location) string {
	s := placement.Location{Region: l.Region, Zone: l.Zone, NetworkGroup: l.NetworkGroup}.String()
	if s == "" {
		return "no location"
	}
	return s
}

// leftovers lists the runs earlier stops could not finish.
func (pl *planner) leftovers() {
	for _, j := range pl.st.Leftovers {
		if !pl.targeted(j.Name) {
			continue
		}
		l := Leftover{Job: j.Name, RunID: j.RunID, Nodes: []PriorNode{}}
		for _, n := range j.Nodes {
			pn := PriorNode{Rank: n.Rank, Host: n.Host, Address: n.Address, GPUs: n.GPUs}
			if n.Process != nil {
				pn.PID = n.Process.PID
			}
			l.Nodes = append(l.Nodes, pn)
			if h := pl.hosts[n.Host]; (h != nil && h.usable() && !movedFrom(h, n)) || ((h == nil || movedFrom(h, n)) && n.Reach != nil) {
				// A machine no longer declared where the run was
				// started is reached as state recorded it.
				l.Reachable = true
			}
		}
		if l.Reachable {
			pl.plan.Summary.Leftovers++
		} else {
			pl.plan.Warnings = append(pl.plan.Warnings, fmt.Sprintf("run %s of job %q could not be stopped on %s; it is stopped once a host answers",
				j.RunID, j.Name, hostList(j.Nodes)))
		}
		pl.plan.Leftovers = append(pl.plan.Leftovers, l)
	}
}

// movedFrom says whether a declared host now names another address or
// port than the one node n was launched at.
func movedFrom(h *host, n state.Node) bool {
	if h.cfg.Address != n.Address || h.cfg.Port != n.Port {
		return true
	}
	return n.Reach != nil && n.Reach.Port != 0 && !samePort(effectivePort(h), n.Reach.Port)
}

// effectivePort is the port a host is dialed at: its own, its ssh
// block's, or 22.
func effectivePort(h *host) int {
	switch {
	case h.cfg.Port != 0:
		return h.cfg.Port
	case h.fleet != nil && h.fleet.SSH != nil && h.fleet.SSH.Port != 0:
		return h.fleet.SSH.Port
	}
	return 22
}

// reachWords says how the old run is stopped when its host is gone from
// the configuration.
func reachWords(n state.Node) string {
	if n.Reach == nil {
		return "; state has no record of how to reach it, so its run cannot be stopped by gpulayer (written by an older version)"
	}
	return "; its run is stopped there as state recorded it"
}

func hostList(nodes []state.Node) string {
	var hosts []string
	for _, n := range nodes {
		if !slices.Contains(hosts, n.Host) {
			hosts = append(hosts, n.Host)
		}
	}
	return strings.Join(hosts, ", ")
}

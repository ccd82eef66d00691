// Package apply carries out a plan (docs/apply.md): it stops what the plan
// stops and launches what it launches, one process per node over SSH,
// saving state after every step, so that an interrupted or failed apply
// loses nothing and the next plan converges from whatever was done.
package apply

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpulayer/gpulayer/internal/codetree"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/launch"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/ssh"
)

// Defaults of Options.
const (
	// DefaultParallelism bounds the node operations in flight: each is
	// an SSH session that mostly waits (on the machine's script, on the
	// network), so one per node of a 64-node job; the pool's own bound
	// on new connections, and its retries of handshakes sshd drops
	// (MaxStartups), keep the dials within what servers take.
	DefaultParallelism = 64
)

// Options tune an apply.
type Options struct {
	// Parallelism bounds the node operations (starts, stops, checks) in
	// flight at once; 0 means DefaultParallelism.
	Parallelism int
	// Progress, when set, is called for each step of each node, one call
	// at a time.
	Progress func(Event)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// NewRunID makes a run id; nil means a random one.
	NewRunID func() string
	// MachineTimeout bounds one machine's create or delete; 0 means
	// DefaultMachineTimeout.
	MachineTimeout time.Duration
}

// Event is one step of one node, for progress output.
type Event struct {
	Job  string
	Run  string
	Rank int
	Host string
	// Step is one of the Step constants.
	Step   string
	Detail string
}

// Steps of an Event.
const (
	StepStopping = "stopping"
	StepStopped  = "stopped"
	StepStarting = "starting"
	StepStarted  = "started"
	StepRunning  = "running" // confirmed by its start check (start_check)
	StepFailed   = "failed"
	// Before any node starts: its code sent, its setup run.
	StepUploading = "uploading"
	StepUploaded  = "uploaded"
	StepSetup     = "setup"
	StepSetupDone = "setup done"
)

// Job is what apply needs of a job it launches.
type Job struct {
	Spec state.JobSpec
}

// Executor carries out plans.
type Executor struct {
	Runner  probe.Runner
	Backend state.Backend
	// Targets says how to reach each host by name.
	Targets map[string]ssh.Target
	// Specs are the configured jobs' specs by name: what create and
	// replace launch.
	Specs map[string]state.JobSpec
	// Fleets are the fleets of created machines by name, with their
	// providers: what creates and deletes the plan's machines.
	Fleets map[string]Fleet
	// Code are the code directories of the jobs with a code block, by
	// name: what is sent to their machines before they start.
	Code map[string]*codetree.Tree
	Opts Options
}

// Result says what an apply did.
type Result struct {
	Launched, Replaced, Stopped int
	// LeftoversStopped counts the leftover runs of earlier applies that
	// this one stopped in full.
	LeftoversStopped int
	// Failed are the jobs whose launch failed, with why.
	Failed []error
	// CreatedMachines and DeletedMachines count machines; Created names
	// the machines created, whose jobs (those waiting for them) the
	// caller places once they answer. MachineErrors are the machines that
	// could not be created or deleted, with why.
	CreatedMachines, DeletedMachines int
	Created                          []string
	MachineErrors                    []error
	// NotStopped are the runs a stop could not finish (a host did not
	// answer, a process would not die): each is kept in state as a
	// leftover, and stopped by a later apply. A destroy or replace that
	// left one did not do what it was asked.
	NotStopped []*StopError
	// Interrupted says the context was cancelled: the steps in flight were
	// finished and saved, and the rest not started.
	Interrupted bool
	// State is the state as saved at the end.
	State *state.State
}

// ErrInterrupted is returned when ctx was cancelled before every step ran.
var ErrInterrupted = errors.New("apply interrupted; what was done is saved, and the next plan continues from it")

// Apply carries out p against st, which the caller loaded under the state
// lock at the serial p was made from, and saves doc as the facts of the
// last refresh. Cancelling ctx stops starting new steps; the steps in
// flight finish (each bounded by its own timeout) and are saved.
func (e *Executor) Apply(ctx context.Context, st *state.State, p *reconcile.Plan, doc *facts.Document) (*Result, error) {
	// A version that only renewed a watcher's lease since holds what the
	// plan was made from.
	if !st.Holds(p.State.Lineage, p.State.Serial) {
		return nil, fmt.Errorf("saved plan is stale: it was made from state serial %d (lineage %q), and state is now at serial %d (lineage %q); make a new plan",
			p.State.Serial, p.State.Lineage, st.Serial, st.Lineage)
	}
	r := &run{e: e, res: &Result{}, sv: newSaver(e.Backend, st), sem: make(chan struct{}, e.parallelism()), priors: map[string]state.Job{}}
	if doc != nil {
		r.sv.update(func(st *state.State) { st.Facts = doc })
	}
	// What the lifecycle pass saw of runs that change nothing else (an
	// end, a host that stopped answering) is recorded first.
	for _, c := range p.Jobs {
		if c.Run != nil && c.Run.Record && !c.StopPrior && c.Action != reconcile.ActionReplace && c.Action != reconcile.ActionCreate {
			r.record(c)
		}
	}
	// Waits for a tighter group start and end as the plan says (a saved
	// plan's new wait starts when the plan was made: what it showed).
	if p.HasWaitRecords() {
		r.sv.update(func(st *state.State) { reconcile.RecordWaits(st, p) })
	}
	// Leftovers and the jobs the plan stops go first: their GPUs are
	// what replacements and new jobs were placed on.
	each(ctx, p.Leftovers, r.stopLeftover)
	var stops []reconcile.JobChange
	for _, c := range p.Jobs {
		if c.StopPrior && c.Prior != nil {
			stops = append(stops, c)
		}
	}
	each(ctx, stops, r.stopJob)
	// Machines are deleted once the jobs on them are stopped, and created
	// before jobs launch (the jobs waiting for them are placed by the
	// caller once they answer: see Result.Created).
	if ctx.Err() == nil {
		r.res.Created = r.machines(ctx, p)
	}
	var launches []reconcile.JobChange
	for _, c := range p.Jobs {
		if (c.Action == reconcile.ActionCreate || c.Action == reconcile.ActionReplace) && c.Placement != nil {
			launches = append(launches, c)
		}
	}
	each(ctx, launches, r.launchJob)
	err := r.sv.flush()
	r.res.State = r.sv.state()
	if err != nil {
		return r.res, fmt.Errorf("save state to %s: %w", e.Backend, err)
	}
	if ctx.Err() != nil {
		r.res.Interrupted = true
		return r.res, ErrInterrupted
	}
	return r.res, nil
}

func (e *Executor) parallelism() int {
	if e.Opts.Parallelism > 0 {
		return e.Opts.Parallelism
	}
	return DefaultParallelism
}

func (e *Executor) now() time.Time {
	if e.Opts.Now != nil {
		return e.Opts.Now()
	}
	return time.Now()
}

func (e *Executor) newRunID() string {
	if e.Opts.NewRunID != nil {
		return e.Opts.NewRunID()
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "r" + hex.EncodeToString(b[:])
}

// run is one apply in progress.
type run struct {
	e   *Executor
	sv  *saver
	sem chan struct{} // node operations in flight

	mu  sync.Mutex // res, priors and progress
	res *Result
	// priors are the state records of the jobs this apply stopped to
	// replace, by name: their launch keeps their history and, for a
	// restart, their restart counts.
	priors map[string]state.Job
}

// record writes a plan's report on a job's run into state, when state
// still holds that run.
func (r *run) record(c reconcile.JobChange) {
	if c.Prior == nil {
		return
	}
	r.sv.update(func(st *state.State) {
		if j := st.Job(c.Job); j != nil && j.RunID == c.Prior.RunID {
			RecordRun(j, c.Run)
		}
	})
}

// RecordRun writes a run report into the state of its job: the run's
// status once it ended, how its nodes ended, when its hosts stopped
// answering.
func RecordRun(j *state.Job, rep *reconcile.RunReport) {
	switch rep.State {
	case reconcile.RunRunning, reconcile.RunUnknown:
	case state.JobSucceeded:
		j.Status, j.Error = rep.State, ""
	default:
		j.Status, j.Error = rep.State, rep.Message
	}
	j.EndReason, j.EndedAt, j.RestartAt, j.FirstExitAt = rep.EndReason, rep.EndedAt, rep.RestartAt, rep.FirstExitAt
	for i := range j.Nodes {
		n := &j.Nodes[i]
		for _, e := range rep.Nodes {
			if e.Rank == n.Rank {
				end := e
				n.End = &end
			}
		}
		if t, ok := rep.Unreachable[n.Rank]; ok {
			n.UnreachableSince = &t
		} else {
			n.UnreachableSince = nil
		}
	}
}

// each runs f for every item at once (node operations are what the
// semaphore bounds), skipping those not started when ctx ends.
func each[T any](ctx context.Context, items []T, f func(context.Context, T)) {
	var wg sync.WaitGroup
	for _, it := range items {
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(ctx, it)
		}()
	}
	wg.Wait()
}

func (r *run) progress(ev Event) {
	if r.e.Opts.Progress == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.e.Opts.Progress(ev)
}

// StopError is a run that could not be stopped on some of its hosts.
type StopError struct {
	Job, RunID string
	// Leftover says the run was already a leftover of an earlier apply.
	Leftover bool
	Hosts    string
	Err      error
}

func (e *StopError) Error() string {
	what := fmt.Sprintf("run %s of job %q", e.RunID, e.Job)
	if e.Leftover {
		what = "leftover " + what
	}
	return fmt.Sprintf("%s could not be stopped on %s (%v); it is kept in state, and the next apply or destroy stops it", what, e.Hosts, e.Err)
}

func (r *run) notStopped(e *StopError) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.NotStopped = append(r.res.NotStopped, e)
}

// declared is how to reach a host of the configuration: where launches
// and their checks go.
func (r *run) declared(host string) (ssh.Target, error) {
	t, ok := r.e.Targets[host]
	if !ok {
		return ssh.Target{}, fmt.Errorf("host %s is not declared; gpulayer does not know how to reach it", host)
	}
	return t, nil
}

// node runs one remote script on a machine, bounded by timeout and by the
// semaphore. It runs on a context that ctx's cancellation does not reach:
// a step that started finishes, so that what it did is known and saved.
func (r *run) node(ctx context.Context, t ssh.Target, command, script string, timeout time.Duration) (ssh.Result, error) {
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return ssh.Result{}, ctx.Err()
	}
	defer func() { <-r.sem }()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	return r.e.Runner.Run(ctx, t, command, strings.NewReader(script))
}

// stopNodes stops every node of a run (those with a recorded process and,
// by the run-id sweep, those without), all at once, and returns the nodes
// it could not stop, with the first reason.
//
// Machines that share one kernel's processes (the same boot id, pid
// namespace and login, as their launches recorded: the sandbox's,
// containers of one host) are swept once: their stops end their own
// node's tree and group without the sweep, and then one more stop, on one
// of those that succeeded, sweeps by environment, and by process group,
// for the nodes of all that succeeded. A node whose machine did not
// answer is never swept through another: it stays what its own machine's
// stop left, a leftover.
func (r *run) stopNodes(ctx context.Context, job, runID string, nodes []state.Node, grace time.Duration) ([]state.Node, error) {
	var mu sync.Mutex
	var failed []state.Node
	var why error
	down := map[string]bool{}
	run := func(hs []hostStop, report bool) {
		var wg sync.WaitGroup
		for _, h := range hs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := r.stopHost(ctx, job, runID, h, grace, report)
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					return
				}
				if why == nil {
					why = err
				}
				for _, n := range h.nodes {
					if !slices.ContainsFunc(failed, func(m state.Node) bool { return m.Rank == n.Rank }) {
						failed = append(failed, n)
					}
				}
				down[h.host] = true
			}()
		}
		wg.Wait()
	}
	stops := hostStops(r.e.Targets, runID, nodes, grace)
	run(stops, true)
	run(kernelSweeps(stops, down), false)
	slices.SortFunc(failed, func(a, b state.Node) int { return a.Rank - b.Rank })
	return failed, why
}

// kernelSweeps are the sweeps of the kernels whose machines' stops left
// the sweep out: one per kernel, on the first of its machines whose stop
// succeeded, for the nodes (and the process groups) of all those that
// did.
func kernelSweeps(stops []hostStop, down map[string]bool) []hostStop {
	var out []hostStop
	at := map[string]int{}
	for _, h := range stops {
		if !h.stop.NoSweep || down[h.host] {
			continue
		}
		i, ok := at[h.kernel]
		if !ok {
			i = len(out)
			at[h.kernel] = i
			sweep := h
			sweep.nodes = nil
			// No leader: the sweep alone (the machines' own stops ended
			// their trees and groups).
			sweep.stop = launch.Stop{RunID: h.stop.RunID, Grace: h.stop.Grace, Ranks: []int{}}
			out = append(out, sweep)
		}
		w := &out[i]
		w.nodes = append(w.nodes, h.nodes...)
		w.stop.Ranks = append(w.stop.Ranks, h.stop.Ranks...)
		// The machine's stop sent its node's group SIGTERM but did not
		// list the group's members (a read of every process: once per
		// kernel, here, for every node's group).
		for _, n := range h.nodes {
			if p := n.Process; p != nil && p.PID > 0 {
				w.stop.Groups = append(w.stop.Groups, launch.Group{PID: p.PID, StartTime: p.StartTime})
			}
		}
	}
	return out
}

// hostStop is the stop of a run on one host.
type hostStop struct {
	host   string
	nodes  []state.Node // the run's nodes there
	target ssh.Target
	err    error // how the host cannot be reached
	stop   launch.Stop
	// kernel names the processes the host shares with others ("" when
	// it shares them with none or is not known).
	kernel string
}

// hostStops is one stop per host of a run's nodes (the sweep finds every
// process of the run there); the stops of hosts that share a kernel leave
// the sweep out (kernelSweeps runs it once for them).
func hostStops(targets map[string]ssh.Target, runID string, nodes []state.Node, grace time.Duration) []hostStop {
	var out []hostStop
	at := map[string]int{}
	for _, n := range nodes {
		i, ok := at[n.Host]
		if !ok {
			i = len(out)
			at[n.Host] = i
			// A stop reaches the machine the node was launched on, even
			// once the host is no longer declared.
			t, err := reconcile.NodeTarget(targets, n)
			out = append(out, hostStop{host: n.Host, target: t, err: err, stop: launch.Stop{RunID: runID, Grace: grace}})
		}
		h := &out[i]
		h.nodes = append(h.nodes, n)
		h.stop.Ranks = append(h.stop.Ranks, n.Rank)
		if n.Process != nil {
			h.stop.PID, h.stop.StartTime = n.Process.PID, n.Process.StartTime
		}
	}
	for i := range out {
		if legacy(out[i].nodes) {
			out[i].stop.Ranks = nil
		}
	}
	// Hosts of one kernel.
	kernels := map[string][]int{}
	var order []string
	for i, h := range out {
		k := kernelOf(h)
		if k == "" {
			continue
		}
		if _, ok := kernels[k]; !ok {
			order = append(order, k)
		}
		kernels[k] = append(kernels[k], i)
	}
	for _, k := range order {
		if hs := kernels[k]; len(hs) > 1 {
			for _, i := range hs {
				out[i].kernel, out[i].stop.NoSweep = k, true
			}
		}
	}
	return out
}

// legacy says whether a host's nodes include one recorded without reach:
// launched by a gpulayer before GPULAYER_NODE_ID (the two came together),
// its processes carry the run id only, so the sweep must look for that.
func legacy(nodes []state.Node) bool {
	return slices.ContainsFunc(nodes, func(n state.Node) bool { return n.Reach == nil })
}

// kernelOf names the processes a host's nodes run among: its recorded
// boot id and pid namespace, the login that sees them and the address
// the machine is reached at (without its port: containers of one host
// share it); "" when a node there has no such record (its processes are
// swept by its own stop). The boot id and namespace are the machine's
// word: the address keeps a machine elsewhere that repeats another's from
// having that one's sweep run on it instead, leaving its processes.
func kernelOf(h hostStop) string {
	if h.err != nil || h.stop.Ranks == nil {
		// A node of an old gpulayer is swept for by the run id, which
		// would reach every machine of the kernel: its machine sweeps
		// for itself, as it always did.
		return ""
	}
	k := ""
	for _, n := range h.nodes {
		p := n.Process
		if p == nil || p.BootID == "" || p.PIDNamespace == "" {
			return ""
		}
		nk := p.BootID + " " + p.PIDNamespace + " " + h.target.User + "@" + h.target.Address
		if k != "" && nk != k {
			return ""
		}
		k = nk
	}
	return k
}

// stopHost runs one host's stop and, when report says so, reports its
// steps (a kernel's sweep is part of its machines' stops).
func (r *run) stopHost(ctx context.Context, job, runID string, h hostStop, grace time.Duration, report bool) error {
	rank := h.nodes[0].Rank
	progress := func(ev Event) {
		if report {
			r.progress(ev)
		}
	}
	progress(Event{Job: job, Run: runID, Rank: rank, Host: h.host, Step: StepStopping})
	err := h.err
	var stopped launch.Stopped
	if err == nil {
		var res ssh.Result
		res, err = r.node(ctx, h.target, launch.Command("stop", job, runID), launch.StopScript(h.stop), launch.StopTimeout(grace))
		if err == nil {
			stopped, err = launch.ParseStopped(res.Stdout)
		}
	}
	if err == nil && stopped.Left > 0 {
		err = fmt.Errorf("%d processes of run %s would not die", stopped.Left, runID)
	}
	if err != nil {
		progress(Event{Job: job, Run: runID, Rank: rank, Host: h.host, Step: StepFailed, Detail: err.Error()})
		return err
	}
	progress(Event{Job: job, Run: runID, Rank: rank, Host: h.host, Step: StepStopped,
		Detail: fmt.Sprintf("%d signalled, %d killed", stopped.Signalled, stopped.Killed)})
	return nil
}

// stopJob stops what state records of a job and forgets it; nodes that
// could not be stopped are kept as a leftover for the next apply.
func (r *run) stopJob(ctx context.Context, c reconcile.JobChange) {
	var prior state.Job
	found := false
	r.sv.update(func(st *state.State) {
		if j := st.Job(c.Job); j != nil && j.RunID == c.Prior.RunID {
			// prior keeps the status it had: how the run ended goes to
			// the history of its replacement.
			prior, found = *j, true
			j.Status = state.JobStopping
		}
	})
	if !found {
		return
	}
	if err := r.sv.flush(); err != nil {
		return
	}
	grace := time.Duration(prior.Spec.StopTimeout)
	if spec, ok := r.e.Specs[c.Job]; ok {
		grace = time.Duration(spec.StopTimeout)
	}
	failed, why := r.stopNodes(ctx, c.Job, prior.RunID, prior.Nodes, grace)
	stopping := prior
	stopping.Status = state.JobStopping
	r.mu.Lock()
	r.priors[c.Job] = prior
	r.mu.Unlock()
	now := r.e.now().UTC()
	r.sv.update(func(st *state.State) {
		switch {
		case c.Action == reconcile.ActionStop && c.Run != nil:
			// The run ended: the job stays, as it ended (or
			// restarting), so that it is not launched again.
			if j := st.Job(c.Job); j != nil && j.RunID == prior.RunID {
				j.Status = state.JobRunning
				RecordRun(j, c.Run)
			}
		case c.Action != reconcile.ActionReplace && c.Run != nil && c.Run.Restart:
			// A restart that cannot be placed now (it waits for GPUs,
			// or for the machines this apply creates): the job stays,
			// restarting and due, so that the launch that follows keeps
			// its restart counts and its history.
			if j := st.Job(c.Job); j != nil && j.RunID == prior.RunID {
				rep := *c.Run
				rep.State, rep.RestartAt = state.JobRestarting, &now
				j.Status = state.JobRunning
				RecordRun(j, &rep)
			}
		default:
			st.RemoveJob(c.Job)
		}
		if len(failed) > 0 {
			left := stopping
			left.Nodes = failed
			st.AddLeftover(left)
		}
	})
	if len(failed) > 0 {
		r.notStopped(&StopError{Job: c.Job, RunID: prior.RunID, Hosts: hostsOf(failed), Err: why})
		return
	}
	if c.Action == reconcile.ActionDestroy || c.Action == reconcile.ActionStop {
		r.mu.Lock()
		r.res.Stopped++
		r.mu.Unlock()
	}
}

// stopLeftover stops what is left of a run an earlier stop could not
// finish.
func (r *run) stopLeftover(ctx context.Context, l reconcile.Leftover) {
	var left state.Job
	found := false
	r.sv.view(func(st *state.State) {
		for _, j := range st.Leftovers {
			if j.Name == l.Job && j.RunID == l.RunID {
				left, found = j, true
			}
		}
	})
	if !found || !l.Reachable {
		return
	}
	failed, why := r.stopNodes(ctx, l.Job, l.RunID, left.Nodes, time.Duration(left.Spec.StopTimeout))
	r.sv.update(func(st *state.State) {
		st.RemoveLeftover(l.Job, l.RunID)
		if len(failed) > 0 {
			left.Nodes = failed
			st.AddLeftover(left)
		}
	})
	if len(failed) > 0 {
		r.notStopped(&StopError{Job: l.Job, RunID: l.RunID, Leftover: true, Hosts: hostsOf(failed), Err: why})
		return
	}
	r.mu.Lock()
	r.res.LeftoversStopped++
	r.mu.Unlock()
}

func hostsOf(nodes []state.Node) string {
	var hosts []string
	for _, n := range nodes {
		if !slices.Contains(hosts, n.Host) {
			hosts = append(hosts, n.Host)
		}
	}
	return strings.Join(hosts, ", ")
}

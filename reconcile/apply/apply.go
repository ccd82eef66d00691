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
	DefaultParallelism = 16
	// DefaultConfirmAfter is how long after its start a node's process
	// must still run to count as started: a command that fails at once
	// (a missing script, a bad flag) fails the launch, with its log.
	DefaultConfirmAfter = 500 * time.Millisecond
)

// Options tune an apply.
type Options struct {
	// Parallelism bounds the node operations (starts, stops, checks) in
	// flight at once; 0 means DefaultParallelism.
	Parallelism int
	// ConfirmAfter: see DefaultConfirmAfter. 0 means the default; a
	// negative value skips the wait (the check still runs).
	ConfirmAfter time.Duration
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
	StepRunning  = "running" // confirmed after ConfirmAfter
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
func (r *run) stopNodes(ctx context.Context, job, runID string, nodes []state.Node, grace time.Duration) ([]state.Node, error) {
	var mu sync.Mutex
	var failed []state.Node
	var why error
	var wg sync.WaitGroup
	// One stop per host: the sweep finds every process of the run there.
	seen := map[string]bool{}
	for _, n := range nodes {
		if seen[n.Host] {
			continue
		}
		seen[n.Host] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := launch.Stop{RunID: runID, Grace: grace}
			legacy := false
			for _, m := range nodes {
				if m.Host == n.Host {
					s.Ranks = append(s.Ranks, m.Rank)
					if m.Process != nil {
						s.PID, s.StartTime = m.Process.PID, m.Process.StartTime
					}
					// A node recorded without reach was launched by a
					// gpulayer before GPULAYER_NODE_ID (the two came
					// together): its processes carry the run id only, so
					// the sweep must look for that.
					legacy = legacy || m.Reach == nil
				}
			}
			if legacy {
				s.Ranks = nil
			}
			r.progress(Event{Job: job, Run: runID, Rank: n.Rank, Host: n.Host, Step: StepStopping})
			// A stop reaches the machine the node was launched on, even
			// once the host is no longer declared.
			t, err := reconcile.NodeTarget(r.e.Targets, n)
			var stopped launch.Stopped
			if err == nil {
				var res ssh.Result
				res, err = r.node(ctx, t, launch.Command("stop", job, runID), launch.StopScript(s), launch.StopTimeout(grace))
				if err == nil {
					stopped, err = launch.ParseStopped(res.Stdout)
				}
			}
			if err == nil && stopped.Left > 0 {
				err = fmt.Errorf("%d processes of run %s would not die", stopped.Left, runID)
			}
			if err != nil {
				r.progress(Event{Job: job, Run: runID, Rank: n.Rank, Host: n.Host, Step: StepFailed, Detail: err.Error()})
				mu.Lock()
				if why == nil {
					why = err
				}
				for _, m := range nodes {
					if m.Host == n.Host {
						failed = append(failed, m)
					}
				}
				mu.Unlock()
				return
			}
			r.progress(Event{Job: job, Run: runID, Rank: n.Rank, Host: n.Host, Step: StepStopped,
				Detail: fmt.Sprintf("%d signalled, %d killed", stopped.Signalled, stopped.Killed)})
		}()
	}
	wg.Wait()
	slices.SortFunc(failed, func(a, b state.Node) int { return a.Rank - b.Rank })
	return failed, why
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

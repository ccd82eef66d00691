package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/launch"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/ssh"
)

// LaunchError is a job whose launch failed: the node that failed, why, and
// the last lines of its log when it started and then exited.
type LaunchError struct {
	Job     string
	Rank    int
	Host    string
	Err     error
	LogTail []string
	// NotStopped names the hosts where the launch's started nodes could
	// not be stopped afterwards (kept in state as a leftover); empty when
	// every started node was stopped.
	NotStopped string
	// ExitStatus is the status of a node that ran and exited non-zero
	// during the start-up check: the job's own failure (its run failed),
	// not a launch that could not start.
	ExitStatus *int
}

func (e *LaunchError) Error() string { return e.text(false) }

// Line is the error on one line, as state keeps it: status and plan show
// it inside one line of their own, where a line break is shown as U+FFFD.
func (e *LaunchError) Line() string { return e.text(true) }

func (e *LaunchError) text(oneLine bool) string {
	msg := fmt.Sprintf("job %q: node %d on %s: %v", e.Job, e.Rank, e.Host, e.Err)
	if len(e.LogTail) > 0 {
		if oneLine {
			msg += "; the log ends with: " + strings.Join(e.LogTail, " | ")
		} else {
			msg += "; the log ends with:\n  | " + strings.Join(e.LogTail, "\n  | ")
		}
	}
	if e.NotStopped != "" {
		sep := "\n  "
		if oneLine {
			sep = "; "
		}
		msg += sep + "the nodes it started on " + e.NotStopped + " could not be stopped: they are kept in state as a leftover, and the next apply or destroy stops them"
	}
	return msg
}

func (e *LaunchError) Unwrap() error { return e.Err }

// launchJob starts every node of a job: all or nothing. The run id is
// saved before any process starts, so that whatever happens next, the
// run's processes can be found. When the job sets no master_port, node 0
// starts first and picks a free port, which the other nodes then get;
// otherwise all nodes start at once. Each node's launch watches it for
// the job's start_check (node 0's, when it picks the port, in a session
// of its own while the others start); if any node failed to start or
// ended, every node is stopped and the job recorded as failed, with the
// reason.
func (r *run) launchJob(ctx context.Context, c reconcile.JobChange) {
	spec, ok := r.e.Specs[c.Job]
	if !ok || spec.Hash() != c.ConfigHash {
		r.fail(&LaunchError{Job: c.Job, Rank: 0, Host: "-", Err: errors.New("its configuration is not the one the plan was made from; make a new plan")})
		return
	}
	runID := r.e.newRunID()
	job := state.Job{
		Name: c.Job, Spec: spec, ConfigHash: c.ConfigHash, Status: state.JobLaunching, RunID: runID,
		MasterAddr: c.Placement.Nodes[0].Address, MasterPort: spec.MasterPort, LaunchedAt: r.e.now().UTC(),
	}
	// The job's earlier run goes to its history; a restart keeps (and
	// adds to) its restart counts, anything else starts them over.
	r.mu.Lock()
	prior, hadPrior := r.priors[c.Job]
	r.mu.Unlock()
	if !hadPrior {
		r.sv.view(func(st *state.State) {
			if j := st.Job(c.Job); j != nil {
				prior, hadPrior = *j, true
			}
		})
	}
	if hadPrior {
		job.History = appendHistory(prior.History, pastRun(prior, c.Run, r.e.now().UTC()))
		if c.Run != nil && c.Run.Restart {
			job.Restarts, job.LostRestarts = prior.Restarts, prior.LostRestarts
			switch c.Run.Budget {
			case "attempts":
				job.Restarts++
			case "on_lost":
				job.LostRestarts++
			}
		}
	}
	for _, n := range c.Placement.Nodes {
		sn := state.Node{
			Rank: n.Rank, Host: n.Host, Fleet: n.Fleet, Address: n.Address, Port: n.Port,
			GPUs: slices.Clone(n.GPUs), GPUUUIDs: slices.Clone(n.GPUUUIDs),
			Location: state.Location{Region: n.Location.Region, Zone: n.Location.Zone, NetworkGroup: n.Location.NetworkGroup},
		}
		// How the machine is reached is saved with the run id, before
		// anything starts there: whatever the configuration says later,
		// the run can be found and stopped.
		if t, ok := r.e.Targets[n.Host]; ok {
			sn.Reach = reconcile.RecordReach(t, "")
		}
		job.Nodes = append(job.Nodes, sn)
	}
	if ctx.Err() != nil {
		return
	}
	r.sv.update(func(st *state.State) { st.SetJob(job) })
	if err := r.sv.flush(); err != nil {
		return // the save error ends the apply
	}

	pick := job.MasterPort == 0
	if pick {
		job.MasterPort = launch.DefaultPort(c.Job)
	}
	// The state has its lineage once saved: the nodes' GPU claims name it.
	var lineage string
	r.sv.view(func(st *state.State) { lineage = st.Lineage })
	wait := reconcile.StartCheck(spec)
	nodeOf := func(rank int) launch.Node {
		n := job.Nodes[rank]
		ln := launch.Node{Job: c.Job, RunID: runID, Rank: n.Rank, Spec: spec, GPUs: n.GPUs, GPUUUIDs: n.GPUUUIDs,
			MasterAddr: job.MasterAddr, MasterPort: job.MasterPort, PickPort: pick && rank == 0, Lineage: lineage, StartCheck: wait}
		if ln.PickPort {
			// The other nodes wait for node 0's port: it reports at once.
			ln.StartCheck = 0
		}
		return ln
	}
	// Code and setup first, on every machine: a node starts only once
	// all are ready, so a failure here starts nothing anywhere.
	if f := r.prepare(ctx, spec, job, nodeOf); f != nil {
		if ctx.Err() != nil && f.Host == "-" {
			return // interrupted: the job stays "launching", replaced by the next plan
		}
		r.stopFailed(ctx, job, f)
		return
	}
	var failure *LaunchError
	var mu sync.Mutex
	// Each node's start check: the launch script watches its node from
	// the moment it started and reports how it was at the end of the
	// job's start_check, or its end as soon as it saw one.
	checks := make([]*LaunchError, len(job.Nodes))
	var checking sync.WaitGroup
	start := func(rank int) {
		n := nodeOf(rank)
		host := job.Nodes[rank].Host
		r.progress(Event{Job: c.Job, Run: runID, Rank: rank, Host: host, Step: StepStarting})
		started, hostKey, err := r.start(ctx, host, n)
		if err != nil {
			r.progress(Event{Job: c.Job, Run: runID, Rank: rank, Host: host, Step: StepFailed, Detail: err.Error()})
			mu.Lock()
			if failure == nil || rank < failure.Rank {
				failure = &LaunchError{Job: c.Job, Rank: rank, Host: host, Err: err}
			}
			mu.Unlock()
			return
		}
		proc := &state.Process{PID: started.PID, PGID: started.PID, StartTime: started.StartTime, BootID: started.BootID,
			PIDNamespace: started.PIDNamespace, RunID: runID, LogPath: launch.LogPath(c.Job, runID, rank), StartedAt: r.e.now().UTC()}
		mu.Lock()
		job.Nodes[rank].Process = proc
		if rank == 0 {
			job.MasterPort = started.MasterPort
		}
		// The key the machine proved is what reaches it once its host
		// is no longer declared.
		if re := job.Nodes[rank].Reach; re != nil && len(re.HostKeys) == 0 && hostKey != "" {
			re.HostKeys = []string{hostKey}
		}
		reach := job.Nodes[rank].Reach
		checks[rank] = startFailure(c.Job, rank, host, started.Check)
		mu.Unlock()
		r.sv.update(func(st *state.State) {
			if j := st.Job(c.Job); j != nil && j.RunID == runID {
				j.Nodes[rank].Process = proc
				j.Nodes[rank].Reach = reach
				j.MasterPort = job.MasterPort
			}
		})
		r.progress(Event{Job: c.Job, Run: runID, Rank: rank, Host: host, Step: StepStarted, Detail: fmt.Sprintf("pid %d", started.PID)})
		if n.StartCheck == wait || checks[rank] != nil || started.Ended {
			return
		}
		// Node 0 picked the port the others need, and so reported at
		// once: its start check goes on in a session of its own while
		// they start.
		checking.Add(1)
		go func() {
			defer checking.Done()
			lerr := r.check(ctx, c.Job, runID, job.Nodes[rank].Host, rank, proc, wait)
			mu.Lock()
			checks[rank] = lerr
			mu.Unlock()
		}()
	}
	first := 0
	if pick {
		start(0)
		first = 1
	}
	var wg sync.WaitGroup
	for rank := first; rank < len(job.Nodes); rank++ {
		if ctx.Err() != nil || (pick && failure != nil) {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			start(rank)
		}()
	}
	wg.Wait()
	checking.Wait()
	if failure == nil && ctx.Err() != nil {
		// Interrupted between nodes: the job stays "launching" in state,
		// and the next plan replaces it.
		return
	}
	if failure == nil {
		// The first node, by rank, that ended during its start check.
		for _, lerr := range checks {
			if lerr != nil {
				failure = lerr
				break
			}
		}
	}
	if failure != nil {
		r.stopFailed(ctx, job, failure)
		return
	}
	r.sv.update(func(st *state.State) {
		if j := st.Job(c.Job); j != nil && j.RunID == runID {
			j.Status = state.JobRunning
		}
	})
	for _, n := range job.Nodes {
		r.progress(Event{Job: c.Job, Run: runID, Rank: n.Rank, Host: n.Host, Step: StepRunning})
	}
	r.mu.Lock()
	if c.Action == reconcile.ActionReplace {
		r.res.Replaced++
	} else {
		r.res.Launched++
	}
	r.mu.Unlock()
}

// pastRun is a job's earlier run as its history keeps it: how the plan
// saw it end, or "replaced" when it was stopped for something else.
func pastRun(j state.Job, rep *reconcile.RunReport, now time.Time) state.Run {
	out := state.Run{RunID: j.RunID, LaunchedAt: j.LaunchedAt, Status: "replaced", EndedAt: &now, Nodes: []state.NodeEnd{}}
	if j.Ended() {
		out.Status, out.EndReason, out.EndedAt, out.Message = j.Status, j.EndReason, j.EndedAt, j.Error
		if out.Status == state.JobRestarting {
			out.Status = state.JobFailed
			if j.EndReason == reconcile.EndLost {
				out.Status = state.JobLost
			}
		}
	}
	if rep != nil && rep.Restart {
		out.Status, out.EndReason, out.EndedAt, out.Message = rep.State, rep.EndReason, rep.EndedAt, rep.Message
		if out.Status == state.JobRestarting {
			out.Status = state.JobFailed
			if rep.EndReason == reconcile.EndLost {
				out.Status = state.JobLost
			}
		}
		out.Nodes = append(out.Nodes, rep.Nodes...)
		return out
	}
	for _, n := range j.Nodes {
		if n.End != nil {
			out.Nodes = append(out.Nodes, *n.End)
		}
	}
	return out
}

func appendHistory(h []state.Run, r state.Run) []state.Run {
	h = append(slices.Clone(h), r)
	if len(h) > state.MaxHistory {
		h = h[len(h)-state.MaxHistory:]
	}
	return h
}

// start runs a node's launch script, and says which host key the machine
// proved.
func (r *run) start(ctx context.Context, host string, n launch.Node) (launch.Started, string, error) {
	t, err := r.declared(host)
	if err != nil {
		return launch.Started{}, "", err
	}
	res, err := r.node(ctx, t, launch.Command("launch", n.Job, n.RunID, strconv.Itoa(n.Rank)), launch.Script(n), launch.Timeout+n.StartCheck)
	if err != nil {
		return launch.Started{}, res.HostKey, err
	}
	started, err := launch.ParseStarted(res.Stdout)
	return started, res.HostKey, err
}

// check watches a started node for up to wait (CheckScript), and says
// how it failed if it ended.
func (r *run) check(ctx context.Context, job, runID, host string, rank int, p *state.Process, wait time.Duration) *LaunchError {
	t, err := r.declared(host)
	var checked launch.Checked
	if err == nil {
		var res ssh.Result
		res, err = r.node(ctx, t, launch.Command("check", job, runID, strconv.Itoa(rank)),
			launch.CheckScript(job, runID, rank, p.PID, p.StartTime, wait), launch.Timeout+wait)
		if err == nil {
			checked, err = launch.ParseChecked(res.Stdout)
		}
	}
	if err != nil {
		return &LaunchError{Job: job, Rank: rank, Host: host, Err: fmt.Errorf("could not check that it runs: %w", err)}
	}
	return startFailure(job, rank, host, checked)
}

// startFailure is the launch error of a node its start check found
// ended, nil when it runs or already succeeded.
func startFailure(job string, rank int, host string, checked launch.Checked) *LaunchError {
	if checked.Alive || checked.Exit.Status != nil && *checked.Exit.Status == 0 {
		// Running, or done already (`echo done`): a success, not a
		// failed launch; the lifecycle pass records the end.
		return nil
	}
	msg := "the process ended right after it started"
	switch {
	case checked.Exit.Status != nil:
		msg += fmt.Sprintf(" (exit status %d)", *checked.Exit.Status)
	case checked.Exit.NotRegular:
		msg += " (its exit file is not a regular file: not read)"
	}
	return &LaunchError{Job: job, Rank: rank, Host: host, Err: errors.New(msg), LogTail: checked.LogTail, ExitStatus: checked.Exit.Status}
}

// stopFailed stops every node of a job whose launch failed and records
// the failure; nodes that cannot be stopped are kept as a leftover.
func (r *run) stopFailed(ctx context.Context, job state.Job, failure *LaunchError) {
	failed, _ := r.stopNodes(ctx, job.Name, job.RunID, job.Nodes, time.Duration(job.Spec.StopTimeout))
	if len(failed) > 0 {
		failure.NotStopped = hostsOf(failed)
	}
	now := r.e.now().UTC()
	r.sv.update(func(st *state.State) {
		if j := st.Job(job.Name); j != nil && j.RunID == job.RunID {
			j.Status = state.JobFailed
			j.Error = failure.Line()
			if failure.ExitStatus != nil {
				// The command ran and failed: the run failed, and its
				// restart policy decides what follows (the next plan).
				j.EndReason, j.EndedAt = reconcile.EndFailed, &now
				for i := range j.Nodes {
					if j.Nodes[i].Rank == failure.Rank {
						status := *failure.ExitStatus
						j.Nodes[i].End = &state.NodeEnd{Rank: failure.Rank, ExitStatus: &status, EndedAt: now, LogTail: failure.LogTail}
					}
				}
			} else {
				for i := range j.Nodes {
					j.Nodes[i].Process = nil
				}
			}
		}
		if len(failed) > 0 {
			left := job
			left.Nodes = failed
			st.AddLeftover(left)
		}
	})
	r.fail(failure)
}

func (r *run) fail(err *LaunchError) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Failed = append(r.res.Failed, err)
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/internal/codetree"
	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/providers"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/apply"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/ssh"
)

// DefaultWatchInterval is how often gpulayer watch looks at the runs.
const DefaultWatchInterval = 20 * time.Second

// leaseIntervals is how many intervals a watcher's lease lasts: a round
// may be slow (a probe waiting on a host) without another watcher taking
// over, and a watcher that crashed is taken over within a minute.
const leaseIntervals = 3

type watchOptions struct {
	f *factory
	// in holds the directory, --state, --var, and the probe's
	// parallelism and timeout.
	in           planInputs
	interval     time.Duration
	forever      bool
	json         bool
	nodeParallel int
	machineWait  time.Duration
	now          func() time.Time
}

func newCmdWatch(f *factory, runF func(*watchOptions) error) *cobra.Command {
	opts := &watchOptions{f: f, now: time.Now}
	var untilComplete bool
	cmd := &cobra.Command{
		Use:   "watch [DIR]",
		Short: "Supervise the jobs: record how runs end, stop what is left of failed gangs, restart them by their policy",
		Long: `watch runs the lifecycle pass of the configuration in DIR (default: the
current directory) every --interval, in the foreground, and carries out only
its changes: it records how runs ended, stops what may still run of a gang
that failed, restarts jobs by their restart policy once a delay is due,
creates again machines of gcp fleets that were deleted or preempted and
relaunches their jobs (under on_lost), and ends runs past their deadline
(docs/lifecycle.md). It never applies the configuration: a job to launch, a
changed job, a job to stop, a fleet's count are apply's; it says once that
there are such changes.

It takes the state lock only while it changes something, so plan, status and
a pipeline's apply run beside it, and holds a lease in state: a second
watcher refuses to start while it is held, and takes it over once it has
expired (3 intervals). One line per event on stdout; --json prints one JSON
object per line (time, job, event, detail).

Exit status: with --until-complete (the default), 0 once every batch job
succeeded, 1 when one failed or was lost for good (or a watched job was
removed from state, or its launch failed and only apply launches it again);
1 on an error (another watcher holds the lease, or took this one's over);
130 when interrupted (SIGINT, SIGTERM, SIGHUP: the step in flight finishes
and is saved, the lock and the lease are released, and the jobs keep
running). --forever runs until interrupted.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.in.dir = "."
			if len(args) == 1 {
				opts.in.dir = args[0]
			}
			opts.in.environ = os.Environ()
			switch {
			case opts.interval < time.Second:
				return fmt.Errorf("--interval must be at least 1s, got %s", opts.interval)
			case opts.in.parallelism < 1:
				return fmt.Errorf("--parallelism must be at least 1, got %d", opts.in.parallelism)
			case opts.in.timeout <= 0:
				return fmt.Errorf("--probe-timeout must be positive, got %s", opts.in.timeout)
			case opts.nodeParallel < 1:
				return fmt.Errorf("--node-parallelism must be at least 1, got %d", opts.nodeParallel)
			case opts.machineWait <= 0:
				return fmt.Errorf("--machine-wait must be positive, got %s", opts.machineWait)
			}
			if runF != nil {
				return runF(opts)
			}
			return watchRun(opts)
		},
	}
	addVarFlags(cmd, &opts.in.vars)
	addStateFlags(cmd, &opts.in.statePath, nil, false)
	cmd.Flags().DurationVar(&opts.interval, "interval", DefaultWatchInterval, "look at the runs every `DURATION`")
	cmd.Flags().BoolVar(&untilComplete, "until-complete", false, "exit once every batch job has ended (the default)")
	cmd.Flags().BoolVar(&opts.forever, "forever", false, "run until interrupted")
	cmd.MarkFlagsMutuallyExclusive("until-complete", "forever")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print each event as a JSON object on a line of its own")
	cmd.Flags().IntVar(&opts.in.parallelism, "parallelism", probe.DefaultParallelism, "probe at most `N` hosts at once")
	cmd.Flags().DurationVar(&opts.in.timeout, "probe-timeout", probe.DefaultTimeout, "give up on a host's probe after `DURATION`")
	cmd.Flags().IntVar(&opts.nodeParallel, "node-parallelism", apply.DefaultParallelism, "start or stop at most `N` nodes at once")
	cmd.Flags().DurationVar(&opts.machineWait, "machine-wait", DefaultMachineWait, "wait at most `DURATION` for created machines to answer SSH")
	return cmd
}

// watchEvent is one line of watch's output.
type watchEvent struct {
	Time   time.Time `json:"time"`
	Job    string    `json:"job"`
	Event  string    `json:"event"`
	Detail string    `json:"detail"`
}

// errWatchInterrupted ends a round that a signal interrupted.
var errWatchInterrupted = errors.New("interrupted")

// watcher is one gpulayer watch at work.
type watcher struct {
	opts    *watchOptions
	io      *iostreams.IOStreams
	backend state.Backend
	// pool is kept from round to round: a round reuses the connections
	// of the one before.
	pool *ssh.Pool
	prov providers.Provider
	// lease is this watcher's, as last saved.
	lease state.Watcher
	// said is what was last said of each job (and "" of none), so that a
	// run that waits does not print the same line every round; leftSaid
	// the configuration changes last announced.
	said     map[string]string
	leftSaid string
	// seen are the batch jobs state recorded since the start: one that
	// disappears did not succeed.
	seen map[string]bool
	// result is how a watch that is done exits (nil: 0).
	result error
	// code and trees are the jobs' code directories as the round's plan
	// read them (jobs with a code block): a restart of such a job is the
	// same configuration, and may land on a machine without its code.
	code  map[string]*state.CodeSpec
	trees map[string]*codetree.Tree
}

func watchRun(opts *watchOptions) error {
	io := opts.f.IO
	ctx, stop := interruptible(context.Background())
	defer stop()
	cfg, err := loadConfig(io, opts.in.dir, opts.in.vars, opts.in.environ)
	if err != nil {
		return err
	}
	backend, closeBackend, err := newWorkspace(opts.in.dir, opts.in.statePath, cfg.Backend).backend(ctx)
	if err != nil {
		return err
	}
	defer closeBackend()
	w := newWatcher(opts, backend)
	defer w.close()
	if err := w.start(ctx); err != nil {
		return err
	}
	err = w.loop(ctx)
	if !errors.Is(err, errLeaseLost) {
		w.release()
	}
	return err
}

func newWatcher(opts *watchOptions, backend state.Backend) *watcher {
	return &watcher{
		opts: opts, io: opts.f.IO, backend: backend,
		pool: ssh.NewPool(ssh.Options{Parallelism: opts.in.parallelism, MaxOutputBytes: facts.MaxOutputBytes}),
		said: map[string]string{}, seen: map[string]bool{},
	}
}

func (w *watcher) close() {
	w.pool.Close()
	closeProvider(w.prov)
}

// emit prints one event; what came from machines or files is sanitized,
// and a multi-line detail (a log tail) is kept on one line.
func (w *watcher) emit(job, event, detail string) {
	detail = iostreams.Sanitize(strings.ReplaceAll(detail, "\n", " "), false)
	job = iostreams.Sanitize(job, false)
	ev := watchEvent{Time: w.opts.now().UTC().Truncate(time.Millisecond), Job: job, Event: event, Detail: detail}
	if w.opts.json {
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w.io.Out, "%s\n", b)
		return
	}
	line := ev.Time.Format(time.RFC3339) + " "
	if job != "" {
		line += "job " + job + " "
	}
	line += event
	if detail != "" {
		line += ": " + detail
	}
	fmt.Fprintln(w.io.Out, line)
}

// once prints an event unless it is what was last said of the job.
func (w *watcher) once(job, event, detail string) {
	key := event + "\x00" + detail
	if w.said[job] == key {
		return
	}
	w.said[job] = key
	w.emit(job, event, detail)
}

// lock takes the state lock, waiting at most one interval: a pipeline's
// apply holds the watcher up for a round at most, and the round after
// tries again.
func (w *watcher) lock(ctx context.Context) (state.Lock, error) {
	return w.backend.Lock(ctx, state.NewLockInfo(commandLine()), w.opts.interval)
}

// errLeaseLost ends a watcher whose lease another watcher took over.
var errLeaseLost = errors.New("lease lost")

// ours checks that st's lease is still this watcher's.
func (w *watcher) ours(st *state.State) error {
	if st.Watcher != nil && st.Watcher.ID == w.lease.ID {
		return nil
	}
	holder := "no watcher (its lease was removed)"
	if st.Watcher != nil {
		holder = st.Watcher.String()
	}
	return &exitError{code: 1, err: fmt.Errorf("%w: %s now holds the lease of %s; this watcher stops, and the jobs keep running", errLeaseLost, holder, w.backend)}
}

// refuseLive refuses to watch a state another watcher's live lease
// holds.
func (w *watcher) refuseLive(st *state.State) error {
	if st.Watcher.Live(w.opts.now()) && st.Watcher.ID != w.lease.ID {
		return &exitError{code: 1, err: fmt.Errorf("%s is watched by %s: one watcher at a time acts on a state's jobs; stop it, or wait until its lease expires (a watcher that crashed is taken over then)",
			w.backend, st.Watcher)}
	}
	return nil
}

// start takes the lease: refused while another watcher holds it, taken
// over once it expired.
func (w *watcher) start(ctx context.Context) error {
	st, err := w.backend.Load(ctx)
	if err != nil {
		return err
	}
	if st.Lineage == "" {
		return &exitError{code: 1, err: fmt.Errorf("%s holds no state yet: nothing to watch (gpulayer apply launches the jobs watch supervises)", w.backend)}
	}
	if err := w.refuseLive(st); err != nil {
		return err
	}
	batch, services := kinds(st)
	if !w.opts.forever && batch == 0 {
		return &exitError{code: 1, err: fmt.Errorf("%s records no batch job: nothing to wait for (services run until they are stopped: watch them with --forever)", w.backend)}
	}
	info := state.NewLockInfo(commandLine())
	now := w.opts.now().UTC()
	w.lease = state.Watcher{ID: info.ID, Host: info.Host, PID: info.PID, User: info.User, StartedAt: now}
	var lock state.Lock
	for {
		if lock, err = w.lock(ctx); err == nil {
			break
		}
		var locked *state.LockedError
		if ctx.Err() != nil || !errors.As(err, &locked) {
			if ctx.Err() != nil {
				return &exitError{code: 130}
			}
			return err
		}
		w.once("", "locked", locked.Error())
	}
	defer lock.Unlock()
	if st, err = w.backend.Load(ctx); err != nil {
		return err
	}
	if err := w.refuseLive(st); err != nil {
		return err
	}
	prev := st.Watcher
	if err := w.renew(ctx, st); err != nil {
		return err
	}
	w.emit("", "watching", fmt.Sprintf("%s: %s and %s; a round every %s; lease %s held until %s",
		w.backend, plural(batch, "batch job"), plural(services, "service"), w.opts.interval, w.lease.ID, w.lease.ExpiresAt.Format(time.RFC3339)))
	// A lease its watcher released ended with its last renewal; one that
	// merely expired was left by a watcher that crashed or hung.
	if prev != nil && prev.ID != w.lease.ID && !prev.ExpiresAt.Equal(prev.RenewedAt) {
		w.emit("", "took_over", "the lease of "+prev.String()+", which had expired")
	}
	return nil
}

// kinds counts st's batch jobs and services.
func kinds(st *state.State) (batch, services int) {
	for _, j := range st.Jobs {
		if j.Spec.Lifecycle.Kind == config.KindService {
			services++
		} else {
			batch++
		}
	}
	return batch, services
}

// renewed is the lease renewed now, held for leaseIntervals intervals.
func (w *watcher) renewed() state.Watcher {
	l := w.lease
	l.RenewedAt = w.opts.now().UTC()
	l.ExpiresAt = l.RenewedAt.Add(leaseIntervals * w.opts.interval)
	return l
}

// renew saves st, loaded under the lock, with the lease renewed and
// nothing else changed.
func (w *watcher) renew(ctx context.Context, st *state.State) error {
	next := st.Clone()
	l := w.renewed()
	next.SetWatcher(l, true)
	if err := w.backend.Save(ctx, next, st.Serial); err != nil {
		return err
	}
	w.lease = l
	return nil
}

// loop runs a round every interval until the watch is done, interrupted,
// or its lease is lost.
func (w *watcher) loop(ctx context.Context) error {
	for {
		began := time.Now()
		done, err := w.round(ctx)
		switch {
		case errors.Is(err, errWatchInterrupted) || ctx.Err() != nil:
			w.emit("", "interrupted", "the step in flight was finished and saved; the jobs keep running")
			return &exitError{code: 130}
		case errors.Is(err, errLeaseLost):
			return err
		case err != nil:
			w.once("", "error", err.Error())
		case done:
			return w.result
		}
		t := time.NewTimer(time.Until(began.Add(w.opts.interval)))
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// round is one lifecycle pass. It probes and plans without the lock, then
// locks, reloads state and, when it changed since, plans again before
// carrying out the lifecycle's changes; every round renews the lease. It
// says whether --until-complete is done (how it exits is w.result); an
// error is the round's, and the next round tries again, unless it is
// errWatchInterrupted or errLeaseLost.
func (w *watcher) round(ctx context.Context) (bool, error) {
	cfg, diags := config.Load(w.opts.in.dir, config.LoadOptions{Vars: w.opts.in.vars, Environ: w.opts.in.environ})
	if diags.HasErrors() {
		// A configuration being edited: the lease is kept, and the round
		// after tries again.
		w.once("", "error", "the configuration does not load: "+diags.Error())
		return false, w.renewOnly(ctx)
	}
	st, err := w.backend.Load(ctx)
	if err != nil {
		return false, err
	}
	if err := w.ours(st); err != nil {
		return false, err
	}
	if w.prov == nil && needsProvider(cfg, st) {
		if w.prov, err = openProvider(ctx); err != nil {
			return false, errors.Join(err, w.renewOnly(ctx))
		}
	}
	var listed map[string]reconcile.Listing
	if w.prov != nil {
		listed = listMachines(ctx, w.prov, cfg, st)
	}
	planned, cfgM := located(cfg, st, listed)
	doc, err := reconcile.RefreshFacts(ctx, w.pool, cfgM, planned, probe.Options{Parallelism: w.opts.in.parallelism, Timeout: w.opts.in.timeout})
	if err != nil {
		return false, err
	}
	if ctx.Err() != nil {
		// Facts cut short by a signal are not acted on.
		return false, errWatchInterrupted
	}
	p, left := w.plan(cfgM, planned, doc, listed)

	lock, err := w.lock(ctx)
	if err != nil {
		var locked *state.LockedError
		if errors.As(err, &locked) && ctx.Err() == nil {
			w.once("", "locked", locked.Error()+"; the next round tries again")
			return false, nil
		}
		if ctx.Err() != nil {
			return false, errWatchInterrupted
		}
		return false, err
	}
	defer lock.Unlock()
	// An error or a lock said before is said again when it comes back.
	delete(w.said, "")
	cur, err := w.backend.Load(ctx)
	if err != nil {
		return false, err
	}
	if err := w.ours(cur); err != nil {
		return false, err
	}
	// Another command saved since the plan: plan again from what it
	// saved, with the facts of this round, and its fleets listed again
	// (an apply may have created machines since).
	moved := !cur.Holds(planned.Lineage, planned.Serial)
	if moved && w.prov != nil {
		listed = listMachines(ctx, w.prov, cfg, cur)
	}
	planned, cfgM = located(cfg, cur, listed)
	if moved {
		p, left = w.plan(cfgM, planned, doc, listed)
	}
	w.announce(left)
	w.observe(p)
	after := cur
	if p.HasChanges() || p.HasRecords() {
		l := w.renewed()
		planned.SetWatcher(l, false)
		w.lease = l
		after, err = w.execute(ctx, cfg, cfgM, planned, p, doc)
	} else {
		err = w.renew(ctx, cur)
	}
	if errors.Is(err, apply.ErrInterrupted) {
		return false, errWatchInterrupted
	}
	if err != nil {
		return false, err
	}
	if w.opts.forever || after == nil {
		return false, nil
	}
	return w.settled(cfgM, after, doc), nil
}

// renewOnly renews the lease in a round that could not plan.
func (w *watcher) renewOnly(ctx context.Context) error {
	lock, err := w.lock(ctx)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	st, err := w.backend.Load(ctx)
	if err != nil {
		return err
	}
	if err := w.ours(st); err != nil {
		return err
	}
	return w.renew(ctx, st)
}

// located is st with the physical records its fleets' listing reported,
// and cfg with st's machines as hosts.
func located(cfg *config.Config, st *state.State, listed map[string]reconcile.Listing) (*state.State, *config.Config) {
	if ms, changed := reconcile.ListedMachines(st.Machines, listed); changed {
		st = st.Clone()
		st.Machines = ms
	}
	return st, reconcile.WithMachines(cfg, st.Machines)
}

// plan makes the round's plan and keeps its lifecycle part. When it left
// configuration changes out, it plans again holding their jobs, so that
// no restart is placed on GPUs only a left-out change would free.
func (w *watcher) plan(cfg *config.Config, st *state.State, doc *facts.Document, listed map[string]reconcile.Listing) (*reconcile.Plan, []reconcile.LeftOut) {
	if code, trees, err := readCode(cfg.Jobs); err == nil {
		w.code, w.trees = code, trees
	} else {
		// A code directory that cannot be read now is a configuration
		// problem for plan to report; its jobs are left as they are.
		w.code, w.trees = nil, nil
	}
	in := reconcile.Input{
		Config: cfg, State: st, Facts: doc, Refresh: reconcile.Refresh{Source: reconcile.RefreshProbe},
		Version: buildVersion(), Listed: listed, Now: w.opts.now(), RecreatePreempted: true, Code: w.code,
	}
	p, left := reconcile.MakePlan(in).LifecycleOnly()
	for _, l := range left {
		if l.Job != "" {
			in.Hold = append(in.Hold, l.Job)
		}
	}
	if len(in.Hold) > 0 {
		p, _ = reconcile.MakePlan(in).LifecycleOnly()
	}
	return p, left
}

// announce says, once for each set of them, that the configuration has
// changes the watcher leaves to apply.
func (w *watcher) announce(left []reconcile.LeftOut) {
	var words []string
	for _, l := range left {
		words = append(words, l.Words)
	}
	key := strings.Join(words, "; ")
	if key == w.leftSaid {
		return
	}
	w.leftSaid = key
	if key != "" {
		w.emit("", "not_applied", "configuration has changes not applied: run gpulayer plan ("+key+")")
	}
}

// observe says what the plan found of each run and what it does about it.
func (w *watcher) observe(p *reconcile.Plan) {
	for _, c := range p.Jobs {
		r := c.Run
		if r == nil {
			continue
		}
		if r.Record {
			detail := r.Message
			switch {
			case r.State == reconcile.RunRunning && r.FirstExitAt != nil:
				detail = "a node exited 0 at " + r.FirstExitAt.UTC().Format(time.RFC3339) + " and the others still run; completion_grace counts from then"
			case r.State == reconcile.RunRunning:
				detail = "every node's host answers again"
			case r.State == state.JobRestarting && r.RestartAt != nil:
				detail += "; restarted after " + r.RestartAt.UTC().Format(time.RFC3339)
			case (r.State == state.JobFailed || r.State == state.JobLost) && !r.Restart:
				detail += "; it is not restarted"
			}
			w.once(c.Job, r.State, detail)
		}
		if r.Restart {
			detail := ""
			for _, reason := range c.Reasons {
				if reason.Code == reconcile.ReasonRestart {
					detail = reason.Message
				}
			}
			if detail == "" {
				// A gang that lost its machines says why by their
				// reasons (machine_missing, machine_stopped).
				var why []string
				for _, reason := range c.Reasons {
					if reason.Node != nil {
						why = append(why, reason.Message)
					}
				}
				detail = fmt.Sprintf("the run was lost (%s); restart %d of %d after lost nodes", strings.Join(why, "; "), r.LostRestarts+1, r.OnLost)
				if r.OnLost < 0 {
					detail = fmt.Sprintf("the run was lost (%s); restart %d after lost nodes (on_lost is unlimited)", strings.Join(why, "; "), r.LostRestarts+1)
				}
			}
			if c.Action == reconcile.ActionWaiting && c.Decision != nil {
				detail += "; it waits: " + c.Decision.Summary
			}
			w.once(c.Job, "restart", detail)
		}
	}
}

// step prints one step of apply's as an event.
func (w *watcher) step(ev apply.Event) {
	if ev.Job == "" {
		detail := "machine " + ev.Host
		if ev.Detail != "" {
			detail += " (" + ev.Detail + ")"
		}
		w.emit("", ev.Step, detail)
		return
	}
	detail := fmt.Sprintf("node %d on %s", ev.Rank, ev.Host)
	if ev.Detail != "" {
		detail += ": " + ev.Detail
	}
	w.emit(ev.Job, ev.Step, detail)
}

// execute carries out the lifecycle plan p against st (the lease renewed
// in it), and, when it created machines that restarts wait for, waits for
// them and launches those restarts as apply does. It returns the state
// as saved.
func (w *watcher) execute(ctx context.Context, cfg, cfgM *config.Config, st *state.State, p *reconcile.Plan, doc *facts.Document) (*state.State, error) {
	targets, err := configTargets(cfgM)
	if err != nil {
		return nil, err
	}
	specs := map[string]state.JobSpec{}
	for _, j := range cfg.Jobs {
		specs[j.Name] = reconcile.JobSpec(j, w.code[j.Name])
	}
	x := execution{backend: w.backend, st: st, plan: p, facts: doc, targets: targets, specs: specs,
		cfg: cfgM, provider: w.prov, fleets: executorFleets(w.prov, cfgM, st), code: w.code, trees: w.trees}
	ex := &apply.Executor{
		Runner: w.pool, Backend: w.backend, Targets: targets, Specs: specs, Fleets: x.fleets, Code: w.trees,
		Opts: apply.Options{Parallelism: w.opts.nodeParallel, Progress: w.step},
	}
	res, err := ex.Apply(ctx, st, p, doc)
	w.results(res)
	if err != nil || res == nil {
		return nil, err
	}
	after := res.State
	if pending := pendingJobs(p); len(res.Created) > 0 && len(pending) > 0 {
		nm := newMachines{
			in: &w.opts.in, wait: w.opts.machineWait, nodeParallel: w.opts.nodeParallel, lifecycleOnly: true,
			say: func(line string) {
				if line = strings.TrimSpace(line); line != "" {
					w.emit("", "machines", line)
				}
			},
			warn:     func(line string) { w.emit("", "warning", line) },
			show:     func(p *reconcile.Plan) error { w.observe(p); return nil },
			progress: w.step,
		}
		second, err := placeOnNewMachines(ctx, nm, x, res, pending, w.pool)
		w.results(second)
		if err != nil {
			return nil, err
		}
		if second != nil && second.State != nil {
			after = second.State
		}
	}
	return after, nil
}

// results says what an execution could not do.
func (w *watcher) results(res *apply.Result) {
	if res == nil {
		return
	}
	for _, e := range res.NotStopped {
		w.emit(e.Job, "not_stopped", e.Error())
	}
	for _, e := range res.MachineErrors {
		w.emit("", "error", e.Error())
	}
	for _, e := range res.Failed {
		job := ""
		var le *apply.LaunchError
		if errors.As(e, &le) {
			job = le.Job
		}
		w.emit(job, "launch_failed", e.Error())
	}
}

// settled says --until-complete is done: every batch job state records
// (or recorded during the watch) has ended for good. Planned again from
// the state the round saved (its machines as recorded: the listing may
// predate a machine the round created), no restart is left to any of
// them. It sets how the watch exits.
func (w *watcher) settled(cfg *config.Config, st *state.State, doc *facts.Document) bool {
	p, _ := w.plan(cfg, st, doc, nil)
	var failed, succeeded []string
	for _, j := range st.Jobs {
		if j.Spec.Lifecycle.Kind != config.KindService {
			w.seen[j.Name] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(w.seen)) {
		j := st.Job(name)
		out, why := outcome(p.Job(name), j)
		switch out {
		case "":
			return false
		case state.JobSucceeded:
			succeeded = append(succeeded, fmt.Sprintf("%q", name))
		default:
			failed = append(failed, fmt.Sprintf("job %q %s", name, why))
		}
	}
	if len(failed) > 0 {
		msg := strings.Join(failed, "; ")
		w.emit("", "done", "not every batch job succeeded: "+msg)
		w.result = &exitError{code: 1, err: errors.New(iostreams.Sanitize("not every batch job succeeded: "+msg, false))}
		return true
	}
	w.emit("", "done", "every batch job succeeded: "+strings.Join(succeeded, ", "))
	return true
}

// outcome is how a batch job stands for --until-complete: "" while it may
// still run, succeed or be restarted, else succeeded, failed or lost,
// with why. c is its change in a lifecycle plan (nil: the plan left it
// out, for a change apply has to make), j its state (nil: removed).
func outcome(c *reconcile.JobChange, j *state.Job) (string, string) {
	switch {
	case j == nil:
		return state.JobFailed, "is no longer in state (destroyed)"
	case j.Status == state.JobSucceeded:
		return state.JobSucceeded, ""
	case c == nil && (j.Status == state.JobLaunching || (j.Status == state.JobFailed && j.EndReason == "")):
		return state.JobFailed, "did not launch (" + j.Error + "); gpulayer apply launches it again"
	case c == nil && j.Ended() && j.Status != state.JobRestarting:
		return j.Status, j.Status + ": " + j.Error
	case c == nil || c.Run == nil || c.Run.Restart || c.Action != reconcile.ActionNoOp:
		return "", ""
	}
	switch c.Run.State {
	case state.JobSucceeded:
		return state.JobSucceeded, ""
	case state.JobFailed, state.JobLost:
		return c.Run.State, c.Run.State + ": " + c.Run.Message
	}
	return "", ""
}

// release ends the lease (expires_at now) so that the next watcher starts
// at once; the record stays, so a saved plan made during the watch still
// holds. It runs on a context of its own: an interrupted watcher still
// releases what it holds.
func (w *watcher) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := func() error {
		lock, err := w.backend.Lock(ctx, state.NewLockInfo(commandLine()), 10*time.Second)
		if err != nil {
			return err
		}
		defer lock.Unlock()
		st, err := w.backend.Load(ctx)
		if err != nil {
			return err
		}
		if st.Watcher == nil || st.Watcher.ID != w.lease.ID {
			return nil
		}
		l := *st.Watcher
		l.RenewedAt = w.opts.now().UTC()
		l.ExpiresAt = l.RenewedAt
		next := st.Clone()
		next.SetWatcher(l, true)
		return w.backend.Save(ctx, next, st.Serial)
	}()
	if err != nil {
		w.emit("", "error", fmt.Sprintf("the lease could not be released (%v); another watcher takes it over once it expires at %s",
			err, w.lease.ExpiresAt.Format(time.RFC3339)))
	}
}

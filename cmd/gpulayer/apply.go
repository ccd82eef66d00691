package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
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
	"github.com/gpulayer/gpulayer/reconcile/launch"
	"github.com/gpulayer/gpulayer/reconcile/planfile"
	"github.com/gpulayer/gpulayer/reconcile/planview"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/ssh"
)

type applyOptions struct {
	f            *factory
	in           planInputs
	planFile     string
	autoApprove  bool
	nodeParallel int
	machineWait  time.Duration
	destroy      bool
	// stdinTTY says whether a person can answer the confirmation.
	stdinTTY bool
}

func newCmdApply(f *factory, runF func(*applyOptions) error) *cobra.Command {
	opts := &applyOptions{f: f}
	cmd := &cobra.Command{
		Use:   "apply [DIR | PLANFILE]",
		Short: "Launch, replace and stop jobs so that they match the configuration",
		Long: `apply makes the running jobs match the configuration in DIR (default: the
current directory). Without a plan file it plans as "gpulayer plan" does, shows
the plan and asks for "yes" (on a terminal; elsewhere --auto-approve is
needed). With a PLANFILE saved by "gpulayer plan --out" it carries out exactly
that plan, and refuses it when state has changed since, or when a host it
launches on now reports something the placement depends on differently.

Each node is started detached over SSH (docs/apply.md); state is saved after
every step, so Ctrl-C finishes the steps in flight, saves and exits, and the
next plan continues from there.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.in.dir = "."
			if len(args) == 1 {
				if fi, err := os.Stat(args[0]); err == nil && fi.Mode().IsRegular() {
					opts.planFile = args[0]
				} else {
					opts.in.dir = args[0]
				}
			}
			if err := opts.finish(cmd); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return applyRun(opts)
		},
	}
	addPlanInputFlags(cmd, &opts.in)
	cmd.Flags().BoolVar(&opts.autoApprove, "auto-approve", false, "apply without asking for confirmation")
	cmd.Flags().IntVar(&opts.nodeParallel, "node-parallelism", apply.DefaultParallelism, "start or stop at most `N` nodes at once")
	cmd.Flags().DurationVar(&opts.machineWait, "machine-wait", DefaultMachineWait, "wait at most `DURATION` for created machines to answer SSH")
	return cmd
}

func applyRun(opts *applyOptions) error {
	io := opts.f.IO
	ctx, stop := interruptible(context.Background())
	defer stop()
	if opts.planFile != "" {
		return applySaved(ctx, opts)
	}
	opts.in.startFactsRead()
	cfg, err := loadConfig(io, opts.in.dir, opts.in.vars, opts.in.environ)
	if err != nil {
		return err
	}
	ws := newWorkspace(opts.in.dir, opts.in.statePath, cfg.Backend)
	backend, closeBackend, err := ws.backend(ctx)
	if err != nil {
		return err
	}
	defer closeBackend()
	command := "apply"
	if opts.destroy {
		command = "destroy"
	}
	lock, err := lockState(ctx, backend, opts.in.lockTimeout, commandLine())
	if err != nil {
		return err
	}
	defer lock.Unlock()
	opts.in.lock = false // held
	made, err := makePlan(ctx, io, &opts.in, cfg, backend, ws, command, opts.destroy)
	if err != nil {
		return err
	}
	defer made.close()
	if err := planview.Text(io.Out, made.plan, planview.Options{Color: io.ColorEnabled()}); err != nil {
		return err
	}
	if !made.plan.HasChanges() {
		switch {
		case made.plan.HasRecords():
			// Nothing to do, but how runs ended is recorded (and where
			// GCP now says machines run, with it): a finished job is
			// never launched again.
			if err := recordRuns(ctx, backend, made.state, made.plan, made.facts); err != nil {
				return err
			}
		case made.located:
			// Nothing to do, but where GCP now says machines run is
			// recorded, so that a plan without a refresh (or from a saved
			// plan's state) places them by it too.
			if err := backend.Save(ctx, made.state, made.state.Serial); err != nil {
				return err
			}
		}
		return unplaceableExit(made.plan)
	}
	if !opts.autoApprove {
		if err := confirm(io, opts.stdinTTY, command); err != nil {
			return err
		}
	}
	targets, err := configTargets(made.cfg)
	if err != nil {
		return err
	}
	specs := map[string]state.JobSpec{}
	for _, j := range made.cfg.Jobs {
		specs[j.Name] = reconcile.JobSpec(j, made.code[j.Name])
	}
	return execute(ctx, io, opts, execution{
		backend: backend, st: made.state, plan: made.plan, facts: made.facts, targets: targets, specs: specs,
		code: made.code, trees: made.trees,
		cfg: made.cfg, provider: made.provider, fleets: executorFleets(made.provider, made.cfg, made.state), pool: made.pool,
	})
}

// finish checks the flags of apply and destroy and reads what the
// command's surroundings say.
func (opts *applyOptions) finish(cmd *cobra.Command) error {
	opts.in.environ = os.Environ()
	if err := opts.in.check(cmd); err != nil {
		return err
	}
	if opts.planFile != "" {
		for _, name := range []string{"var", "var-file", "target", "replace", "facts", "refresh"} {
			if cmd.Flags().Changed(name) {
				return fmt.Errorf("--%s cannot change a saved plan; make a new plan with it", name)
			}
		}
	}
	if opts.machineWait <= 0 {
		opts.machineWait = DefaultMachineWait
	}
	if opts.nodeParallel < 1 {
		return fmt.Errorf("--node-parallelism must be at least 1, got %d", opts.nodeParallel)
	}
	opts.stdinTTY = opts.f.IO.IsStdinTTY()
	return nil
}

// confirm asks for "yes" on a terminal; elsewhere it refuses, since no one
// can have read the plan.
func confirm(io *iostreams.IOStreams, tty bool, command string) error {
	if !tty {
		return fmt.Errorf("%s needs confirmation and standard input is not a terminal; run with --auto-approve, or apply a saved plan", command)
	}
	fmt.Fprintf(io.Out, "\nDo you want to perform these actions? Only 'yes' will be accepted.\n  Enter a value: ")
	line, err := bufio.NewReader(io.In).ReadString('\n')
	if err != nil && line == "" {
		return &exitError{code: 1, err: fmt.Errorf("%s cancelled", command)}
	}
	if strings.TrimSpace(line) != "yes" {
		return &exitError{code: 1, err: fmt.Errorf("%s cancelled", command)}
	}
	return nil
}

// applySaved carries out a saved plan, or refuses it when it is stale.
func applySaved(ctx context.Context, opts *applyOptions) error {
	io := opts.f.IO
	f, err := planfile.ReadFile(opts.planFile)
	if err != nil {
		return err
	}
	statePath := opts.in.statePath
	if statePath == "" {
		statePath = f.Config.StatePath
	}
	backend, closeBackend, err := newWorkspace(f.Config.Dir, statePath, f.Config.Backend).backend(ctx)
	if err != nil {
		return err
	}
	defer closeBackend()
	lock, err := lockState(ctx, backend, opts.in.lockTimeout, commandLine())
	if err != nil {
		return err
	}
	defer lock.Unlock()
	st, err := backend.Load(ctx)
	if err != nil {
		return err
	}
	if !st.Holds(f.Plan.State.Lineage, f.Plan.State.Serial) {
		return &exitError{code: 1, err: fmt.Errorf("saved plan is stale: it was made from state serial %d, and %s is now at serial %d%s; make a new plan",
			f.Plan.State.Serial, backend, st.Serial, lineageNote(f.Plan.State.Lineage, st.Lineage))}
	}
	// The hosts are probed as the plan probed them: with the location
	// claims of the configuration the plan was made from.
	machines, err := configMachines(f.Config.ProbeConfig())
	if err != nil {
		return err
	}
	targets := targetsOf(machines)
	// The probe's connections are those the plan's steps then use.
	pool := newProbePool(&opts.in)
	defer pool.Close()
	if touched := f.Plan.TouchedHosts(); len(touched) > 0 {
		now := probeHostsWith(ctx, pool, machines, touched, st, refreshProbeOptions(io, &opts.in))
		if reasons := f.Plan.StaleReasons(f.Facts, now); len(reasons) > 0 {
			return &exitError{code: 1, err: fmt.Errorf("saved plan is stale: %s; make a new plan", strings.Join(reasons, "; "))}
		}
	}
	if err := planview.Text(io.Out, f.Plan, planview.Options{Color: io.ColorEnabled()}); err != nil {
		return err
	}
	if !f.Plan.HasChanges() {
		if f.Plan.HasRecords() {
			if err := recordRuns(ctx, backend, st, f.Plan, f.Facts); err != nil {
				return err
			}
		}
		return unplaceableExit(f.Plan)
	}
	specs := map[string]state.JobSpec{}
	for _, j := range f.Config.Jobs {
		specs[j.Name] = j.Spec
	}
	// The code is read again: a tree that changed since the plan would
	// send what the plan did not show.
	trees, stale, err := readSpecCode(launchedSpecs(f.Plan, specs))
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("saved plan cannot be applied: %w", err)}
	}
	if len(stale) > 0 {
		return &exitError{code: 1, err: fmt.Errorf("saved plan is stale: %s; make a new plan", strings.Join(stale, "; "))}
	}
	ex := execution{backend: backend, st: st, plan: f.Plan, facts: f.Facts, targets: targets, specs: specs, trees: trees, pool: pool}
	if len(f.Config.Fleets) > 0 || len(st.Machines) > 0 {
		if ex.provider, err = openProvider(ctx); err != nil {
			return err
		}
		defer ex.provider.Close()
		ex.fleets = executorFleets(ex.provider, f.FleetConfig(), st)
	}
	return execute(ctx, io, opts, ex)
}

// launchedSpecs are the specs of the jobs the plan launches: only their
// code is read again.
func launchedSpecs(p *reconcile.Plan, specs map[string]state.JobSpec) map[string]state.JobSpec {
	out := map[string]state.JobSpec{}
	for _, c := range p.Jobs {
		if s, ok := specs[c.Job]; ok && (c.Action == reconcile.ActionCreate || c.Action == reconcile.ActionReplace) {
			out[c.Job] = s
		}
	}
	return out
}

func lineageNote(planned, now string) string {
	if planned != now {
		return fmt.Sprintf(" of another lineage (%s, not %s)", now, planned)
	}
	return ""
}

// newProbePool is a pool for probes: a probe prints about 10 KB, and no
// more than a probe may print is kept. An apply's launches, checks and
// stops run on the same pool, reusing the refresh's connections, so it
// keeps what either may print.
func newProbePool(in *planInputs) *ssh.Pool {
	return ssh.NewPool(ssh.Options{Parallelism: in.parallelism, MaxOutputBytes: max(facts.MaxOutputBytes, launch.MaxOutputBytes)})
}

// probeHostsWith probes the named hosts again, asking about the processes
// state records there, over a pool the caller keeps, so that a
// command that probes again and again (wait) reuses its connections.
func probeHostsWith(ctx context.Context, pool *ssh.Pool, known map[string]probe.Machine, hosts []string, st *state.State, popts probe.Options) *facts.Document {
	watch := reconcile.StateWatches(st)
	var machines []probe.Machine
	for _, h := range hosts {
		if m, ok := known[h]; ok {
			m.Watch = watch[h]
			machines = append(machines, m)
		}
	}
	return probe.Fleet(ctx, pool, machines, popts)
}

// execution is what an apply carries out a plan with.
type execution struct {
	backend state.Backend
	st      *state.State
	plan    *reconcile.Plan
	facts   *facts.Document
	targets map[string]ssh.Target
	specs   map[string]state.JobSpec
	// code and trees are the jobs' code directories: what a later plan
	// of jobs waiting for machines compares, and what apply sends.
	code  map[string]*state.CodeSpec
	trees map[string]*codetree.Tree
	// cfg is the configuration the plan was made from, with its created
	// machines; nil for a saved plan, whose jobs that wait for new
	// machines are placed by the next plan.
	cfg      *config.Config
	provider providers.Provider
	fleets   map[string]apply.Fleet
	// pool, when set, holds the refresh's connections: the plan's steps
	// run on it (its owner closes it). Without one, execute makes its own.
	pool *ssh.Pool
}

// execute runs a plan and reports what was done. When it created machines
// that jobs wait for, it waits for them to answer SSH, probes them, and
// places and launches those jobs by a plan of their own, in the same run.
func execute(ctx context.Context, io *iostreams.IOStreams, opts *applyOptions, x execution) error {
	pool := x.pool
	if pool == nil {
		pool = ssh.NewPool(ssh.Options{Parallelism: opts.in.parallelism, MaxOutputBytes: launch.MaxOutputBytes})
		defer pool.Close()
	}
	fmt.Fprintln(io.Out)
	ex := &apply.Executor{
		Runner: pool, Backend: x.backend, Targets: x.targets, Specs: x.specs, Fleets: x.fleets, Code: x.trees,
		Opts: apply.Options{Parallelism: opts.nodeParallel, Progress: func(ev apply.Event) { writeEvent(io, ev) }},
	}
	res, err := ex.Apply(ctx, x.st, x.plan, x.facts)
	report := func(res *apply.Result) {
		if res == nil {
			return
		}
		for _, f := range res.NotStopped {
			fmt.Fprintf(io.ErrOut, "Error: %s\n", iostreams.Sanitize(f.Error(), true))
		}
		for _, f := range res.MachineErrors {
			fmt.Fprintf(io.ErrOut, "Error: %s\n", iostreams.Sanitize(f.Error(), true))
		}
		for _, f := range res.Failed {
			fmt.Fprintf(io.ErrOut, "Error: %s\n", iostreams.Sanitize(f.Error(), true))
		}
	}
	report(res)
	if err != nil {
		if errors.Is(err, apply.ErrInterrupted) {
			return &exitError{code: 130, err: err}
		}
		return err
	}
	pending := pendingJobs(x.plan)
	if len(res.Created) > 0 && len(pending) > 0 {
		if x.cfg == nil {
			fmt.Fprintf(io.Out, "\nJobs %s wait for the machines this apply created; a saved plan cannot place them: run gpulayer plan and apply again.\n",
				iostreams.Sanitize(strings.Join(pending, ", "), false))
		} else {
			second, err := placeOnNewMachines(ctx, applyNewMachines(io, opts), x, res, pending, pool)
			report(second)
			if second != nil {
				res.Launched += second.Launched
				res.Replaced += second.Replaced
				res.Failed = append(res.Failed, second.Failed...)
				res.NotStopped = append(res.NotStopped, second.NotStopped...)
				res.LeftoversStopped += second.LeftoversStopped
			}
			if err != nil {
				if errors.Is(err, apply.ErrInterrupted) {
					return &exitError{code: 130, err: err}
				}
				return err
			}
		}
	}
	verb := "Apply"
	if opts.destroy {
		verb = "Destroy"
	}
	fmt.Fprintf(io.Out, "\n%s complete: %d launched, %d replaced, %d stopped", verb, res.Launched, res.Replaced, res.Stopped)
	if len(res.NotStopped) > 0 {
		fmt.Fprintf(io.Out, ", %d not stopped", len(res.NotStopped))
	}
	if res.LeftoversStopped > 0 {
		fmt.Fprintf(io.Out, ", %s stopped", plural(res.LeftoversStopped, "leftover run"))
	}
	if len(res.Failed) > 0 {
		fmt.Fprintf(io.Out, ", %d failed to launch", len(res.Failed))
	}
	if res.CreatedMachines+res.DeletedMachines > 0 || len(res.MachineErrors) > 0 {
		fmt.Fprintf(io.Out, "; %d machines created, %d deleted", res.CreatedMachines, res.DeletedMachines)
	}
	fmt.Fprintln(io.Out, ".")
	// Exit 1 whenever something the plan asked for was not done, saying
	// what was not.
	var undone []string
	if n := len(res.NotStopped); n > 0 {
		undone = append(undone, fmt.Sprintf("%s could not be stopped (kept in state: the next apply or destroy stops them)", plural(n, "run")))
	}
	if n := len(res.MachineErrors); n > 0 {
		undone = append(undone, fmt.Sprintf("%s could not be created or deleted (what was done is recorded, and the next apply tries the rest)", plural(n, "machine")))
	}
	if n := len(res.Failed); n > 0 {
		// Not every one is launched again: a command that failed its
		// start-up check failed its run, and its restart policy decides.
		again := "it"
		if n > 1 {
			again = "each"
		}
		undone = append(undone, fmt.Sprintf("%s failed to launch (the next plan says whether apply launches %s again)", plural(n, "job"), again))
	}
	if err := unplaceable(x.plan); err != nil {
		undone = append(undone, err.Error())
	}
	if len(undone) > 0 {
		return &exitError{code: 1, err: errors.New(iostreams.Sanitize(strings.Join(undone, "; "), false))}
	}
	return nil
}

// recordRuns writes what a plan with nothing else to do saw of its jobs'
// runs (how they ended) into state.
func recordRuns(ctx context.Context, backend state.Backend, st *state.State, p *reconcile.Plan, doc *facts.Document) error {
	ex := &apply.Executor{Backend: backend}
	_, err := ex.Apply(ctx, st, p, doc)
	return err
}

// unplaceableExit is apply's exit when the plan has nothing to do: 1 when
// a job can never be placed, else 0.
func unplaceableExit(p *reconcile.Plan) error {
	if err := unplaceable(p); err != nil {
		return &exitError{code: 1, err: err}
	}
	return nil
}

// unplaceable says which jobs of p can never be placed under their
// policy (on_unschedulable = "fail"): an apply of such a plan did not do
// what the configuration asks, even when it had nothing else to do.
func unplaceable(p *reconcile.Plan) error {
	var failed []string
	for _, c := range p.Jobs {
		if c.Action == reconcile.ActionFailed {
			failed = append(failed, fmt.Sprintf("%q", c.Job))
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("job %s cannot be placed under its policy (on_unschedulable = \"fail\"; the plan says why)", strings.Join(failed, ", "))
}

// writeEvent prints one step of one node: `train[1] a2: started (pid
// 4211)`.
func writeEvent(io *iostreams.IOStreams, ev apply.Event) {
	line := fmt.Sprintf("%s[%d] %s: %s", ev.Job, ev.Rank, ev.Host, ev.Step)
	if ev.Job == "" {
		// A machine's step: `machine cloud-0: created (34.0.0.1)`.
		line = fmt.Sprintf("machine %s: %s", ev.Host, ev.Step)
	}
	if ev.Detail != "" {
		line += " (" + ev.Detail + ")"
	}
	fmt.Fprintln(io.Out, iostreams.Sanitize(line, false))
}

// configTargets is how to reach each declared host.
func configTargets(cfg *config.Config) (map[string]ssh.Target, error) {
	machines, err := configMachines(cfg)
	if err != nil {
		return nil, err
	}
	return targetsOf(machines), nil
}

// configMachines are the declared hosts (and created machines) of cfg as
// the probe sees them: how to reach each, and what the configuration or
// the provider says of where it is.
func configMachines(cfg *config.Config) (map[string]probe.Machine, error) {
	machines, err := probe.Machines(cfg)
	if err != nil {
		return nil, err
	}
	out := make(map[string]probe.Machine, len(machines))
	for _, m := range machines {
		out[m.Name] = m
	}
	return out, nil
}

// withRecorded adds to the declared machines those state has runs on and
// the configuration no longer declares where the runs were started (a
// host removed, or declared at another address): they are probed as state
// recorded them, so status shows what still runs there.
func withRecorded(declared map[string]probe.Machine, st *state.State) map[string]probe.Machine {
	targets := targetsOf(declared)
	out := maps.Clone(declared)
	for _, jobs := range [][]state.Job{st.Jobs, st.Leftovers} {
		for _, j := range jobs {
			for _, n := range j.Nodes {
				t, err := reconcile.NodeTarget(targets, n)
				if err != nil || t.Address == declared[n.Host].Target.Address && t.Port == declared[n.Host].Target.Port {
					continue
				}
				out[n.Host] = probe.Machine{Name: n.Host, Fleet: n.Fleet, Target: t,
					Host: facts.LocationClaim{Region: n.Location.Region, Zone: n.Location.Zone, NetworkGroup: n.Location.NetworkGroup}}
			}
		}
	}
	return out
}

func targetsOf(machines map[string]probe.Machine) map[string]ssh.Target {
	out := make(map[string]ssh.Target, len(machines))
	for name, m := range machines {
		out[name] = m.Target
	}
	return out
}

func newCmdDestroy(f *factory, runF func(*applyOptions) error) *cobra.Command {
	opts := &applyOptions{f: f, destroy: true}
	cmd := &cobra.Command{
		Use:   "destroy [DIR]",
		Short: "Stop every job gpulayer launched from this configuration",
		Long: `destroy stops every job that state records for the configuration in DIR
(default: the current directory), and what is left of earlier runs: SIGTERM,
the job's stop_timeout, SIGKILL, and a sweep for every process carrying the
run's id. It shows what it will stop and asks for "yes" on a terminal
(elsewhere --auto-approve is needed).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.in.dir = "."
			if len(args) == 1 {
				opts.in.dir = args[0]
			}
			if err := opts.finish(cmd); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return applyRun(opts)
		},
	}
	addPlanInputFlags(cmd, &opts.in)
	cmd.Flags().BoolVar(&opts.autoApprove, "auto-approve", false, "stop without asking for confirmation")
	cmd.Flags().IntVar(&opts.nodeParallel, "node-parallelism", apply.DefaultParallelism, "stop at most `N` nodes at once")
	return cmd
}

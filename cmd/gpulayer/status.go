package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/planview"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/ssh"
)

type statusOptions struct {
	f           *factory
	dir         string
	job         string // "" for every job
	statePath   string
	vars        []config.VarArg
	environ     []string
	json        bool
	parallelism int
	timeout     time.Duration
	now         func() time.Time
}

func newCmdStatus(f *factory, runF func(*statusOptions) error) *cobra.Command {
	opts := &statusOptions{f: f, now: time.Now}
	cmd := &cobra.Command{
		Use:   "status [DIR] [JOB]",
		Short: "Show each job's state, restarts and nodes, and whether their processes still run",
		Long: `status probes the hosts that state says run jobs (and only those) and shows
each job's lifecycle state as a plan of what they report judges it (running,
unknown, succeeded, failed, lost, restarting, pending: docs/lifecycle.md),
even before an apply recorded it; the restarts it used of each budget; its
last failure; and its nodes: host, GPUs, pid, whether the process still runs
(or how it ended), and for how long.

With JOB, only that job, with its runs: the last 10 earlier ones and the
current one, each with its id, start, end, how it ended and how each node
ended. A single argument is DIR when it is a directory (or holds a
slash), else JOB.

It changes nothing and does not take the state lock; "gpulayer plan" says
what apply would do.`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.dir = "."
			switch len(args) {
			case 1:
				// A job's name never holds a slash.
				if fi, err := os.Stat(args[0]); (err == nil && fi.IsDir()) || strings.ContainsRune(args[0], '/') {
					opts.dir = args[0]
				} else {
					opts.job = args[0]
				}
			case 2:
				// "status train eval" names two jobs, not a directory
				// and a job: say so rather than fail to read "train".
				if fi, err := os.Stat(args[0]); err != nil && !strings.ContainsRune(args[0], '/') {
					return fmt.Errorf("status shows one JOB or every job: %q is not a directory (gpulayer status [DIR] [JOB])", args[0])
				} else if err == nil && !fi.IsDir() {
					return fmt.Errorf("%q is not a directory (gpulayer status [DIR] [JOB])", args[0])
				}
				opts.dir, opts.job = args[0], args[1]
			}
			opts.environ = os.Environ()
			if opts.parallelism < 1 {
				return fmt.Errorf("--parallelism must be at least 1, got %d", opts.parallelism)
			}
			if opts.timeout <= 0 {
				return fmt.Errorf("--probe-timeout must be positive, got %s", opts.timeout)
			}
			if runF != nil {
				return runF(opts)
			}
			return statusRun(opts)
		},
	}
	addVarFlags(cmd, &opts.vars)
	addStateFlags(cmd, &opts.statePath, nil, true)
	cmd.Flags().BoolVar(&opts.json, "json", false, "print as JSON")
	cmd.Flags().IntVar(&opts.parallelism, "parallelism", probe.DefaultParallelism, "probe at most `N` hosts at once")
	cmd.Flags().DurationVar(&opts.timeout, "probe-timeout", probe.DefaultTimeout, "give up on a host's probe after `DURATION`")
	return cmd
}

func statusRun(opts *statusOptions) error {
	io := opts.f.IO
	ctx, stop := interruptible(context.Background())
	defer stop()
	cfg, err := loadConfig(io, opts.dir, opts.vars, opts.environ)
	if err != nil {
		return err
	}
	backend, closeBackend, err := newWorkspace(opts.dir, opts.statePath, cfg.Backend).backend(ctx)
	if err != nil {
		return err
	}
	defer closeBackend()
	// Read without the lock: status must never hold up an apply, and a
	// save replaces the document whole, so a read sees one version.
	st, err := backend.Load(ctx)
	if err != nil {
		return err
	}
	var jobs []string
	for _, j := range st.Jobs {
		if opts.job == "" || j.Name == opts.job {
			jobs = append(jobs, j.Name)
		}
	}
	if opts.job != "" && len(jobs) == 0 {
		if jobKnown(cfg, st, opts.job) {
			return fmt.Errorf("job %q has not been launched: state records no run of it (gpulayer plan says whether apply can place it)", opts.job)
		}
		return fmt.Errorf("no job %q is declared or recorded in state", opts.job)
	}
	in := &planInputs{parallelism: opts.parallelism, timeout: opts.timeout}
	pool := newProbePool(in)
	defer pool.Close()
	now := opts.now()
	hosts := runHosts(func(j state.Job) bool { return opts.job == "" || j.Name == opts.job }, st.Jobs, st.Leftovers)
	code, warnings := codeNow(cfg, st, jobs)
	for _, w := range warnings {
		fmt.Fprintln(io.ErrOut, iostreams.Sanitize(w, false))
	}
	p, doc, err := judgeJobs(ctx, pool, cfg, st, jobs, hosts, code, refreshProbeOptions(io, in), now)
	if err != nil {
		return err
	}
	report := reconcile.Status(reconcile.StatusInput{State: st, Facts: doc, Plan: p, Job: opts.job, Now: now})
	if opts.json {
		enc := json.NewEncoder(io.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	return planview.Status(io.Out, report, backend.String(), planview.Options{Color: io.ColorEnabled()})
}

// judgeJobs probes hosts (those state records for the jobs shown) and
// makes a plan limited to the named jobs, whose lifecycle pass says how
// each is doing: what status shows and wait waits on. Nothing else is
// probed, and the plan is never applied. With no jobs there is no plan.
//
// code is the jobs' code as read now (codeNow): without it, a job with a
// code block would always look changed (code_changed), so never done.
func judgeJobs(ctx context.Context, pool *ssh.Pool, cfg *config.Config, st *state.State, jobs, hosts []string,
	code map[string]*state.CodeSpec, popts probe.Options, now time.Time) (*reconcile.Plan, *facts.Document, error) {
	machines, err := configMachines(reconcile.WithMachines(cfg, st.Machines))
	if err != nil {
		return nil, nil, err
	}
	doc := probeHostsWith(ctx, pool, withRecorded(machines, st), hosts, st, popts)
	if len(jobs) == 0 {
		return nil, doc, nil
	}
	p := reconcile.MakePlan(reconcile.Input{
		Config: cfg, State: st, Facts: doc, Refresh: reconcile.Refresh{Source: reconcile.RefreshProbe},
		Targets: jobs, Version: buildVersion(), Now: now, Code: code,
	})
	return p, doc, nil
}

// codeNow reads the code of the named jobs that have a code block, as plan
// does, so that status and wait judge a job as the next plan would. A tree
// that cannot be read here (its source is not on this machine, or plan
// would refuse it) is taken as state recorded it, with a warning: status
// then says nothing of its code, rather than that it changed.
func codeNow(cfg *config.Config, st *state.State, jobs []string) (map[string]*state.CodeSpec, []string) {
	code := map[string]*state.CodeSpec{}
	var warnings []string
	for _, j := range cfg.Jobs {
		if j.Code == nil || !slices.Contains(jobs, j.Name) {
			continue
		}
		specs, _, err := readCode([]*config.Job{j})
		if err == nil {
			code[j.Name] = specs[j.Name]
			continue
		}
		warnings = append(warnings, fmt.Sprintf("warning: %v; its code is taken as state records it", err))
		if rec := st.Job(j.Name); rec != nil {
			code[j.Name] = rec.Spec.Code
		}
	}
	return code, warnings
}

// runHosts are the hosts, sorted, that the runs keep selects run on.
func runHosts(keep func(state.Job) bool, runs ...[]state.Job) []string {
	var hosts []string
	for _, jobs := range runs {
		for _, j := range jobs {
			if !keep(j) {
				continue
			}
			for _, n := range j.Nodes {
				if !slices.Contains(hosts, n.Host) {
					hosts = append(hosts, n.Host)
				}
			}
		}
	}
	slices.Sort(hosts)
	return hosts
}

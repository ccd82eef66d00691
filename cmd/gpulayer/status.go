package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/planview"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

type statusOptions struct {
	f           *factory
	dir         string
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
		Use:   "status [DIR]",
		Short: "Show each job's nodes and whether their processes still run",
		Long: `status probes the hosts that state says run jobs (and only those) and shows
each job's nodes: host, GPUs, pid, whether the process still runs (or how it
ended), and for how long. It changes nothing; "gpulayer plan" says what apply
would do about a process that ended.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.dir = "."
			if len(args) == 1 {
				opts.dir = args[0]
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
	addStateFlags(cmd, &opts.statePath, nil)
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
	st, err := backend.Load(ctx)
	if err != nil {
		return err
	}
	machines, err := configMachines(reconcile.WithMachines(cfg, st.Machines))
	if err != nil {
		return err
	}
	var hosts []string
	for _, jobs := range [][]state.Job{st.Jobs, st.Leftovers} {
		for _, j := range jobs {
			for _, n := range j.Nodes {
				if !slices.Contains(hosts, n.Host) {
					hosts = append(hosts, n.Host)
				}
			}
		}
	}
	slices.Sort(hosts)
	in := &planInputs{parallelism: opts.parallelism, timeout: opts.timeout}
	doc := probeHosts(ctx, io, in, withRecorded(machines, st), hosts, st)
	report := reconcile.Status(st, doc, opts.now())
	if opts.json {
		enc := json.NewEncoder(io.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	return planview.Status(io.Out, report, backend.String(), planview.Options{Color: io.ColorEnabled()})
}

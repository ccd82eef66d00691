package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	"github.com/spf13/cobra"

	"github.com/gpulayer/gpulayer/examples/demo"
	"github.com/gpulayer/gpulayer/providers/sandbox"
	"github.com/gpulayer/gpulayer/reconcile/probe"
)

type demoOptions struct {
	f     *factory
	hosts int
	// run is how long the jobs run before the demo shows their status and
	// logs and stops them.
	run time.Duration
}

func newCmdDemo(f *factory, runF func(*demoOptions) error) *cobra.Command {
	opts := &demoOptions{f: f}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Plan, apply, inspect and destroy jobs on a sandbox fleet, end to end",
		Long: `demo shows gpulayer's whole cycle on this computer, without GPUs: it starts a
sandbox fleet (simulated GPU machines on 127.0.0.1, each a real SSH server;
see "gpulayer sandbox"), plans the jobs of examples/demo against it, applies
the plan (real processes, one per node, started over SSH), shows the jobs'
status and the first lines of every node's log, plans again (no changes),
destroys the jobs, stops the fleet and removes its temporary directory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.hosts < 2 || opts.hosts > sandbox.MaxHosts {
				return fmt.Errorf("--hosts must be from 2 to %d, got %d", sandbox.MaxHosts, opts.hosts)
			}
			if opts.run < 0 {
				return fmt.Errorf("--run must not be negative, got %s", opts.run)
			}
			if runF != nil {
				return runF(opts)
			}
			return demoRun(opts)
		},
	}
	cmd.Flags().IntVar(&opts.hosts, "hosts", 8, "simulate `N` machines")
	cmd.Flags().DurationVar(&opts.run, "run", 3*time.Second, "let the jobs run for `DURATION` before showing their status and logs")
	return cmd
}

func demoRun(opts *demoOptions) (err error) {
	io := opts.f.IO
	ctx, stop := interruptible(context.Background())
	defer stop()
	dir, err := os.MkdirTemp("", "gpulayer-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	heading := lipgloss.NewStyle()
	if io.ColorEnabled() {
		r := lipgloss.NewRenderer(io.Out)
		r.SetColorProfile(termenv.ANSI)
		heading = r.NewStyle().Bold(true).Foreground(lipgloss.Color("6"))
	}
	step := func(title string) { fmt.Fprintf(io.Out, "\n%s\n\n", heading.Render("== "+title)) }
	step(fmt.Sprintf("1. A sandbox fleet of %d simulated GPU machines", opts.hosts))
	sb, err := sandbox.Start(sandbox.Options{Hosts: opts.hosts, Dir: filepath.Join(dir, "fleet")})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := sb.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	for _, m := range sb.Machines {
		fmt.Fprintf(io.Out, "  %-8s %-15s %-16s %-24s %d GPUs (%s), torch %s\n", m.Name, m.Region, m.Zone, m.Network, m.Model.GPUs, m.Model.Model, m.Torch)
	}
	if err := os.WriteFile(filepath.Join(sb.Dir, "jobs.hcl"), demo.Jobs, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(io.Out, "\nThe configuration is %s (the fleet) and jobs.hcl (examples/demo).\n", sb.ConfigPath())

	in := planInputs{dir: sb.Dir, refresh: true, lock: true, parallelism: probe.DefaultParallelism, timeout: probe.DefaultTimeout}
	step("2. gpulayer apply: plan, then launch")
	if err := applyRun(&applyOptions{f: opts.f, in: in, autoApprove: true, nodeParallel: 16}); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	select {
	case <-time.After(opts.run):
	case <-ctx.Done():
		return ctx.Err()
	}

	step("3. gpulayer status")
	if err := statusRun(&statusOptions{f: opts.f, dir: sb.Dir, parallelism: in.parallelism, timeout: in.timeout, now: time.Now}); err != nil {
		return err
	}
	step("4. gpulayer logs (the last lines of every node's log)")
	for _, job := range []string{"train", "eval"} {
		if err := logsRun(&logsOptions{f: opts.f, dir: sb.Dir, job: job, node: -1, tail: 3, interval: time.Second}); err != nil {
			return err
		}
	}
	step("5. gpulayer plan again: nothing to do")
	if err := planRun(&planOptions{f: opts.f, in: in}); err != nil {
		return err
	}
	step("6. gpulayer destroy")
	if err := applyRun(&applyOptions{f: opts.f, in: in, autoApprove: true, nodeParallel: 16, destroy: true}); err != nil {
		return err
	}
	step("7. Stopping the fleet")
	fmt.Fprintf(io.Out, "Done: every process is stopped and %s is removed.\n", dir)
	return nil
}

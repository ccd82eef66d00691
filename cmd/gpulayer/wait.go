package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/ssh"
)

// Bounds of wait's --interval: a poll is a probe of the jobs' hosts over
// SSH, so it is never made more than once a second.
const (
	DefaultWaitInterval = 5 * time.Second
	MinWaitInterval     = time.Second
)

// Exit statuses of wait besides 0 (every job succeeded) and 130
// (interrupted).
const (
	waitExitFailed   = 1 // a job failed or was lost (also: an error)
	waitExitTimedOut = 2
)

type waitOptions struct {
	f            *factory
	dir          string
	jobs         []string
	statePath    string
	vars         []config.VarArg
	environ      []string
	timeout      time.Duration // 0: none
	interval     time.Duration
	parallelism  int
	probeTimeout time.Duration
}

func newCmdWait(f *factory, runF func(*waitOptions) error) *cobra.Command {
	opts := &waitOptions{f: f}
	cmd := &cobra.Command{
		Use:   "wait JOB...",
		Short: "Wait until jobs succeed, fail or are lost",
		Long: `wait blocks until each job named has ended for good: succeeded, failed or
lost (docs/lifecycle.md). A job restarting is not done: apply restarts it, and
wait follows the new run. Every --interval it reads state and probes the hosts
the jobs run on (only those), and judges each job as a plan would; it prints a
line on stderr whenever a job's state changes:

  wait: job "eval" running (2/2 nodes)
  wait: job "eval" succeeded

wait changes nothing and never takes the state lock, so it can run beside
apply. The configuration in the current directory (or --chdir) says how to
reach the hosts. For a pipeline:

  gpulayer apply --auto-approve && gpulayer wait eval && gpulayer logs eval

Exit status:
  0    every job succeeded
  1    a job failed or was lost (or wait could not run: an unknown job, a
       configuration or state that cannot be read)
  2    --timeout passed first
  130  interrupted (Ctrl-C, SIGTERM, SIGHUP)`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.dir = "."
			opts.jobs = nil
			for _, a := range args {
				if !slices.Contains(opts.jobs, a) {
					opts.jobs = append(opts.jobs, a)
				}
			}
			opts.environ = os.Environ()
			if opts.timeout < 0 {
				return fmt.Errorf("--timeout must not be negative, got %s", opts.timeout)
			}
			if opts.interval < MinWaitInterval {
				return fmt.Errorf("--interval must be at least %s, got %s", MinWaitInterval, opts.interval)
			}
			if opts.parallelism < 1 {
				return fmt.Errorf("--parallelism must be at least 1, got %d", opts.parallelism)
			}
			if opts.probeTimeout <= 0 {
				return fmt.Errorf("--probe-timeout must be positive, got %s", opts.probeTimeout)
			}
			if runF != nil {
				return runF(opts)
			}
			return waitRun(opts)
		},
	}
	addVarFlags(cmd, &opts.vars)
	addStateFlags(cmd, &opts.statePath, nil, true)
	cmd.Flags().DurationVar(&opts.timeout, "timeout", 0, "give up after `DURATION` and exit 2 (0: wait as long as it takes)")
	cmd.Flags().DurationVar(&opts.interval, "interval", DefaultWaitInterval, "look again every `DURATION` (at least 1s)")
	cmd.Flags().IntVar(&opts.parallelism, "parallelism", probe.DefaultParallelism, "probe at most `N` hosts at once")
	cmd.Flags().DurationVar(&opts.probeTimeout, "probe-timeout", probe.DefaultTimeout, "give up on a host's probe after `DURATION`")
	return cmd
}

func waitRun(opts *waitOptions) error {
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
	// --timeout bounds everything from here, a probe in flight included.
	bounded, cancel := ctx, context.CancelFunc(func() {})
	if opts.timeout > 0 {
		bounded, cancel = context.WithTimeout(ctx, opts.timeout)
	}
	defer cancel()
	in := &planInputs{parallelism: opts.parallelism, timeout: opts.probeTimeout}
	pool := newProbePool(in)
	defer pool.Close()
	w := &waiter{opts: opts, io: io, pool: pool, cfg: cfg, backend: backend, shown: map[string]string{}}
	for first := true; ; first = false {
		if !first {
			t := time.NewTimer(opts.interval)
			select {
			case <-bounded.Done():
				t.Stop()
			case <-t.C:
			}
		}
		if err := w.ended(ctx, bounded); err != nil {
			return err
		}
		states, err := w.poll(bounded)
		// What a poll cut short by the timeout or a signal saw (hosts that
		// "did not answer") says nothing about the jobs.
		if err := w.ended(ctx, bounded); err != nil {
			return err
		}
		if err != nil {
			return err
		}
		w.show(states)
		if done := w.verdict(states); done != nil || allTerminal(states) {
			return done
		}
	}
}

// waiter is one wait in progress: what it polls with, and the last line it
// showed of each job.
type waiter struct {
	opts    *waitOptions
	io      *iostreams.IOStreams
	pool    *ssh.Pool
	cfg     *config.Config
	backend state.Backend
	shown   map[string]string
	last    []reconcile.JobState
	// code is the jobs' code as read at the first poll (codeNow).
	code map[string]*state.CodeSpec
}

// ended is the error that ends the wait once it was interrupted or its
// timeout passed; nil while it goes on.
func (w *waiter) ended(ctx, bounded context.Context) error {
	switch {
	case ctx.Err() != nil:
		return &exitError{code: 130, err: errors.New("wait interrupted")}
	case bounded.Err() != nil:
		var open []string
		for _, s := range w.last {
			if !s.Terminal {
				open = append(open, fmt.Sprintf("job %q %s", s.Job, waitWords(s)))
			}
		}
		msg := fmt.Sprintf("timed out after %s", w.opts.timeout)
		if len(open) > 0 {
			msg += ": " + strings.Join(open, "; ")
		}
		return &exitError{code: waitExitTimedOut, err: errors.New(iostreams.Sanitize(msg, false))}
	}
	return nil
}

// poll reads state (without the lock: a save replaces the document whole),
// probes the hosts the jobs run on and judges each job.
func (w *waiter) poll(ctx context.Context) ([]reconcile.JobState, error) {
	st, err := w.backend.Load(ctx)
	if err != nil {
		return nil, err
	}
	for _, name := range w.opts.jobs {
		if !jobKnown(w.cfg, st, name) {
			return nil, fmt.Errorf("no job %q is declared or recorded in state", name)
		}
	}
	hosts := runHosts(func(j state.Job) bool { return slices.Contains(w.opts.jobs, j.Name) }, st.Jobs)
	popts := probe.Options{Parallelism: w.opts.parallelism, Timeout: w.opts.probeTimeout}
	if w.code == nil {
		// Read once, as the configuration is: the wait follows the run
		// as it was when the wait began.
		var warnings []string
		w.code, warnings = codeNow(w.cfg, st, w.opts.jobs)
		for _, line := range warnings {
			fmt.Fprintln(w.io.ErrOut, iostreams.Sanitize(line, false))
		}
	}
	p, _, err := judgeJobs(ctx, w.pool, w.cfg, st, w.opts.jobs, hosts, w.code, popts, time.Now())
	if err != nil {
		return nil, err
	}
	out := make([]reconcile.JobState, 0, len(w.opts.jobs))
	for _, name := range w.opts.jobs {
		c := p.Job(name)
		if c == nil {
			return nil, fmt.Errorf("job %q is no longer declared or recorded in state", name)
		}
		s := reconcile.JudgeJob(c, st.Job(name))
		if s.State == reconcile.JobRemoved {
			return nil, fmt.Errorf("job %q is no longer declared (state still records its run %s, which the next apply stops): there is nothing to wait for", name, s.RunID)
		}
		out = append(out, s)
	}
	w.last = out
	return out, nil
}

// show prints a line for each job whose state changed since the last
// poll.
func (w *waiter) show(states []reconcile.JobState) {
	for _, s := range states {
		line := fmt.Sprintf("wait: job %q %s", s.Job, waitWords(s))
		if w.shown[s.Job] != line {
			w.shown[s.Job] = line
			fmt.Fprintln(w.io.ErrOut, iostreams.Sanitize(line, false))
		}
	}
}

// verdict is how the wait ends once every job is terminal: nil when all
// succeeded, else exit 1 naming those that did not. Before then, nil.
func (w *waiter) verdict(states []reconcile.JobState) error {
	if !allTerminal(states) {
		return nil
	}
	var bad []string
	for _, s := range states {
		if s.State != state.JobSucceeded {
			bad = append(bad, fmt.Sprintf("job %q %s", s.Job, s.State))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &exitError{code: waitExitFailed, err: errors.New(iostreams.Sanitize(strings.Join(bad, ", "), false))}
}

func allTerminal(states []reconcile.JobState) bool {
	for _, s := range states {
		if !s.Terminal {
			return false
		}
	}
	return true
}

// waitWords is a job's state in a progress line: "running (2/2 nodes)",
// "failed: node 1 on a2 exited with status 3". It holds nothing that
// changes from one poll to the next unless the job does (no clock), so
// that a line is printed only when the job's state changes.
func waitWords(s reconcile.JobState) string {
	switch s.State {
	case reconcile.RunRunning:
		return "running (" + strconv.Itoa(s.Running) + "/" + strconv.Itoa(s.Nodes) + " nodes)"
	case reconcile.RunUnknown:
		return fmt.Sprintf("unknown (%d of %d nodes' hosts did not answer)", s.Unknown, s.Nodes)
	case state.JobSucceeded:
		return "succeeded"
	}
	if s.Message != "" {
		return s.State + ": " + s.Message
	}
	return s.State
}

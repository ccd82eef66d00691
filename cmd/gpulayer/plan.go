package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/internal/codetree"
	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/providers"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/planfile"
	"github.com/gpulayer/gpulayer/reconcile/planview"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/ssh"
)

// planInputs are the flags plan and apply share: what the plan is made
// from.
type planInputs struct {
	dir       string
	statePath string
	vars      []config.VarArg
	environ   []string
	targets   []string
	replace   []string
	refresh   bool
	factsFile string
	// factsRead waits for the --facts document that startFactsRead began
	// reading; nil reads it when it is needed.
	factsRead   func() (*facts.Document, error)
	lockTimeout time.Duration
	lock        bool
	parallelism int
	timeout     time.Duration
}

// startFactsRead begins reading the --facts document, if any, so that it
// is read while the configuration loads (facts.ReadFileAhead).
func (in *planInputs) startFactsRead() {
	if in.factsFile != "" && in.factsRead == nil {
		in.factsRead = facts.ReadFileAhead(in.factsFile)
	}
}

// readFacts is the --facts document.
func (in *planInputs) readFacts() (*facts.Document, error) {
	if in.factsRead != nil {
		return in.factsRead()
	}
	return facts.ReadFile(in.factsFile)
}

func addPlanInputFlags(cmd *cobra.Command, in *planInputs) {
	addVarFlags(cmd, &in.vars)
	addStateFlags(cmd, &in.statePath, &in.lockTimeout, false)
	cmd.Flags().BoolVar(&in.lock, "lock", true, "hold the state lock while reading state")
	cmd.Flags().StringArrayVar(&in.targets, "target", nil, "plan only the job `job.NAME` (repeatable)")
	cmd.Flags().StringArrayVar(&in.replace, "replace", nil, "launch the job `job.NAME` again whatever its state, its restart budgets reset (repeatable)")
	cmd.Flags().BoolVar(&in.refresh, "refresh", true, "probe the machines; false plans from the facts saved in state")
	cmd.Flags().StringVar(&in.factsFile, "facts", "", "plan from the facts document `FILE` (gpulayer probe --out), with no SSH")
	cmd.Flags().IntVar(&in.parallelism, "parallelism", probe.DefaultParallelism, "probe at most `N` hosts at once")
	cmd.Flags().DurationVar(&in.timeout, "probe-timeout", probe.DefaultTimeout, "give up on a host's probe after `DURATION`")
}

func (in *planInputs) check(cmd *cobra.Command) error {
	if in.factsFile != "" && cmd.Flags().Changed("refresh") && in.refresh {
		return fmt.Errorf("--facts and --refresh=true contradict each other: --facts plans with no SSH")
	}
	if in.parallelism < 1 {
		return fmt.Errorf("--parallelism must be at least 1, got %d", in.parallelism)
	}
	if in.timeout <= 0 {
		return fmt.Errorf("--probe-timeout must be positive, got %s", in.timeout)
	}
	if in.lockTimeout < 0 {
		return fmt.Errorf("--lock-timeout must not be negative, got %s", in.lockTimeout)
	}
	if _, err := parseJobAddresses("replace", in.replace); err != nil {
		return err
	}
	_, err := parseTargets(in.targets)
	return err
}

type planOptions struct {
	f                *factory
	in               planInputs
	out              string
	json             bool
	format           string
	detailedExitCode bool
}

func newCmdPlan(f *factory, runF func(*planOptions) error) *cobra.Command {
	opts := &planOptions{f: f}
	cmd := &cobra.Command{
		Use:   "plan [DIR]",
		Short: "Show what apply would launch, replace and stop, and why",
		Long: `plan reads the configuration in DIR (default: the current directory) and the
state beside it, probes every declared host over SSH, places the jobs that
need placing and prints what apply would change, with the reason for every
change (docs/plan.md).

--facts FILE plans from a saved facts document with no SSH at all;
--refresh=false plans from the facts the last apply saved in state.
--out FILE saves the plan, for "gpulayer apply FILE" and "gpulayer show FILE".

Exit status: 0 when the plan was made (with --detailed-exitcode: 0 no
changes, 2 changes), 1 on an error.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.in.dir = "."
			if len(args) == 1 {
				opts.in.dir = args[0]
			}
			opts.in.environ = os.Environ()
			if err := opts.in.check(cmd); err != nil {
				return err
			}
			var err error
			if opts.format, err = resolveFormat(cmd, opts.format, opts.json); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return planRun(opts)
		},
	}
	addPlanInputFlags(cmd, &opts.in)
	cmd.Flags().StringVar(&opts.out, "out", "", "save the plan to `FILE`")
	addFormatFlags(cmd, &opts.format, &opts.json)
	cmd.Flags().BoolVar(&opts.detailedExitCode, "detailed-exitcode", false, "exit 2 when there are changes, 0 when there are none")
	return cmd
}

func planRun(opts *planOptions) error {
	io := opts.f.IO
	ctx, stop := interruptible(context.Background())
	defer stop()
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
	made, err := makePlan(ctx, io, &opts.in, cfg, backend, ws, "plan", false)
	if err != nil {
		return err
	}
	defer made.close()
	if opts.out != "" {
		data, err := made.file.Encode()
		if err != nil {
			return err
		}
		if err := writeFileAtomic(opts.out, data, 0o600); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	if err := writePlan(io, made.plan, opts.format); err != nil {
		return err
	}
	if opts.out != "" && opts.format == formatText {
		fmt.Fprintf(io.Out, "\nSaved the plan to %s. Apply exactly this plan with:\n  gpulayer apply %s\n", iostreams.Sanitize(opts.out, false), iostreams.Sanitize(opts.out, false))
	}
	if opts.detailedExitCode && made.plan.HasChanges() {
		return &exitError{code: 2}
	}
	return nil
}

// Plan formats of --format.
const (
	formatText     = "text"
	formatJSON     = "json"
	formatMarkdown = "markdown"
)

// addFormatFlags adds --format and its alias --json.
func addFormatFlags(cmd *cobra.Command, format *string, asJSON *bool) {
	cmd.Flags().StringVar(format, "format", formatText, "print the plan as `text`, json (docs/plan.md) or markdown (a pull-request comment)")
	cmd.Flags().BoolVar(asJSON, "json", false, "print the plan as JSON (--format json)")
}

// resolveFormat checks --format and folds --json into it.
func resolveFormat(cmd *cobra.Command, format string, asJSON bool) (string, error) {
	if asJSON {
		if cmd.Flags().Changed("format") && format != formatJSON {
			return "", fmt.Errorf("--json and --format %s contradict each other", format)
		}
		return formatJSON, nil
	}
	switch format {
	case formatText, formatJSON, formatMarkdown:
		return format, nil
	}
	return "", fmt.Errorf("--format %q: want text, json or markdown", format)
}

// writePlan prints a plan for people, as JSON, or as markdown.
func writePlan(io *iostreams.IOStreams, p *reconcile.Plan, format string) error {
	switch format {
	case formatJSON:
		enc := json.NewEncoder(io.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(p)
	case formatMarkdown:
		return planview.Markdown(io.Out, p)
	}
	return planview.Text(io.Out, p, planview.Options{Color: io.ColorEnabled()})
}

// madePlan is a plan and everything it was made from.
type madePlan struct {
	plan  *reconcile.Plan
	file  *planfile.File
	cfg   *config.Config // with the created machines as hosts
	state *state.State
	facts *facts.Document
	// provider creates and deletes machines; nil when the configuration
	// and state have none. The caller closes it.
	provider providers.Provider
	// located says the listing reported physical topologies that state
	// did not record; state holds them, not yet saved.
	located bool
	// pool holds the connections of the refresh (nil without one).
	pool *ssh.Pool
	// code and trees are the jobs' code directories as the plan read
	// them: what the plan compares, and what apply sends.
	code  map[string]*state.CodeSpec
	trees map[string]*codetree.Tree
}

// close releases what the plan holds open.
func (m *madePlan) close() {
	if m.provider != nil {
		m.provider.Close()
	}
	if m.pool != nil {
		m.pool.Close()
	}
}

// makePlan loads the configuration and state, refreshes the facts as the
// flags say, and plans. It holds the state lock while it reads, so a plan
// never sees an apply half-way.
func makePlan(ctx context.Context, io *iostreams.IOStreams, in *planInputs, cfg *config.Config, backend state.Backend, ws workspace, command string, destroy bool) (*madePlan, error) {
	// The lock keeps a plan from reading state while an apply is half-way
	// (workspace.mayLock: not where it would create a directory).
	if in.lock && ws.mayLock() {
		lock, err := lockState(ctx, backend, in.lockTimeout, commandLine())
		if err != nil {
			return nil, err
		}
		defer lock.Unlock()
	}
	st, err := backend.Load(ctx)
	if err != nil {
		return nil, err
	}
	targets, _ := parseTargets(in.targets)
	replace, _ := parseJobAddresses("replace", in.replace)
	if err := checkJobNames(cfg, st, "replace", replace); err != nil {
		return nil, err
	}
	if err := checkTargets(cfg, st, targets); err != nil {
		return nil, err
	}
	// Created machines are hosts of their fleets from here on: probed,
	// placed on and reached like declared ones.
	cfg = reconcile.WithMachines(cfg, st.Machines)
	var prov providers.Provider
	var pool *ssh.Pool
	made := false
	defer func() {
		if !made && pool != nil {
			pool.Close()
		}
	}()
	var listed map[string]reconcile.Listing
	located := false
	refresh := reconcile.Refresh{Source: reconcile.RefreshProbe}
	var doc *facts.Document
	switch {
	case in.factsFile != "":
		refresh = reconcile.Refresh{Source: reconcile.RefreshFile, File: in.factsFile}
		if doc, err = in.readFacts(); err != nil {
			return nil, fmt.Errorf("--facts: %w", err)
		}
	case !in.refresh:
		refresh.Source = reconcile.RefreshState
		if st.Facts == nil {
			return nil, fmt.Errorf("%s holds no facts yet (no apply has saved any); plan with a refresh, or with --facts FILE", backend)
		}
		doc = st.Facts
	default:
		// The listing first: the physical topology it reports for a
		// machine recorded without one (GCP reports it some time after
		// the insert) locates the machine for the probe and the plan, and
		// the state an apply saves records it.
		if needsProvider(cfg, st) {
			if prov, err = openProvider(ctx); err != nil {
				return nil, err
			}
			listed = listMachines(ctx, prov, cfg, st)
			if ms, changed := reconcile.ListedMachines(st.Machines, listed); changed {
				st = st.Clone()
				st.Machines = ms
				cfg = reconcile.WithMachines(cfg, st.Machines)
				located = true
			}
		}
		// The pool outlives the plan: an apply's launches and stops reuse
		// the connections of its refresh (madePlan.close closes it).
		pool = newProbePool(in)
		if doc, err = reconcile.RefreshFacts(ctx, pool, cfg, st, refreshProbeOptions(io, in)); err != nil {
			closeProvider(prov)
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			closeProvider(prov)
			return nil, fmt.Errorf("%s interrupted while probing", command)
		}
	}
	if prov == nil && needsProvider(cfg, st) {
		if prov, err = openProvider(ctx); err != nil {
			return nil, err
		}
	}
	code, trees, err := readCode(cfg.Jobs)
	if err != nil && !destroy {
		closeProvider(prov)
		return nil, err
	}
	p := reconcile.MakePlan(reconcile.Input{
		Config: cfg, State: st, Facts: doc, Refresh: refresh, Targets: targets, Version: buildVersion(), Destroy: destroy,
		Listed: listed, Replace: replace, Now: time.Now(), Code: code,
	})
	statePath, remote := ws.record()
	file, err := planfile.New(p, cfg, doc, absDir(in.dir), statePath, code)
	if err != nil {
		closeProvider(prov)
		return nil, err
	}
	file.Config.Backend = remote
	file.Commit = gitCommit(ctx, in.dir)
	made = true
	return &madePlan{plan: p, file: file, cfg: cfg, state: st, facts: doc, provider: prov, pool: pool, located: located, code: code, trees: trees}, nil
}

// refreshProbeOptions are the probe's options, with progress on stderr when it
// is a terminal.
func refreshProbeOptions(io *iostreams.IOStreams, in *planInputs) probe.Options {
	popts := probe.Options{Parallelism: in.parallelism, Timeout: in.timeout}
	if io.IsStderrTTY() {
		popts.Progress = func(done, total int, h *facts.Host) {
			fmt.Fprintf(io.ErrOut, "\r\x1b[Krefreshing: %d/%d hosts (%s)", done, total, iostreams.Sanitize(h.Name, false))
			if done == total {
				fmt.Fprint(io.ErrOut, "\r\x1b[K")
			}
		}
	}
	return popts
}

// checkTargets refuses --target names that neither the configuration nor
// state has.
func checkTargets(cfg *config.Config, st *state.State, targets []string) error {
	return checkJobNames(cfg, st, "target", targets)
}

// checkJobNames refuses names of a --target or --replace that neither the
// configuration nor state has.
func checkJobNames(cfg *config.Config, st *state.State, flag string, names []string) error {
	for _, t := range names {
		if !jobKnown(cfg, st, t) {
			return fmt.Errorf("--%s job.%s: no job %q is declared or recorded in state", flag, t, t)
		}
	}
	return nil
}

// jobKnown says whether the configuration declares a job of that name or
// state records one.
func jobKnown(cfg *config.Config, st *state.State, name string) bool {
	if st.Job(name) != nil {
		return true
	}
	for _, j := range cfg.Jobs {
		if j.Name == name {
			return true
		}
	}
	return false
}

// gitCommit is the commit checked out in dir's git work tree, or "" when
// it is not in one (or git is missing). A saved plan records it for the
// pipeline that applies it.
func gitCommit(ctx context.Context, dir string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "--verify", "-q", "HEAD")
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	commit := strings.TrimSpace(string(out))
	if len(commit) != 40 && len(commit) != 64 {
		return ""
	}
	return commit
}

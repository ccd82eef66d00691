package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/internal/atomicfile"
	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/factsview"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/ssh"
)

type probeOptions struct {
	f           *factory
	dir         string
	out         string
	json        bool
	parallelism int
	timeout     time.Duration
	vars        []config.VarArg
	environ     []string
}

func newCmdProbe(f *factory, runF func(*probeOptions) error) *cobra.Command {
	opts := &probeOptions{f: f}
	cmd := &cobra.Command{
		Use:   "probe [DIR]",
		Short: "Ask every declared machine where it is and what GPUs it has",
		Long: `probe opens one SSH session to every host declared in DIR (default: the
current directory), runs one script there, and prints what each machine
reported: its location, GPUs, free GPUs and torch version. A host that cannot
be reached is reported and does not stop the others.

--out saves the facts document (docs/facts.md), from which plans can be made
offline. Progress goes to stderr when it is a terminal.

Exit status: 0 when every host was probed, 1 when the configuration is
invalid or some host could not be probed.`,
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
				// probe.Options reads 0 as its default; a flag that says
				// 0 or less is a mistake, not a request for 90 s.
				return fmt.Errorf("--timeout must be more than 0, got %s", opts.timeout)
			}
			if runF != nil {
				return runF(opts)
			}
			return probeRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.out, "out", "", "write the facts document to `FILE`")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the facts document as JSON")
	cmd.Flags().IntVar(&opts.parallelism, "parallelism", probe.DefaultParallelism, "probe at most `N` hosts at once")
	cmd.Flags().DurationVar(&opts.timeout, "timeout", probe.DefaultTimeout, "give up on a host after `DURATION`")
	addVarFlags(cmd, &opts.vars)
	return cmd
}

func probeRun(opts *probeOptions) error {
	io := opts.f.IO
	cfg, diags := config.Load(opts.dir, config.LoadOptions{Vars: opts.vars, Environ: opts.environ})
	if len(diags) > 0 {
		if err := config.WriteDiagnostics(io.ErrOut, diags, cfg.Files, config.RenderOptions{Color: io.ColorEnabled()}); err != nil {
			return err
		}
	}
	if diags.HasErrors() {
		return &exitError{code: 1}
	}
	machines, err := probe.Machines(cfg)
	if err != nil {
		return err
	}
	if len(machines) == 0 {
		return fmt.Errorf("%s declares no hosts to probe", opts.dir)
	}
	ctx, stop := interruptible(context.Background())
	defer stop()
	doc := probeMachines(ctx, io, machines, opts.parallelism, opts.timeout)
	return reportFacts(io, doc, opts.out, opts.json)
}

// probeMachines probes machines through one SSH pool, with progress on
// stderr when it is a terminal. gpulayer sandbox --once uses it too.
func probeMachines(ctx context.Context, io *iostreams.IOStreams, machines []probe.Machine, parallelism int, timeout time.Duration) *facts.Document {
	// A probe prints about 10 KB: the pool keeps no more of a host's
	// output than the probe may print, so 64 hosts at once cannot hold
	// gigabytes (docs/facts.md, Limits).
	pool := ssh.NewPool(ssh.Options{Parallelism: parallelism, MaxOutputBytes: facts.MaxOutputBytes})
	defer pool.Close()
	popts := probe.Options{Parallelism: parallelism, Timeout: timeout}
	if io.IsStderrTTY() {
		popts.Progress = func(done, total int, h *facts.Host) {
			// \r and erase-line redraw one line in place.
			fmt.Fprintf(io.ErrOut, "\r\x1b[Kprobing: %d/%d hosts (%s)", done, total, iostreams.Sanitize(h.Name, false))
			if done == total {
				fmt.Fprint(io.ErrOut, "\r\x1b[K")
			}
		}
	}
	return probe.Fleet(ctx, pool, machines, popts)
}

// reportFacts saves doc to out (when set), prints it as a table or JSON, and
// returns exit status 1 when some host could not be probed.
func reportFacts(io *iostreams.IOStreams, doc *facts.Document, out string, asJSON bool) error {
	if out != "" {
		if err := writeFactsFile(out, doc); err != nil {
			return err
		}
	}
	if asJSON {
		enc := json.NewEncoder(io.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			return err
		}
	} else if err := factsview.WriteTable(io.Out, doc, io.ColorEnabled()); err != nil {
		return err
	}
	failed := 0
	for _, h := range doc.Hosts {
		if h.Status != facts.StatusOK {
			failed++
		}
	}
	if failed > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d of %d hosts could not be probed", failed, len(doc.Hosts))}
	}
	return nil
}

// writeFactsFile writes doc as indented JSON, atomically, so a reader never
// sees half a document. When path is a symbolic link, the file it points
// to is replaced and the link kept, as a shell's > would.
func writeFactsFile(path string, doc *facts.Document) error {
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	target := path
	if st, err := os.Lstat(path); err == nil && st.Mode()&os.ModeSymlink != 0 {
		if target, err = filepath.EvalSymlinks(path); err != nil {
			return fmt.Errorf("--out %s: a symbolic link to a file that cannot be reached: %w", path, err)
		}
	}
	if st, err := os.Stat(target); err == nil && !st.Mode().IsRegular() {
		return fmt.Errorf("--out %s: not a regular file", path)
	}
	if err := atomicfile.Write(target, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--out %s: %w", path, err)
	}
	return nil
}

package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpulayer/gpulayer/reconcile/planfile"
	"github.com/gpulayer/gpulayer/reconcile/planview"
)

type showOptions struct {
	f         *factory
	planFile  string
	statePath string
	json      bool
	format    string
}

func newCmdShow(f *factory, runF func(*showOptions) error) *cobra.Command {
	opts := &showOptions{f: f}
	cmd := &cobra.Command{
		Use:   "show [PLANFILE]",
		Short: "Show a saved plan, or what state records",
		Long: `show renders a plan saved with "gpulayer plan --out FILE" exactly as plan
printed it, or, without an argument, what the state of the current directory
records: each job with its status, run, and nodes (host, address, GPUs, pid).

--json prints the plan document (docs/plan.md) or the state document
(docs/state.md) without its saved facts.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.planFile = args[0]
			}
			var err error
			if opts.format, err = resolveFormat(cmd, opts.format, opts.json); err != nil {
				return err
			}
			if opts.planFile == "" && opts.format == formatMarkdown {
				return fmt.Errorf("--format markdown renders a saved plan: give its file")
			}
			if runF != nil {
				return runF(opts)
			}
			return showRun(opts)
		},
	}
	addStateFlags(cmd, &opts.statePath, nil, true)
	addFormatFlags(cmd, &opts.format, &opts.json)
	return cmd
}

func showRun(opts *showOptions) error {
	io := opts.f.IO
	if opts.planFile != "" {
		f, err := planfile.ReadFile(opts.planFile)
		if err != nil {
			return err
		}
		return writePlan(io, f.Plan, opts.format)
	}
	ctx, stop := interruptible(context.Background())
	defer stop()
	ws, err := workspaceOf(io, ".", opts.statePath)
	if err != nil {
		return err
	}
	backend, closeBackend, err := ws.backend(ctx)
	if err != nil {
		return err
	}
	defer closeBackend()
	st, err := backend.Load(ctx)
	if err != nil {
		return err
	}
	if opts.format == formatJSON {
		shown := *st
		shown.Facts = nil
		enc := json.NewEncoder(io.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(&shown)
	}
	return planview.State(io.Out, st, backend.String(), planview.Options{Color: io.ColorEnabled()})
}

package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpulayer/gpulayer/internal/iostreams"
)

type forceUnlockOptions struct {
	f         *factory
	id        string
	dir       string
	statePath string
}

func newCmdForceUnlock(f *factory, runF func(*forceUnlockOptions) error) *cobra.Command {
	opts := &forceUnlockOptions{f: f}
	cmd := &cobra.Command{
		Use:   "force-unlock LOCK_ID [DIR]",
		Short: "Break a state lock whose holder is stuck",
		Long: `force-unlock removes the state lock of the configuration in DIR (default: the
current directory), but only when its holder's lock ID is LOCK_ID: the one a
refused command printed. A process that crashed releases its lock by itself;
this is for one that hangs. Should it wake up and save, the save is refused
if anyone else saved in the meantime (docs/state.md).`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.id, opts.dir = args[0], "."
			if len(args) == 2 {
				opts.dir = args[1]
			}
			if runF != nil {
				return runF(opts)
			}
			return forceUnlockRun(opts)
		},
	}
	addStateFlags(cmd, &opts.statePath, nil, false)
	return cmd
}

func forceUnlockRun(opts *forceUnlockOptions) error {
	ctx, stop := interruptible(context.Background())
	defer stop()
	ws, err := workspaceOf(opts.f.IO, opts.dir, opts.statePath)
	if err != nil {
		return err
	}
	backend, closeBackend, err := ws.backend(ctx)
	if err != nil {
		return err
	}
	defer closeBackend()
	if err := backend.ForceUnlock(ctx, opts.id); err != nil {
		return err
	}
	fmt.Fprintf(opts.f.IO.Out, "Lock %s on %s broken.\n", iostreams.Sanitize(opts.id, false), backend)
	return nil
}

package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

type stateCopyOptions struct {
	f    *factory
	push bool
	file string
	dir  string
}

func newCmdState(f *factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Move state between a local file and the configuration's backend",
	}
	cmd.AddCommand(newCmdStateCopy(f, true, nil), newCmdStateCopy(f, false, nil))
	return cmd
}

func newCmdStateCopy(f *factory, push bool, runF func(*stateCopyOptions) error) *cobra.Command {
	opts := &stateCopyOptions{f: f, push: push}
	use, short, long := "push FILE [DIR]", "Copy a local state file into the configuration's backend",
		`push copies the state in the local FILE (a .gpulayer/state.json) into the backend
the configuration in DIR (default: the current directory) declares, as its
next version: how a configuration moves its state into a bucket. It refuses
to overwrite a state of another lineage, or a newer one, and holds both locks.`
	if !push {
		use, short, long = "pull FILE [DIR]", "Copy the configuration's backend state into a local file",
			`pull copies the state of the backend the configuration in DIR declares into the
local FILE, as that file's next version: how a configuration moves its state
back to a local file (then remove the backend block). It refuses to overwrite
a state of another lineage, or a newer one, and holds both locks.`
	}
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.file, opts.dir = args[0], "."
			if len(args) == 2 {
				opts.dir = args[1]
			}
			if runF != nil {
				return runF(opts)
			}
			return stateCopyRun(opts)
		},
	}
	return cmd
}

func stateCopyRun(opts *stateCopyOptions) error {
	io := opts.f.IO
	ctx, stop := interruptible(context.Background())
	defer stop()
	ws, err := workspaceOf(io, opts.dir, "")
	if err != nil {
		return err
	}
	if ws.remote == nil {
		return fmt.Errorf("the configuration in %s declares no remote backend: its state is already the local file %s", opts.dir, ws.statePath)
	}
	remote, closeRemote, err := ws.backend(ctx)
	if err != nil {
		return err
	}
	defer closeRemote()
	local, closeLocal, err := newWorkspace(opts.dir, opts.file, nil).backend(ctx)
	if err != nil {
		return err
	}
	defer closeLocal()
	from, to := state.Backend(local), remote
	if !opts.push {
		from, to = remote, local
	}
	s, err := state.Copy(ctx, from, to, state.NewLockInfo(commandLine()))
	if err != nil {
		return err
	}
	fmt.Fprintf(io.Out, "Copied state of lineage %s from %s to %s (now serial %d).\n",
		iostreams.Sanitize(s.Lineage, false), iostreams.Sanitize(from.String(), false), iostreams.Sanitize(to.String(), false), s.Serial)
	return nil
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/reconcile/state/gcsstate"
)

// workspace is what the commands that read or write state share: the
// configuration directory and where its state is (a local file, or the
// configuration's backend block).
type workspace struct {
	dir       string // the configuration directory, as given
	statePath string // --state, or DIR/.gpulayer/state.json; "" for a remote backend
	remote    *config.Backend
}

// addStateFlags adds --state and --lock-timeout. A command that only
// reads state (readOnly) says so in --state's help, so that its help does
// not contradict its own "changes nothing".
func addStateFlags(cmd *cobra.Command, statePath *string, lockTimeout *time.Duration, readOnly bool) {
	use := "read and write"
	if readOnly {
		use = "read"
	}
	cmd.Flags().StringVar(statePath, "state", "", use+" state at the local `FILE` (default: the configuration's backend, or DIR/.gpulayer/state.json)")
	if lockTimeout != nil {
		cmd.Flags().DurationVar(lockTimeout, "lock-timeout", 0, "wait up to `DURATION` for the state lock (0: fail at once, naming its holder)")
	}
}

// newWorkspace says where the state of the configuration in dir is:
// --state (statePath) when given, else the configuration's backend block
// (be, nil for none), else the local default.
func newWorkspace(dir, statePath string, be *config.Backend) workspace {
	if statePath != "" {
		return workspace{dir: dir, statePath: statePath}
	}
	if be != nil && be.Kind == config.BackendGCS {
		return workspace{dir: dir, remote: be}
	}
	return workspace{dir: dir, statePath: state.DefaultPath(dir)}
}

// backend opens where the state is; close releases it.
func (w workspace) backend(ctx context.Context) (b state.Backend, closeFn func(), err error) {
	if w.remote != nil {
		g, err := gcsstate.New(ctx, gcsstate.Options{Bucket: w.remote.Bucket, Prefix: w.remote.Prefix, Endpoint: w.remote.Endpoint})
		if err != nil {
			return nil, nil, err
		}
		g.GpulayerVersion = buildVersion()
		return g, func() { g.Close() }, nil
	}
	local := state.NewLocal(w.statePath)
	local.GpulayerVersion = buildVersion()
	return local, func() {}, nil
}

// workspaceOf is the workspace of the configuration in dir for commands
// that need only to know where its state is: --state, else the
// configuration's backend block (so the configuration is loaded), else
// the local default.
func workspaceOf(io *iostreams.IOStreams, dir, statePath string) (workspace, error) {
	if statePath != "" {
		return newWorkspace(dir, statePath, nil), nil
	}
	cfg, err := loadConfig(io, dir, nil, os.Environ())
	if err != nil {
		return workspace{}, err
	}
	return newWorkspace(dir, "", cfg.Backend), nil
}

// mayLock says whether a read-only command should take the lock: always
// for a remote backend; for a local file only where its directory exists
// (taking the lock would create it, and a plan in a read-only checkout
// must not need to write).
func (w workspace) mayLock() bool {
	if w.remote != nil {
		return true
	}
	_, err := os.Stat(filepath.Dir(w.statePath))
	return err == nil
}

// record is what a saved plan keeps of where its state is.
func (w workspace) record() (statePath string, remote *config.Backend) {
	if w.remote != nil {
		return "", w.remote
	}
	return absDir(w.statePath), nil
}

// loadConfig loads the configuration, printing its diagnostics; errors end
// the command with status 1.
func loadConfig(io *iostreams.IOStreams, dir string, vars []config.VarArg, environ []string) (*config.Config, error) {
	cfg, diags := config.Load(dir, config.LoadOptions{Vars: vars, Environ: environ})
	if len(diags) > 0 {
		if err := config.WriteDiagnostics(io.ErrOut, diags, cfg.Files, config.RenderOptions{Color: io.ColorEnabled()}); err != nil {
			return nil, err
		}
	}
	if diags.HasErrors() {
		return nil, &exitError{code: 1}
	}
	return cfg, nil
}

// lockState takes the state lock for command, waiting up to wait.
func lockState(ctx context.Context, b state.Backend, wait time.Duration, command string) (state.Lock, error) {
	lock, err := b.Lock(ctx, state.NewLockInfo(command), wait)
	if err != nil {
		var locked *state.LockedError
		if errors.As(err, &locked) {
			return nil, &exitError{code: 1, err: err}
		}
		return nil, fmt.Errorf("lock %s: %w", b, err)
	}
	return lock, nil
}

// commandLine is the command as the lock records it: "gpulayer plan
// examples/quickstart".
func commandLine() string {
	args := append([]string{"gpulayer"}, os.Args[1:]...)
	return strings.Join(args, " ")
}

// interruptible returns a context that SIGINT (Ctrl-C), SIGTERM or SIGHUP
// cancels: a probe reports the hosts done so far; apply finishes the steps
// in flight, saves and exits. The first signal also gives the signals their
// default handling back, so that a second one ends gpulayer at once.
func interruptible(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	context.AfterFunc(ctx, stop)
	return ctx, stop
}

// absDir is dir made absolute, for records that outlive the working
// directory.
func absDir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// parseTargets reads --target job.NAME flags into job names.
func parseTargets(targets []string) ([]string, error) {
	return parseJobAddresses("target", targets)
}

// parseJobAddresses reads the job.NAME values of a repeatable flag.
func parseJobAddresses(flag string, values []string) ([]string, error) {
	var out []string
	for _, t := range values {
		name, ok := strings.CutPrefix(t, "job.")
		if !ok || name == "" {
			return nil, fmt.Errorf("--%s %q: want job.NAME", flag, t)
		}
		out = append(out, name)
	}
	return out, nil
}

// writeFileAtomic writes data to path through a synced temporary file in
// the same directory and a rename.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

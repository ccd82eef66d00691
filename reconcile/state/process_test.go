//go:build unix

package state

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests below run this test binary again as a child process that
// saves or holds a lock, chosen by helperEnv, so that a crash and a second
// process are real.
const (
	helperEnv   = "GPULAYER_STATE_TEST_HELPER"
	pathEnv     = "GPULAYER_STATE_TEST_PATH"
	crashAtEnv  = "GPULAYER_STATE_TEST_CRASH_AT"
	holderCmd   = "gpulayer apply --auto-approve (test holder)"
	childBudget = time.Minute
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

// helper is the child process: "save" saves one more version, killing
// itself with SIGKILL after the step named by crashAtEnv ("state:renamed");
// "hold" takes the lock, says "locked ID" on stdout and holds it until its
// stdin closes.
func helper(mode string) int {
	l := NewLocal(os.Getenv(pathEnv))
	ctx, cancel := context.WithTimeout(context.Background(), childBudget)
	defer cancel()
	lock, err := l.Lock(ctx, NewLockInfo(holderCmd), 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	switch mode {
	case "save":
		at := os.Getenv(crashAtEnv)
		afterStep = func(role, step string) {
			if role+":"+step == at {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
		}
		s, err := l.Load(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		s.SetJob(Job{Name: "written-by-child", Status: JobLaunching})
		if err := l.Save(ctx, s, s.Serial); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Fprintf(os.Stderr, "saved without reaching step %q\n", at)
		return 3
	case "full":
		return fullDiskSave(ctx, l)
	case "hold":
		fmt.Printf("locked %s\n", lock.Info().ID)
		io.Copy(io.Discard, os.Stdin)
		if err := lock.Unlock(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
	return 2
}

// child starts the helper in mode on the state file path.
func child(t *testing.T, ctx context.Context, mode, path string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{helperEnv + "=" + mode, pathEnv + "=" + path}, env...)...)
	cmd.Stderr = &strings.Builder{}
	return cmd
}

func TestSaveKilledAtEachStepLeavesTheOldOrTheNewVersion(t *testing.T) {
	// Before the save: serial 2 in the file, serial 1 in the backup. The
	// child writes serial 3.
	for _, c := range []struct {
		step                  string
		stateSerial, bkSerial uint64
	}{
		{"backup:" + stepTempWritten, 2, 1},
		{"backup:" + stepTempSynced, 2, 1},
		{"backup:" + stepRenamed, 2, 2},
		{"backup:" + stepDirSynced, 2, 2},
		{"state:" + stepTempWritten, 2, 2},
		{"state:" + stepTempSynced, 2, 2},
		{"state:" + stepRenamed, 3, 2},
		{"state:" + stepDirSynced, 3, 2},
	} {
		t.Run(c.step, func(t *testing.T) {
			l := NewLocal(DefaultPath(t.TempDir()))
			s := sample()
			mustSave(t, l, s, 0)
			mustSave(t, l, s, 1)
			old := readFile(t, l.Path())

			ctx, cancel := context.WithTimeout(context.Background(), childBudget)
			defer cancel()
			cmd := child(t, ctx, "save", l.Path(), crashAtEnv+"="+c.step)
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled() || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child was not killed at %s: %v; stderr:\n%s", c.step, err, cmd.Stderr)
			}
			if strings.HasSuffix(c.step, stepTempWritten) || strings.HasSuffix(c.step, stepTempSynced) {
				if temps, _ := filepath.Glob(filepath.Join(filepath.Dir(l.Path()), ".state.json*.tmp-*")); len(temps) != 1 {
					t.Errorf("a write killed at %s left temporary files %v, want the one it was writing", c.step, temps)
				}
			}

			got := mustLoad(t, l)
			if got.Serial != c.stateSerial {
				t.Fatalf("after a kill at %s the state has serial %d, want %d", c.step, got.Serial, c.stateSerial)
			}
			if c.stateSerial == 2 && string(readFile(t, l.Path())) != string(old) {
				t.Errorf("after a kill at %s the state is neither the old version nor the new", c.step)
			}
			if c.stateSerial == 3 && (got.Job("written-by-child") == nil || got.Lineage != s.Lineage) {
				t.Errorf("after a kill at %s the new version lacks the child's job or lineage: %+v", c.step, got)
			}
			backup, err := decode(BackupPath(l.Path()), readFile(t, BackupPath(l.Path())))
			if err != nil || backup.Serial != c.bkSerial {
				t.Fatalf("after a kill at %s the backup is %+v, %v; want serial %d", c.step, backup, err, c.bkSerial)
			}

			// The kernel released the dead child's lock; the next writer
			// goes on from what is there and clears what the crash left.
			lock, err := l.Lock(context.Background(), NewLockInfo("after the crash"), 0)
			if err != nil {
				t.Fatalf("the lock of a killed writer is still held: %v", err)
			}
			defer lock.Unlock()
			mustSave(t, l, got, got.Serial)
			if temps, _ := filepath.Glob(filepath.Join(filepath.Dir(l.Path()), ".state.json*.tmp-*")); len(temps) != 0 {
				t.Errorf("the save after the crash left temporary files %v", temps)
			}
		})
	}
}

// holder is a child process holding the lock.
type holder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	id    string
}

func startHolder(t *testing.T, ctx context.Context, path string) *holder {
	t.Helper()
	cmd := child(t, ctx, "hold", path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		id, ok := strings.CutPrefix(strings.TrimSpace(s), "locked ")
		if !ok {
			t.Fatalf("holder said %q; stderr:\n%s", s, cmd.Stderr)
		}
		return &holder{cmd: cmd, stdin: stdin, id: id}
	case <-ctx.Done():
		t.Fatalf("holder did not take the lock: %v", ctx.Err())
	}
	return nil
}

func TestLockHeldByAnotherProcessFailsNamingItOrWaitsForIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), childBudget)
	defer cancel()
	l := NewLocal(DefaultPath(t.TempDir()))
	h := startHolder(t, ctx, l.Path())

	_, err := l.Lock(ctx, NewLockInfo("gpulayer plan"), 0)
	var locked *LockedError
	if !errors.As(err, &locked) {
		t.Fatalf("Lock with no wait = %v, want a *LockedError", err)
	}
	host, _ := os.Hostname()
	if got := locked.Holder; got.PID != h.cmd.Process.Pid || got.Command != holderCmd || got.ID != h.id || got.Host != host || got.Since.IsZero() {
		t.Errorf("holder = %+v, want pid %d, command %q, ID %s", got, h.cmd.Process.Pid, holderCmd, h.id)
	}
	for _, want := range []string{l.Path(), fmt.Sprintf("pid %d", h.cmd.Process.Pid), holderCmd, "gpulayer force-unlock " + h.id} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if locked.Waited != 0 {
		t.Errorf("Lock with no wait says it waited %s", locked.Waited)
	}

	// A waiter gets the lock once the holder lets it go; the holder is
	// told to only after the waiter has found the lock held.
	busy := make(chan struct{}, 1)
	lockBusy = func() {
		select {
		case busy <- struct{}{}:
		default:
		}
	}
	defer func() { lockBusy = nil }()
	type result struct {
		lock Lock
		err  error
	}
	got := make(chan result, 1)
	go func() {
		lock, err := l.Lock(ctx, NewLockInfo("gpulayer apply (waiting)"), childBudget)
		got <- result{lock, err}
	}()
	select {
	case <-busy:
	case <-ctx.Done():
		t.Fatal("the waiter never found the lock held")
	}
	h.stdin.Close()
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("waiting Lock = %v; holder stderr:\n%s", r.err, h.cmd.Stderr)
		}
		if err := r.lock.Unlock(); err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the waiter did not get the lock")
	}
	if err := h.cmd.Wait(); err != nil {
		t.Errorf("holder: %v; stderr:\n%s", err, h.cmd.Stderr)
	}
}

func TestLockOfAKilledHolderIsFree(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), childBudget)
	defer cancel()
	l := NewLocal(DefaultPath(t.TempDir()))
	h := startHolder(t, ctx, l.Path())
	if _, err := l.Lock(ctx, NewLockInfo("gpulayer plan"), 0); err == nil {
		t.Fatal("Lock succeeded while the holder was alive")
	}
	if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	h.cmd.Wait()
	lock, err := l.Lock(ctx, NewLockInfo("gpulayer apply"), 0)
	if err != nil {
		t.Fatalf("Lock after the holder was killed = %v", err)
	}
	if err := lock.Unlock(); err != nil {
		t.Fatal(err)
	}
}

package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func mustLock(t *testing.T, l *Local, command string) Lock {
	t.Helper()
	lock, err := l.Lock(context.Background(), NewLockInfo(command), 0)
	if err != nil {
		t.Fatalf("Lock(%q): %v", command, err)
	}
	return lock
}

func TestLockFileRecordsTheHolderUntilUnlock(t *testing.T) {
	l := NewLocal(DefaultPath(t.TempDir()))
	l.GpulayerVersion = "v1.2.3"
	lock := mustLock(t, l, "gpulayer apply")
	path := LockPath(l.Path())
	var rec LockInfo
	if err := json.Unmarshal(readFile(t, path), &rec); err != nil {
		t.Fatalf("lock file %s: %v", path, err)
	}
	host, _ := os.Hostname()
	if rec != lock.Info() || rec.PID != os.Getpid() || rec.Host != host || rec.Command != "gpulayer apply" ||
		!uuidRE.MatchString(rec.ID) || rec.Version != "v1.2.3" || rec.Since.IsZero() {
		t.Errorf("lock file records %+v, Info() %+v", rec, lock.Info())
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode() != 0o600 {
		t.Errorf("lock file mode %v, %v", fi.Mode(), err)
	}
	if err := lock.Unlock(); err != nil {
		t.Fatal(err)
	}
	if data := readFile(t, path); len(data) != 0 {
		t.Errorf("lock file after Unlock holds %q", data)
	}
	if err := lock.Unlock(); err != nil {
		t.Errorf("second Unlock = %v", err)
	}
	mustLock(t, l, "gpulayer plan").Unlock()
}

func TestLockIsNotReentrant(t *testing.T) {
	l := NewLocal(DefaultPath(t.TempDir()))
	first := mustLock(t, l, "first")
	defer first.Unlock()
	_, err := NewLocal(l.Path()).Lock(context.Background(), NewLockInfo("second"), 0)
	var locked *LockedError
	if !errors.As(err, &locked) || locked.Holder.ID != first.Info().ID || locked.LockFile != LockPath(l.Path()) {
		t.Fatalf("second Lock = %v, want a *LockedError naming the first", err)
	}
}

func TestLockWaitingGivesUpWhenTheContextEnds(t *testing.T) {
	l := NewLocal(DefaultPath(t.TempDir()))
	held := mustLock(t, l, "holder")
	defer held.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	lockBusy = cancel // the context ends once the lock was found held
	defer func() { lockBusy = nil }()
	_, err := l.Lock(ctx, NewLockInfo("waiter"), time.Hour)
	var locked *LockedError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &locked) || locked.Holder.ID != held.Info().ID {
		t.Fatalf("Lock = %v, want the holder and context.Canceled", err)
	}
	if !strings.Contains(err.Error(), "waited") || !strings.Contains(err.Error(), "stopped waiting: context canceled") {
		t.Errorf("error %q does not say it waited and why it stopped", err)
	}
}

func TestLockWaitingGivesUpAfterTheWait(t *testing.T) {
	l := NewLocal(DefaultPath(t.TempDir()))
	held := mustLock(t, l, "holder")
	defer held.Unlock()
	_, err := l.Lock(context.Background(), NewLockInfo("waiter"), 30*time.Millisecond)
	var locked *LockedError
	if !errors.As(err, &locked) || locked.Waited < 30*time.Millisecond || !strings.Contains(err.Error(), "; waited ") {
		t.Fatalf("Lock = %v, want a *LockedError after waiting", err)
	}
}

func TestLockedErrorWithoutAHolderRecordSaysSo(t *testing.T) {
	e := &LockedError{Where: "s.json", LockFile: "s.lock"}
	if got, want := e.Error(), "state s.json is locked, but its lock file s.lock names no holder yet; try again"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestConflictErrorSaysWhatChanged(t *testing.T) {
	for _, c := range []struct {
		e    ConflictError
		want string
	}{
		{ConflictError{Where: "s", ExpectedSerial: 4, FoundSerial: 5, ExpectedLineage: "L", FoundLineage: "L"}, "state s changed since it was read: serial 5, expected 4"},
		{ConflictError{Where: "s", ExpectedSerial: 5, FoundSerial: 5, ExpectedLineage: "L", FoundLineage: "M"}, "state s changed since it was read: it is of lineage M, not L"},
		{ConflictError{Where: "s", ExpectedSerial: 5, FoundSerial: 5, FoundLineage: "M"}, "state s changed since it was read: it is of lineage M (serial 5), and the state being saved has none: it was not read from there"},
		{ConflictError{Where: "s", ExpectedSerial: 5, ExpectedLineage: "L"}, "state s changed since it was read: it no longer exists (expected serial 5)"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("%+v: Error() = %q, want %q", c.e, got, c.want)
		}
	}
}

func TestForceUnlockBreaksOnlyTheNamedLock(t *testing.T) {
	ctx := context.Background()
	l := NewLocal(DefaultPath(t.TempDir()))
	s := sample()
	mustSave(t, l, s, 0)

	// A holder that hangs: it loaded serial 1 and holds the lock.
	stuck := NewLocal(l.Path())
	stuckLock := mustLock(t, stuck, "gpulayer apply (stuck)")
	stuckState := mustLoad(t, stuck)
	path := LockPath(l.Path())
	record := readFile(t, path)

	err := l.ForceUnlock(ctx, "not-the-id")
	if err == nil || !strings.Contains(err.Error(), stuckLock.Info().ID) || !strings.Contains(err.Error(), `"gpulayer apply (stuck)"`) || !strings.Contains(err.Error(), `lock ID "not-the-id" is not the holder's`) {
		t.Fatalf("ForceUnlock with another ID = %v, want a refusal naming the holder", err)
	}
	if !bytes.Equal(readFile(t, path), record) {
		t.Error("a refused ForceUnlock changed the lock file")
	}
	if _, err := l.Lock(ctx, NewLockInfo("gpulayer apply"), 0); err == nil {
		t.Fatal("Lock succeeded after a refused ForceUnlock")
	}

	if err := l.ForceUnlock(ctx, stuckLock.Info().ID); err != nil {
		t.Fatalf("ForceUnlock with the holder's ID = %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lock file after ForceUnlock: %v", err)
	}
	next := mustLock(t, l, "gpulayer apply")
	defer next.Unlock()
	s = mustLoad(t, l)
	s.SetJob(Job{Name: "new", Status: JobRunning})
	mustSave(t, l, s, s.Serial)

	// The broken holder wakes up: its write fails, and its Unlock leaves
	// the new holder's lock alone.
	stuckState.SetJob(Job{Name: "stale", Status: JobRunning})
	var conflict *ConflictError
	if err := stuck.Save(ctx, stuckState, stuckState.Serial); !errors.As(err, &conflict) {
		t.Errorf("Save by the broken holder = %v, want a *ConflictError", err)
	}
	if err := stuckLock.Unlock(); err != nil {
		t.Fatal(err)
	}
	var rec LockInfo
	if err := json.Unmarshal(readFile(t, path), &rec); err != nil || rec.ID != next.Info().ID {
		t.Errorf("after the broken holder's Unlock the lock file records %+v, %v; want %s", rec, err, next.Info().ID)
	}
	if _, err := l.Lock(ctx, NewLockInfo("third"), 0); err == nil {
		t.Error("Lock succeeded while the new holder holds it")
	}
}

func TestForceUnlockOfAnUnlockedStateFails(t *testing.T) {
	ctx := context.Background()
	l := NewLocal(DefaultPath(t.TempDir()))
	if err := l.ForceUnlock(ctx, "x"); err == nil || !strings.Contains(err.Error(), "is not locked: there is no lock file "+LockPath(l.Path())) {
		t.Errorf("ForceUnlock with no lock file = %v", err)
	}
	mustLock(t, l, "done").Unlock()
	if err := l.ForceUnlock(ctx, "x"); err == nil || !strings.Contains(err.Error(), "is not locked") {
		t.Errorf("ForceUnlock of a released lock = %v", err)
	}
}

func TestLockOfAFileRemovedWhileLockingStartsAgain(t *testing.T) {
	// A Lock that opened the lock file just before ForceUnlock removed it,
	// and locked it once the broken holder let go, holds a lock on a file
	// no one else opens: it must start again on the new file.
	ctx := context.Background()
	l := NewLocal(DefaultPath(t.TempDir()))
	first := mustLock(t, l, "first")
	lockOpened = func() {
		lockOpened = nil
		if err := l.ForceUnlock(ctx, first.Info().ID); err != nil {
			t.Error(err)
		}
		first.Unlock()
	}
	defer func() { lockOpened = nil }()
	second := mustLock(t, l, "second")
	defer second.Unlock()
	var rec LockInfo
	if err := json.Unmarshal(readFile(t, LockPath(l.Path())), &rec); err != nil || rec.ID != second.Info().ID {
		t.Errorf("lock file records %+v, %v; want the second holder", rec, err)
	}
	if _, err := l.Lock(ctx, NewLockInfo("third"), 0); err == nil {
		t.Error("a third Lock succeeded while the second holds the lock")
	}
}

func TestLockFileThatIsASymlinkIsRefused(t *testing.T) {
	dir := t.TempDir()
	l := NewLocal(DefaultPath(dir))
	os.MkdirAll(filepath.Dir(l.Path()), 0o700)
	if err := os.Symlink(filepath.Join(dir, "elsewhere"), LockPath(l.Path())); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Lock(context.Background(), NewLockInfo("x"), 0); err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Fatalf("Lock through a symlink = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "elsewhere")); !errors.Is(err, os.ErrNotExist) {
		t.Error("Lock created the symlink's target")
	}
}

func TestNewLockInfoClipsALongCommand(t *testing.T) {
	info := NewLockInfo(strings.Repeat("é", maxCommandBytes))
	if len(info.Command) > maxCommandBytes+len("…") || !strings.HasSuffix(info.Command, "…") || !strings.HasPrefix(info.Command, "éé") {
		t.Errorf("command of %d bytes kept as %d bytes", 2*maxCommandBytes, len(info.Command))
	}
	if info.PID != os.Getpid() || info.ID == NewLockInfo("x").ID {
		t.Errorf("NewLockInfo = %+v", info)
	}
}

package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"sync"
	"time"
	"unicode/utf8"
)

const (
	// maxLockFileBytes caps what is read of a lock file: 64 KiB. A holder
	// record is a few hundred bytes.
	maxLockFileBytes = 64 << 10
	// maxCommandBytes caps the command a LockInfo records: 1 KiB.
	maxCommandBytes = 1 << 10
	// lockPollMax is the longest pause between two tries of a waiting
	// Lock; the pauses start at lockPollMin and double.
	lockPollMin = 10 * time.Millisecond
	lockPollMax = 500 * time.Millisecond
)

// lockBusy, when set, is called each time Lock finds the lock held; the
// tests use it to release a lock only once a waiter is waiting for it.
// lockOpened, when set, is called between opening the lock file and
// locking it, where the tests break the lock under a Lock.
var lockBusy, lockOpened func()

// NewLockInfo describes this process as a lock holder running command
// ("gpulayer apply"): a random ID, the pid, host name and user.
func NewLockInfo(command string) LockInfo {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return LockInfo{
		ID:      newUUID(),
		PID:     os.Getpid(),
		Host:    host,
		User:    name,
		Command: clipCommand(command),
		Since:   time.Now().UTC(),
	}
}

// clipCommand keeps at most maxCommandBytes of a command, cut at a rune
// boundary.
func clipCommand(s string) string {
	if len(s) <= maxCommandBytes {
		return s
	}
	s = s[:maxCommandBytes]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// Lock takes the exclusive lock on the state: flock(2) on LockPath, which
// the kernel releases when the holder exits, however it exits. The lock
// file then records who holds it (who, with Since set to now, and ID and
// Version filled in when empty), so that a Lock that fails can name the
// holder. With wait > 0 it tries again, at growing intervals, until wait
// has passed or ctx is done. The lock is not reentrant: a second Lock of
// the same state in one process fails as any other would.
func (l *Local) Lock(ctx context.Context, who LockInfo, wait time.Duration) (Lock, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if who.ID == "" {
		who.ID = newUUID()
	}
	if who.Version == "" {
		who.Version = l.GpulayerVersion
	}
	who.Command = clipCommand(who.Command)
	if err := os.MkdirAll(filepath.Dir(l.path), 0o700); err != nil {
		return nil, fmt.Errorf("locking state %s: %w", l.path, err)
	}
	start := time.Now()
	pause := lockPollMin
	for {
		lock, holder, err := l.tryLock(who)
		if err != nil {
			return nil, err
		}
		if lock != nil {
			return lock, nil
		}
		locked := &LockedError{Where: l.path, LockFile: LockPath(l.path), Holder: holder}
		if lockBusy != nil {
			lockBusy()
		}
		waited := time.Since(start)
		if wait > 0 {
			locked.Waited = waited
		}
		if waited >= wait {
			return nil, locked
		}
		t := time.NewTimer(min(pause, wait-waited))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w; stopped waiting: %w", locked, ctx.Err())
		case <-t.C:
		}
		pause = min(2*pause, lockPollMax)
	}
}

// tryLock tries once. It returns the lock, or the holder's record when
// another process holds it.
func (l *Local) tryLock(who LockInfo) (*localLock, LockInfo, error) {
	path := LockPath(l.path)
	// ForceUnlock removes the lock file. A Lock that opened the old file
	// before that and locks it after holds a lock on a file nobody else
	// will open, so it checks that its file is still the one at path and
	// starts again when not. Each round needs another ForceUnlock, so a
	// few suffice.
	for range 8 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|openFlags, 0o600)
		if err != nil {
			if isSymlinkError(err) {
				return nil, LockInfo{}, fmt.Errorf("locking state %s: lock file %s is a symbolic link", l.path, path)
			}
			return nil, LockInfo{}, fmt.Errorf("locking state %s: %w", l.path, err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, LockInfo{}, fmt.Errorf("locking state %s: %w", l.path, err)
		}
		if !fi.Mode().IsRegular() {
			f.Close()
			return nil, LockInfo{}, fmt.Errorf("locking state %s: lock file %s is not a regular file (%s)", l.path, path, fi.Mode().Type())
		}
		if lockOpened != nil {
			lockOpened()
		}
		held, err := tryFlock(f)
		if err != nil {
			f.Close()
			return nil, LockInfo{}, fmt.Errorf("locking state %s: %s: %w", l.path, path, err)
		}
		if held {
			holder, _ := readHolder(f)
			f.Close()
			return nil, holder, nil
		}
		now, err := os.Lstat(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			unflock(f)
			f.Close()
			return nil, LockInfo{}, fmt.Errorf("locking state %s: %w", l.path, err)
		}
		if err != nil || !os.SameFile(fi, now) {
			unflock(f)
			f.Close()
			continue
		}
		who.Since = time.Now().UTC()
		if err := writeHolder(f, who); err != nil {
			f.Truncate(0)
			unflock(f)
			f.Close()
			return nil, LockInfo{}, fmt.Errorf("locking state %s: recording the holder in %s: %w", l.path, path, err)
		}
		return &localLock{f: f, info: who}, LockInfo{}, nil
	}
	return nil, LockInfo{}, fmt.Errorf("locking state %s: lock file %s was removed again and again while locking it", l.path, path)
}

// writeHolder records who in the lock file f. The file is rewritten in
// place, not replaced: the lock is held on this very file, and readers of
// the record (a Lock that failed, ForceUnlock) read it again when they find
// it half written.
func writeHolder(f *os.File, who LockInfo) error {
	data, err := json.Marshal(who)
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(append(data, '\n'), 0); err != nil {
		return err
	}
	return f.Sync()
}

// readHolder reads the holder's record from the lock file f; false when the
// file records no holder (released, or its holder has not written the
// record yet). A record being written is read again a few times.
func readHolder(f *os.File) (LockInfo, bool) {
	pause := time.Millisecond
	for try := 0; ; try++ {
		data, err := io.ReadAll(io.NewSectionReader(f, 0, maxLockFileBytes))
		var info LockInfo
		if err == nil && len(data) > 0 && json.Unmarshal(data, &info) == nil && info.ID != "" {
			return info, true
		}
		if try == 4 {
			return LockInfo{}, false
		}
		time.Sleep(pause)
		pause *= 2
	}
}

// localLock is a held flock on the lock file.
type localLock struct {
	mu   sync.Mutex
	f    *os.File
	info LockInfo
}

func (k *localLock) Info() LockInfo { return k.info }

// Unlock clears the holder's record and releases the lock. It never
// removes the lock file: a Lock waiting on this file would then hold a lock
// on a file the next Lock does not open. Unlocking twice does nothing.
func (k *localLock) Unlock() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.f == nil {
		return nil
	}
	f := k.f
	k.f = nil
	// Cleared while still held, so that the next holder's record is never
	// the one cleared.
	errTrunc := f.Truncate(0)
	errUn := unflock(f)
	errClose := f.Close()
	if err := errors.Join(errTrunc, errUn, errClose); err != nil {
		return fmt.Errorf("unlocking %s: %w", f.Name(), err)
	}
	return nil
}

// ForceUnlock breaks the lock whose holder has the given ID by removing the
// lock file, so that the next Lock makes a new one. A holder that is still
// running keeps its flock on the removed file and believes it holds the
// lock; the serial check in Save makes its next write fail with a
// *ConflictError once someone else has written. Another ID than the
// holder's is refused, naming the holder.
func (l *Local) ForceUnlock(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	path := LockPath(l.path)
	f, err := os.OpenFile(path, os.O_RDONLY|openFlags, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("state %s is not locked: there is no lock file %s", l.path, path)
	}
	if err != nil {
		return fmt.Errorf("force-unlock of state %s: %w", l.path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return fmt.Errorf("force-unlock of state %s: %w", l.path, err)
	} else if !fi.Mode().IsRegular() {
		return fmt.Errorf("force-unlock of state %s: lock file %s is not a regular file (%s)", l.path, path, fi.Mode().Type())
	}
	holder, ok := readHolder(f)
	if !ok {
		held, err := tryFlock(f)
		if err != nil {
			return fmt.Errorf("force-unlock of state %s: %s: %w", l.path, path, err)
		}
		if !held {
			unflock(f)
			return fmt.Errorf("state %s is not locked", l.path)
		}
		return fmt.Errorf("force-unlock of state %s: its holder has not recorded itself in %s yet; try again", l.path, path)
	}
	if holder.ID != id {
		return fmt.Errorf("not unlocking state %s: lock ID %q is not the holder's; it is locked by %q (pid %d on %s, since %s, lock ID %s)",
			l.path, id, holder.Command, holder.PID, holder.Host, holder.Since.UTC().Format(time.RFC3339), holder.ID)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("force-unlock of state %s: %w", l.path, err)
	}
	return nil
}

package state

import (
	"context"
	"fmt"
	"time"
)

// Backend keeps the state document. The planner and apply use only this
// interface, so that a remote backend (an object store with
// compare-and-swap writes) can replace the local file without touching
// them.
type Backend interface {
	// Load reads the current state. A backend that holds none yet returns
	// New() with Serial 0 and no lineage. A document that cannot be read
	// (corrupt, or of a newer FormatVersion) is an error naming where it
	// is, and the backend never overwrites it.
	Load(ctx context.Context) (*State, error)
	// Save writes s as the next version over the one whose serial is
	// expected (the serial the caller loaded): it sets s.Serial to
	// expected+1, gives s a lineage when it has none, and fails with a
	// *ConflictError when the stored serial or lineage is no longer
	// expected, so a writer never silently replaces a version it did not
	// read.
	Save(ctx context.Context, s *State, expected uint64) error
	// Lock takes the exclusive write lock, waiting up to wait for it (0:
	// fail at once). A lock held by someone else is a *LockedError naming
	// the holder. The returned Lock's Unlock releases it.
	Lock(ctx context.Context, who LockInfo, wait time.Duration) (Lock, error)
	// ForceUnlock breaks a lock, but only the one whose holder has the
	// given ID.
	ForceUnlock(ctx context.Context, id string) error
	// String says where the state is, for messages: "local file
	// .gpulayer/state.json".
	String() string
}

// Lock is a held lock.
type Lock interface {
	Info() LockInfo
	Unlock() error
}

// LockInfo records who holds a lock.
type LockInfo struct {
	ID      string    `json:"id"`
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	User    string    `json:"user,omitempty"`
	Command string    `json:"command"`
	Since   time.Time `json:"since"`
	Version string    `json:"gpulayer_version,omitempty"`
}

// LockedError is a lock held by someone else.
type LockedError struct {
	Where string
	// LockFile is the file locked, when the backend has one.
	LockFile string
	// Holder is the holder's record; its ID is empty when the holder had
	// not written it yet.
	Holder LockInfo
	// Waited is how long Lock waited before giving up.
	Waited time.Duration
}

func (e *LockedError) Error() string {
	h := e.Holder
	if h.ID == "" {
		msg := fmt.Sprintf("state %s is locked, but the lock names no holder yet", e.Where)
		if e.LockFile != "" {
			msg = fmt.Sprintf("state %s is locked, but its lock file %s names no holder yet", e.Where, e.LockFile)
		}
		if e.Waited > 0 {
			msg += fmt.Sprintf("; waited %s", e.Waited.Round(time.Millisecond))
		}
		return msg + "; try again"
	}
	msg := fmt.Sprintf("state %s is locked by %q (pid %d on %s, since %s, lock ID %s)",
		e.Where, h.Command, h.PID, h.Host, h.Since.UTC().Format(time.RFC3339), h.ID)
	if e.Waited > 0 {
		msg += fmt.Sprintf("; waited %s", e.Waited.Round(time.Millisecond))
	}
	return msg + "; if that process is gone and the lock stuck, `gpulayer force-unlock " + h.ID + "` breaks it"
}

// ConflictError is a Save over a version the writer did not read.
type ConflictError struct {
	Where           string
	ExpectedSerial  uint64
	FoundSerial     uint64
	ExpectedLineage string
	FoundLineage    string
}

func (e *ConflictError) Error() string {
	switch {
	case e.FoundSerial == 0 && e.FoundLineage == "":
		return fmt.Sprintf("state %s changed since it was read: it no longer exists (expected serial %d)", e.Where, e.ExpectedSerial)
	case e.ExpectedLineage == "" && e.FoundLineage != "":
		return fmt.Sprintf("state %s changed since it was read: it is of lineage %s (serial %d), and the state being saved has none: it was not read from there", e.Where, e.FoundLineage, e.FoundSerial)
	case e.ExpectedLineage != "" && e.FoundLineage != e.ExpectedLineage:
		return fmt.Sprintf("state %s changed since it was read: it is of lineage %s, not %s", e.Where, e.FoundLineage, e.ExpectedLineage)
	}
	return fmt.Sprintf("state %s changed since it was read: serial %d, expected %d", e.Where, e.FoundSerial, e.ExpectedSerial)
}

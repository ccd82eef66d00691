package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/gpulayer/gpulayer/internal/inputfile"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// DefaultPath is where the state of the configuration in configDir is kept
// when --state does not say: configDir/.gpulayer/state.json.
func DefaultPath(configDir string) string {
	return filepath.Join(configDir, ".gpulayer", "state.json")
}

// LockPath is the lock file of the state file path: path without its
// ".json" and with ".lock" (.gpulayer/state.lock beside
// .gpulayer/state.json). It depends on the path alone, so every command
// naming the same state file takes the same lock.
func LockPath(path string) string {
	return strings.TrimSuffix(path, ".json") + ".lock"
}

// BackupPath is where the version before the current one of the state file
// path is kept: path + ".backup".
func BackupPath(path string) string { return path + ".backup" }

// Local keeps the state in a file on this machine (docs/state.md): written
// atomically, with the previous version kept as a backup, and locked with
// flock(2) on a lock file beside it.
type Local struct {
	path string
	// GpulayerVersion is written into every document saved and every lock
	// taken; the CLI sets it to its own version.
	GpulayerVersion string
	// MaxBytes caps the size of the state file read or written; 0 is
	// DefaultMaxBytes.
	MaxBytes int64

	mu sync.Mutex
	// last is the document as this Local last read or wrote it. A save
	// reads the file and decodes it only when its bytes are not these:
	// decoding the whole document on every save, only to learn its serial
	// and lineage, was most of an apply's CPU (issue 19). The bytes, not
	// the file's size, inode and times, are compared: those can stay the
	// same across a rewrite in place within one tick of the file system's
	// clock, and reading and comparing costs little beside the encoding a
	// save does anyway.
	last stored
}

// stored is a document's bytes and the serial and lineage they hold.
type stored struct {
	data    []byte
	serial  uint64
	lineage string
}

var _ Backend = (*Local)(nil)

// NewLocal is the backend of the state file at path (DefaultPath unless
// --state says otherwise). Nothing is read or created until it is used.
func NewLocal(path string) *Local { return &Local{path: path} }

// Path is the state file.
func (l *Local) Path() string { return l.path }

func (l *Local) String() string { return "local file " + l.path }

func (l *Local) maxBytes() int64 {
	if l.MaxBytes > 0 {
		return l.MaxBytes
	}
	return DefaultMaxBytes
}

// Load reads the state file. A file that does not exist is New(), unless
// its backup exists: a state that vanished while its backup stayed is more
// likely lost than never made, and starting afresh would launch every job
// again, so that is an error asking the person to choose.
func (l *Local) Load(ctx context.Context) (*State, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data, err := l.read()
	if err != nil {
		return nil, err
	}
	if data == nil {
		return New(), nil
	}
	s, err := decode(l.path, data)
	if err != nil {
		return nil, l.withBackup(err)
	}
	l.remember(stored{data: data, serial: s.Serial, lineage: s.Lineage})
	return s, nil
}

// read reads the state file's bytes; nil when there is none. A missing
// file whose backup exists is an error (Load).
func (l *Local) read() ([]byte, error) {
	data, err := readRegular(l.path, l.maxBytes())
	if err != nil {
		return nil, l.withBackup(err)
	}
	if data == nil {
		backup := BackupPath(l.path)
		if _, err := os.Lstat(backup); err == nil {
			return nil, fmt.Errorf("state file %s does not exist, but its backup does (%s): restore the backup (mv %s %s), or remove it to start from an empty state",
				l.path, l.backupNote(), backup, l.path)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("state file %s does not exist; its backup: %w", l.path, err)
		}
	}
	return data, nil
}

// current reads the stored document's serial and lineage and its bytes;
// ok is false when there is none. The file is decoded only when it is not
// what this Local last read or wrote.
func (l *Local) current() (cur stored, ok bool, err error) {
	data, err := l.read()
	if err != nil || data == nil {
		return stored{}, false, err
	}
	l.mu.Lock()
	last := l.last
	l.mu.Unlock()
	// A document is never empty: an empty last is none remembered.
	if len(last.data) > 0 && bytes.Equal(data, last.data) {
		return last, true, nil
	}
	s, err := decode(l.path, data)
	if err != nil {
		return stored{}, false, l.withBackup(err)
	}
	return stored{data: data, serial: s.Serial, lineage: s.Lineage}, true, nil
}

func (l *Local) remember(s stored) {
	l.mu.Lock()
	l.last = s
	l.mu.Unlock()
}

// withBackup adds to an unreadable state file's error what its backup
// holds, since that is what the person repairing it needs next.
func (l *Local) withBackup(err error) error {
	var u *UnreadableError
	if errors.As(err, &u) && u.Path == l.path {
		u.Backup = l.backupNote()
	}
	return err
}

// backupNote says what the backup file holds.
func (l *Local) backupNote() string {
	backup := BackupPath(l.path)
	data, err := readRegular(backup, l.maxBytes())
	if err == nil && data == nil {
		return "there is no backup " + backup
	}
	var s *State
	if err == nil {
		s, err = decode(backup, data)
	}
	if err != nil {
		var u *UnreadableError
		if errors.As(err, &u) {
			return fmt.Sprintf("its backup %s cannot be read either: it %s", backup, u.Problem)
		}
		return fmt.Sprintf("its backup %s cannot be read either: %v", backup, err)
	}
	return fmt.Sprintf("%s holds the previous version (serial %d)", backup, s.Serial)
}

// Save writes s as the version after serial expected. Callers hold the lock
// (Lock); Save itself compares the stored serial and lineage with what s
// was read from, so that a writer whose lock was broken (ForceUnlock) or
// who never took one cannot replace a version it did not read. It refuses
// to write over a file it cannot read. The file is decoded only when its
// bytes are not those this Local last read or wrote. The current file
// becomes the backup first; both writes are atomic. On error s is left
// unchanged.
func (l *Local) Save(ctx context.Context, s *State, expected uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s == nil {
		return fmt.Errorf("saving state %s: no state", l.path)
	}
	dir := filepath.Dir(l.path)
	if err := makeDir(dir); err != nil {
		return fmt.Errorf("saving state %s: %w", l.path, err)
	}
	cur, exists, err := l.current()
	if err != nil {
		return fmt.Errorf("not saving state: %w", err)
	}
	// A missing file takes any lineage: that is how the first state, or
	// one moved from another backend, is written.
	if cur.serial != expected || (exists && s.Lineage != cur.lineage) {
		return &ConflictError{Where: l.path, ExpectedSerial: expected, FoundSerial: cur.serial, ExpectedLineage: s.Lineage, FoundLineage: cur.lineage}
	}

	next, data, err := Next(s, expected, l.GpulayerVersion)
	if err != nil {
		return fmt.Errorf("saving state %s: %w", l.path, err)
	}
	if int64(len(data)) > l.maxBytes() {
		return fmt.Errorf("saving state %s: the document is %d bytes, more than the limit of %s that gpulayer reads back", l.path, len(data), inputfile.Size(l.maxBytes()))
	}

	backup := BackupPath(l.path)
	if err := removeTemps(dir, filepath.Base(l.path), filepath.Base(backup)); err != nil {
		return fmt.Errorf("saving state %s: removing what an interrupted write left: %w", l.path, err)
	}
	if exists {
		if err := writeAtomic(backup, cur.data, "backup"); err != nil {
			return fmt.Errorf("saving state %s: keeping the previous version: %w", l.path, err)
		}
	}
	if err := writeAtomic(l.path, data, "state"); err != nil {
		return fmt.Errorf("saving state: %w", err)
	}
	l.remember(stored{data: data, serial: next.Serial, lineage: next.Lineage})
	Saved(s, next)
	return nil
}

// makeDir makes the state's directory (mode 0700: state holds the jobs'
// environments) when it is missing, and makes its name durable too, or a
// first save could vanish with it in a power loss.
func makeDir(dir string) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return syncDir(filepath.Dir(dir))
}

// Next is the version of s a backend writes over the one of serial
// expected, and its bytes: the current format, serial expected+1, a new
// lineage when s has none, the writer's version, and empty lists rather
// than null. s is not changed: a backend calls Saved once the write
// succeeded. Every backend writes through it, so that the same state gives
// the same bytes wherever it is kept.
func Next(s *State, expected uint64, version string) (*State, []byte, error) {
	if expected == math.MaxUint64 {
		// Serial 0 means "no state yet": a wrapped serial would be
		// refused by every later read, and the document lost.
		return nil, nil, ErrSerialExhausted
	}
	next := *s
	next.FormatVersion = FormatVersion
	next.Serial = expected + 1
	if next.Lineage == "" {
		next.Lineage = newUUID()
	}
	next.GpulayerVersion = version
	if next.Jobs == nil {
		next.Jobs = []Job{}
	}
	if next.Leftovers == nil {
		next.Leftovers = []Job{}
	}
	if next.Machines == nil {
		next.Machines = []Machine{}
	}
	// What a load would refuse is never written: a later save of this
	// backend, which does not decode what it wrote, would not refuse it.
	if problem := check(&next); problem != "" {
		return nil, nil, fmt.Errorf("the document %s, which gpulayer refuses to read: nothing was saved", problem)
	}
	data, err := encode(&next)
	return &next, data, err
}

// ErrSerialExhausted is a save refused because the state's serial is
// already the largest there is.
var ErrSerialExhausted = errors.New("state serial is at its maximum (2^64-1): no later version can be numbered, so nothing was saved; " +
	"copy it to a file (gpulayer state pull FILE), set its \"serial\" to 1 there, and push it to an empty backend (gpulayer state push FILE)")

// Saved records in s what a successful write of next gave it.
func Saved(s, next *State) {
	s.FormatVersion, s.Serial, s.Lineage, s.GpulayerVersion = next.FormatVersion, next.Serial, next.Lineage, next.GpulayerVersion
	s.Jobs, s.Leftovers, s.Machines = next.Jobs, next.Leftovers, next.Machines
}

// Decode reads a state document; where names it in errors. A remote
// backend reads through it, so every backend refuses what Local refuses.
func Decode(where string, data []byte) (*State, error) { return decode(where, data) }

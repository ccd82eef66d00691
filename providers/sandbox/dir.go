package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/gpulayer/gpulayer/internal/atomicfile"
)

// The sandbox directory holds a private key and the programs its machines
// run as the current user (bin/sandbox-shell is every session's login
// shell). Whoever can write there can read the key, or swap a program and
// have it run as this user; whoever can plant a symbolic link there can
// make the sandbox overwrite the file it points to. So every directory the
// sandbox writes into must be this user's own, writable by no one else,
// and no file is written through a link.

// ownDir makes sure path is a directory that the effective user owns and
// that neither its group nor others can write, creating it (mode 0755)
// when it is missing. A symbolic link is refused rather than followed.
func ownDir(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(path, 0o755); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		st, err = os.Lstat(path)
	}
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	switch {
	case st.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("sandbox: %s is a symbolic link: give the directory itself", path)
	case !st.IsDir():
		return fmt.Errorf("sandbox: %s is not a directory", path)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("sandbox: %s belongs to uid %d, not to this user (uid %d): its programs would run as this user, so it must be this user's own", path, sys.Uid, os.Geteuid())
	}
	if perm := st.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("sandbox: %s can be written by its group or others (mode %04o): its programs would run as this user, so no one else may write there (chmod go-w)", path, perm)
	}
	return nil
}

// ownDirs checks dir and the directories under it that the sandbox writes
// into, creating the missing ones; dir's parents are created if missing.
func ownDirs(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	for _, d := range []string{dir, filepath.Join(dir, "bin"), filepath.Join(dir, "machines")} {
		if err := ownDir(d); err != nil {
			return err
		}
	}
	return nil
}

// writeFile replaces the file at path, in a directory ownDir checked,
// atomically and without following a link found there.
func writeFile(path string, data []byte, perm os.FileMode) error {
	if err := atomicfile.Write(path, data, perm); err != nil {
		return fmt.Errorf("sandbox: writing %s: %w", path, err)
	}
	return nil
}

// writeRecord is writeFile without the fsyncs, for a machine's records:
// thousands of them are written at every start, and an fsync each would
// cost seconds for files that need not outlive the sandbox.
func writeRecord(path string, data []byte, perm os.FileMode) error {
	if err := atomicfile.Replace(path, data, perm); err != nil {
		return fmt.Errorf("sandbox: writing %s: %w", path, err)
	}
	return nil
}

package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Steps of an atomic write, in order; afterStep is called after each.
const (
	stepTempWritten = "temp-written" // the temporary file holds the data
	stepTempSynced  = "temp-synced"  // ... and is on disk
	stepRenamed     = "renamed"      // it has the final name
	stepDirSynced   = "dir-synced"   // ... and the name is on disk
)

// afterStep, when set, is called after each step of an atomic write with the
// file's role ("state", "backup") and the step. The crash tests set it to
// kill the process there; it is nil otherwise.
var afterStep func(role, step string)

// writeAtomic replaces path with data so that a crash at any moment leaves
// either the old file or the new one, never a mix: temporary file in the
// same directory (mode 0600), fsync, rename over path, fsync of the
// directory. internal/atomicfile will do the same for the whole tree; this
// is the one place to swap for it.
func writeAtomic(path string, data []byte, role string) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, tempPrefix(base)+"*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	hook(role, stepTempWritten)
	if err = f.Sync(); err != nil {
		return fmt.Errorf("writing %s: fsync: %w", tmp, err)
	}
	hook(role, stepTempSynced)
	if err = f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	hook(role, stepRenamed)
	if err := syncDir(dir); err != nil {
		// The file is in place; only its durability across a power loss is
		// in doubt. Report it all the same: the caller said it must last.
		return fmt.Errorf("writing %s: fsync of directory %s: %w", path, dir, err)
	}
	hook(role, stepDirSynced)
	return nil
}

func hook(role, step string) {
	if afterStep != nil {
		afterStep(role, step)
	}
}

// tempPrefix names the temporary files of base: hidden, and recognisable so
// that a later write removes those a crash left behind.
func tempPrefix(base string) string { return "." + base + ".tmp-" }

// removeTemps removes the temporary files of the bases that a crashed
// write left in dir. Callers hold the state lock, so no write of theirs is
// under way.
func removeTemps(dir string, bases ...string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if slices.ContainsFunc(bases, func(base string) bool { return strings.HasPrefix(e.Name(), tempPrefix(base)) }) && e.Type().IsRegular() {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// syncDir makes a rename in dir durable. Some file systems refuse to fsync
// a directory (EINVAL); there is then nothing more a program can do.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}

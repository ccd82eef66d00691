// Package atomicfile writes a file so that a reader sees the old content or
// the new, never a part: a temporary file in the same directory, synced,
// renamed over the path, and the directory synced.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces the file at path with data, with permissions perm, and
// makes the change durable. The rename replaces whatever is at path, a
// symbolic link included, without following it: a link another user
// planted cannot redirect the write. A caller that means to write through a
// link resolves it first.
func Write(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, true)
}

// Replace is Write without the two fsyncs: readers still see the old file
// or the new, and a link is still replaced rather than followed, but a
// crash may lose the change. It is for files that are written again at
// every start (a sandbox's thousands of machine records), where an fsync
// each would cost seconds and protect nothing.
func Replace(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, false)
}

func write(path string, data []byte, perm os.FileMode, durable bool) (err error) {
	dir := filepath.Dir(path)
	// CreateTemp opens with O_EXCL: it never opens an existing file or
	// follows a link someone placed at the temporary name.
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if durable {
		if err := tmp.Sync(); err != nil {
			return err
		}
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if !durable {
		return nil
	}
	return syncDir(dir)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

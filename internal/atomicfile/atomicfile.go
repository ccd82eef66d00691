// Package atomicfile writes files so that a reader, a crash, a full disk or a
// file-size limit never leaves a half-written one: the data goes to a
// temporary file in the same directory, which is synced and then renamed over
// the target, and the directory is synced so that the rename itself survives
// a crash. Either the old contents or the new ones are there, never a mix.
//
// It must not follow symbolic links silently: Replace refuses one, and
// WriteFile replaces a link at path by a regular file.
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrNotRegular is returned (inside an *fs.PathError) by Replace when path
// is a symbolic link, a directory or another file that is not a regular one.
var ErrNotRegular = errors.New("not a regular file")

// modeBits are the bits of a mode that a rewrite keeps.
const modeBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// WriteFile writes data to path atomically. The file gets exactly mode perm
// (the umask does not apply, as the file is made by chmod). Errors are
// *fs.PathError naming path.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm&modeBits, nil)
}

// Replace writes data over the existing regular file at path atomically,
// keeping its mode and, where the process is allowed to (as root), its
// owner and group. It refuses a path that is a symbolic link, since renaming
// over a link would replace the link rather than the file it points to.
func Replace(path string, data []byte) error {
	info, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return &fs.PathError{Op: "replace", Path: path, Err: ErrNotRegular}
	}
	return write(path, data, info.Mode()&modeBits, info)
}

func write(path string, data []byte, perm fs.FileMode, old fs.FileInfo) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return &fs.PathError{Op: "write", Path: path, Err: unwrapPath(err)}
	}
	if err := fill(tmp, data, perm, old); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return &fs.PathError{Op: "write", Path: path, Err: unwrapPath(err)}
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return &fs.PathError{Op: "write", Path: path, Err: unwrapPath(err)}
	}
	if err := syncDir(dir); err != nil {
		// The rename happened; only its durability is in doubt.
		return &fs.PathError{Op: "sync directory of", Path: path, Err: unwrapPath(err)}
	}
	return nil
}

// fill writes data to the temporary file, sets its mode (and owner) and
// syncs and closes it.
func fill(tmp *os.File, data []byte, perm fs.FileMode, old fs.FileInfo) error {
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if old != nil {
		keepOwner(tmp, old)
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	return tmp.Close()
}

// unwrapPath drops the temporary file's name from an *fs.PathError: the
// caller names the target, and the temporary file no longer exists.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

//go:build unix

package state

import (
	"errors"
	"os"
	"syscall"
)

// openFlags are added to every open of a state, backup or lock file:
// O_NOFOLLOW refuses a symbolic link (Save replaces the file by renaming,
// which would replace the link, not its target), O_NONBLOCK keeps a FIFO put
// in the file's place from blocking the open; fstat then refuses it.
const openFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// isSymlinkError says whether an open with O_NOFOLLOW failed because the
// path is a symbolic link.
func isSymlinkError(err error) bool { return errors.Is(err, syscall.ELOOP) }

// tryFlock takes an exclusive flock on f without waiting; held is true when
// another open file holds it.
func tryFlock(f *os.File) (held bool, err error) {
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return false, nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return true, nil
		case errors.Is(err, syscall.EINTR):
			continue
		}
		return false, err
	}
}

func unflock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

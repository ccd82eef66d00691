//go:build !unix

package state

import (
	"errors"
	"os"
)

const openFlags = 0

func isSymlinkError(error) bool { return false }

// tryFlock fails where flock(2) does not exist: a lock that locks nothing
// would let two applies run at once.
func tryFlock(*os.File) (bool, error) {
	return false, errors.New("locking the local state is not supported on this operating system")
}

func unflock(*os.File) error { return nil }

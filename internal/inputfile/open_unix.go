//go:build unix

package inputfile

import (
	"errors"
	"syscall"
)

const (
	// openNonblock keeps opening a named pipe from waiting for a writer.
	openNonblock = syscall.O_NONBLOCK
	openNoFollow = syscall.O_NOFOLLOW
)

// IsLink says err is a symbolic link that ReadNoFollow refused.
func IsLink(err error) bool { return errors.Is(err, errLink) || errors.Is(err, syscall.ELOOP) }

//go:build unix

package ssh

import "syscall"

// openNonblock keeps opening a named pipe from waiting for a writer.
const openNonblock = syscall.O_NONBLOCK

//go:build !unix

package ssh

import "os"

// lockFile is a no-op where flock(2) does not exist; the pool's own mutex
// still serialises appends within one process.
func lockFile(f *os.File) error { return nil }

func unlockFile(f *os.File) error { return nil }

//go:build !unix

package atomicfile

import (
	"io/fs"
	"os"
)

// keepOwner does nothing where files have no Unix owner.
func keepOwner(*os.File, fs.FileInfo) {}

// syncDir does nothing where a directory cannot be opened for syncing; the
// rename is still atomic.
func syncDir(string) error { return nil }

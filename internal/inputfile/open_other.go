//go:build !unix

package inputfile

import "errors"

// Elsewhere a named pipe cannot block an open, and links are refused by
// the Lstat before it.
const (
	openNonblock = 0
	openNoFollow = 0
)

// IsLink says err is a symbolic link that ReadNoFollow refused.
func IsLink(err error) bool { return errors.Is(err, errLink) }

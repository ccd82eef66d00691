//go:build !unix

package config

// openNonblock is 0 where named pipes cannot be opened by path.
const openNonblock = 0

// Package demo holds the jobs that `gpulayer demo` plans and applies on a
// sandbox fleet, so that the binary carries them.
package demo

import _ "embed"

// Jobs is jobs.hcl.
//
//go:embed jobs.hcl
var Jobs []byte

package facts

import (
	"crypto/rand"
	_ "embed"
	"encoding/hex"
)

//go:embed probe.sh
var script string

// Script is the probe script. It is sent on the session's standard input
// and run as `sh -s -- NONCE [PID...]`; see the comment at its top.
func Script() string { return script }

// NewNonce returns a random token that frames the sections of one probe's
// output, so that text a machine prints cannot pass for a section boundary.
func NewNonce() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

package ssh

import (
	"errors"

	"github.com/gpulayer/gpulayer/internal/inputfile"
)

// Limits on the local files the pool reads. Both are far above what real
// files need and low enough that a path naming /dev/zero or a huge file
// cannot exhaust memory.
const (
	// maxIdentityFileBytes bounds an identity file. OpenSSH's largest
	// private keys (RSA, 16384 bits) take about 13 KiB.
	maxIdentityFileBytes = 1 << 20
	// maxKnownHostsBytes bounds each known_hosts file: some 400,000 hosts
	// of hashed ed25519 lines.
	maxKnownHostsBytes = 64 << 20
)

// readRegularFile reads path, which must be a regular file (a symbolic
// link to one will do) of at most max bytes: internal/inputfile, the one
// reader of outside files.
// Callers name the file; a refusal says only what is wrong with it.
func readRegularFile(path string, max int64) ([]byte, error) {
	data, err := inputfile.Read(path, max)
	var refused *inputfile.Error
	if errors.As(err, &refused) {
		return nil, errors.New(refused.Problem())
	}
	return data, err
}

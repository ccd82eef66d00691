package ssh

import (
	"fmt"
	"io"
	"io/fs"
	"os"
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
// link to one will do) of at most max bytes. Anything else is refused
// before it is read: a named pipe would block the read for ever, a device
// such as /dev/zero would never end, and opening some devices has side
// effects. The open does not block either (see openNonblock), should a
// pipe take the file's place after the check.
func readRegularFile(path string, max int64) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := checkRegular(info, max); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := checkRegular(info, max); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	return data, nil
}

// checkRegular refuses what is not a regular file of at most max bytes.
func checkRegular(info fs.FileInfo, max int64) error {
	if !info.Mode().IsRegular() {
		return fmt.Errorf("not a regular file (%s)", fileKind(info.Mode()))
	}
	if info.Size() > max {
		return fmt.Errorf("larger than %d bytes (%d bytes)", max, info.Size())
	}
	return nil
}

// fileKind names what a path that is not a regular file is.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.Type().String()
}

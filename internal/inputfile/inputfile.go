// Package inputfile reads files that come from outside (configuration,
// saved plans and facts, keys) the way a hostile or careless input needs:
// only regular files, and at most a given size, so that /dev/zero, a FIFO
// or a huge file ends in a clear error instead of exhausting memory or
// blocking for ever.
package inputfile

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"syscall"
)

// Read returns the contents of the regular file at path, refusing anything
// else (a FIFO, a device, a directory) and files larger than max bytes.
// Errors name path.
func Read(path string, max int64) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO with no writer would otherwise block
	// before the file could be checked.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, kind(fi.Mode()))
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s is %s; at most %s is read", path, Size(fi.Size()), Size(max))
	}
	// Sized from the file, so a large one is read in one allocation rather
	// than grown by doubling.
	buf := bytes.NewBuffer(make([]byte, 0, fi.Size()+512))
	_, err = buf.ReadFrom(io.LimitReader(f, max+1))
	data := buf.Bytes()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s grew past %s while it was read", path, Size(max))
	}
	return data, nil
}

func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return m.Type().String()
}

// Size writes a byte count for people: "512 MiB", "64 KiB", "300 bytes".
func Size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}

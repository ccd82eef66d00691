// Package inputfile reads files that come from outside (configuration,
// saved plans and facts, state, keys, known_hosts) the way a hostile or
// careless input needs: only regular files, and at most a given size, so
// that /dev/zero, a named pipe or a huge file ends in a clear error instead
// of exhausting memory or blocking for ever. It is the one reader of such
// files in gpulayer.
package inputfile

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Error is a file refused for what it is: not a regular file (Kind says
// what it is instead), or larger than Max (Size says how large).
type Error struct {
	Path string
	// Kind is set when the file is not a regular file: "a named pipe",
	// "a directory", "a socket", "a device".
	Kind string
	// Size and Max are set when the file is too large.
	Size, Max int64
}

func (e *Error) Error() string { return e.Path + " " + e.Problem() }

// Problem is the error without the path, for callers that name the file
// themselves: "is not a regular file (a named pipe)".
func (e *Error) Problem() string {
	if e.Kind != "" {
		return fmt.Sprintf("is not a regular file (%s)", e.Kind)
	}
	return fmt.Sprintf("is %s; at most %s is read", Size(e.Size), Size(e.Max))
}

// TooLarge says the file was refused for its size.
func (e *Error) TooLarge() bool { return e.Kind == "" }

// Read returns the contents of the regular file at path (a symbolic link to
// one is followed), refusing anything else and files larger than max
// bytes. What is not a regular file is refused before it is opened (opening
// some devices has side effects), and the open does not block should a
// named pipe take the file's place in between. Refusals are *Error; other
// errors are the os package's, which name path.
func Read(path string, max int64) ([]byte, error) {
	return read(path, max, false)
}

// ReadNoFollow is Read, except that a symbolic link at path is refused
// (an error for which IsLink is true): for files gpulayer later replaces by
// renaming, which would replace a link rather than its target.
func ReadNoFollow(path string, max int64) ([]byte, error) {
	return read(path, max, true)
}

func read(path string, max int64, noFollow bool) ([]byte, error) {
	f, size, err := open(path, max, noFollow)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Sized from the file, so a large one is read in one allocation rather
	// than grown by doubling; one byte past max shows a file that grew.
	buf := bytes.NewBuffer(make([]byte, 0, size+512))
	if _, err := buf.ReadFrom(io.LimitReader(f, max+1)); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(buf.Len()) > max {
		return nil, &Error{Path: path, Size: int64(buf.Len()), Max: max}
	}
	return buf.Bytes(), nil
}

// Open is Read for a reader that consumes the file as it comes (a large
// document decoded while it is read, never held whole in memory): the
// same refusals before and at the open, and a read that reaches past max
// bytes, the file having grown since, fails with an *Error. The caller
// closes it.
func Open(path string, max int64) (io.ReadCloser, error) {
	f, _, err := open(path, max, false)
	if err != nil {
		return nil, err
	}
	return &limited{f: f, path: path, left: max, max: max}, nil
}

// limited reads at most max bytes of f, and fails past them.
type limited struct {
	f         *os.File
	path      string
	left, max int64
	n         int64 // bytes read
}

func (l *limited) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// One byte more tells a file that grew past max from one that
		// ends at it.
		var one [1]byte
		if n, _ := l.f.Read(one[:]); n > 0 {
			size := l.n + 1
			if fi, err := l.f.Stat(); err == nil {
				size = max(size, fi.Size())
			}
			return 0, &Error{Path: l.path, Size: size, Max: l.max}
		}
		return 0, io.EOF
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.f.Read(p)
	l.left -= int64(n)
	l.n += int64(n)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("read %s: %w", l.path, err)
	}
	return n, err
}

func (l *limited) Close() error { return l.f.Close() }

// open opens the regular file at path, refusing what Read refuses, and
// returns it with its size.
func open(path string, max int64, noFollow bool) (*os.File, int64, error) {
	stat, flags := os.Stat, openNonblock
	if noFollow {
		stat, flags = os.Lstat, flags|openNoFollow
	}
	fi, err := stat(path)
	if err != nil {
		return nil, 0, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, 0, &fs.PathError{Op: "open", Path: path, Err: errLink}
	}
	if err := check(path, fi, max); err != nil {
		return nil, 0, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|flags, 0)
	if err != nil {
		if IsLink(err) {
			return nil, 0, &fs.PathError{Op: "open", Path: path, Err: errLink}
		}
		return nil, 0, err
	}
	if fi, err = f.Stat(); err != nil {
		f.Close()
		return nil, 0, err
	}
	if err := check(path, fi, max); err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

func check(path string, fi fs.FileInfo, max int64) error {
	if !fi.Mode().IsRegular() {
		return &Error{Path: path, Kind: kind(fi.Mode())}
	}
	if fi.Size() > max {
		return &Error{Path: path, Size: fi.Size(), Max: max}
	}
	return nil
}

// errLink is the error of a symbolic link ReadNoFollow refused.
var errLink = fmt.Errorf("is a symbolic link")

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.Type().String()
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

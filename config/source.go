package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
)

// maxSourceBytes bounds a configuration or variable file. The HCL parser
// allocates a few hundred bytes per token, so a megabyte of configuration
// (tens of thousands of lines, far beyond any real one) already costs a few
// hundred megabytes to parse.
const maxSourceBytes = 1 << 20

// maxFileBytes bounds what file() reads, so that a typo naming a disk image
// fails with a sentence instead of exhausting memory. Its text becomes a
// string value and is not parsed, so it may be larger than a source file.
const maxFileBytes = 4 << 20

// ReadSource reads a configuration or variable file as the language
// accepts it: a regular file (or a link to one) of at most 1 MiB of UTF-8
// text without NUL bytes. A named pipe, a device such as /dev/zero, a
// directory, a larger file or a binary one is refused with an error naming
// path, without reading more than the limit.
func ReadSource(path string) ([]byte, error) {
	src, err := readRegular(path, maxSourceBytes)
	if err != nil {
		return nil, err
	}
	if err := checkText(path, src); err != nil {
		return nil, err
	}
	return src, nil
}

// readRegular reads path when it is a regular file of at most limit bytes.
// The mode is checked before opening (opening a device can have effects)
// and again on the open file, which is opened without blocking so that a
// named pipe put in its place meanwhile cannot hang the read; and no more
// than limit+1 bytes are read, whatever size the file claims.
func readRegular(path string, limit int64) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s cannot be read: %s", path, pathError(err))
	}
	if err := checkRegular(path, info, limit); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, fmt.Errorf("%s cannot be read: %s", path, pathError(err))
	}
	defer f.Close()
	if info, err = f.Stat(); err != nil {
		return nil, fmt.Errorf("%s cannot be read: %s", path, pathError(err))
	}
	if err := checkRegular(path, info, limit); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s cannot be read: %s", path, pathError(err))
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %s; gpulayer reads at most %s", path, byteSize(int64(len(b))-1), byteSize(limit))
	}
	return b, nil
}

func checkRegular(path string, info fs.FileInfo, limit int64) error {
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is %s, not a regular file", path, fileKind(info.Mode()))
	}
	if info.Size() > limit {
		return fmt.Errorf("%s is %s; gpulayer reads at most %s", path, byteSize(info.Size()), byteSize(limit))
	}
	return nil
}

// checkText refuses a file that is not UTF-8 text, with one error naming
// the line of the first bad byte, rather than the HCL parser's diagnostic
// for every byte of it.
func checkText(path string, src []byte) error {
	if i := bytes.IndexByte(src, 0); i >= 0 {
		return &notTextError{path: path, pos: positionAt(src, i), why: "holds a NUL byte"}
	}
	if !utf8.Valid(src) {
		i := 0
		for i < len(src) {
			r, size := utf8.DecodeRune(src[i:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			i += size
		}
		return &notTextError{path: path, pos: positionAt(src, i), why: "is not valid UTF-8"}
	}
	return nil
}

// notTextError is a file that is not text, and where that shows first.
type notTextError struct {
	path string
	pos  hcl.Pos
	why  string
}

func (e *notTextError) Error() string {
	return fmt.Sprintf("%s is not a text file: it %s at line %d", e.path, e.why, e.pos.Line)
}

// readDiagnostic is the diagnostic for a file that ReadSource refused:
// summary says what kind of file it was meant to be.
func readDiagnostic(summary string, err error) *hcl.Diagnostic {
	d := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: err.Error() + "."}
	var nt *notTextError
	if errors.As(err, &nt) {
		d.Summary = "Not a text file"
		d.Subject = &hcl.Range{Filename: nt.path, Start: nt.pos, End: nt.pos}
	}
	return d
}

func fileKind(m fs.FileMode) string {
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
	return "a special file"
}

// byteSize writes n in the largest binary unit it is a whole multiple of,
// or in bytes.
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// pathError drops the path from an *os.PathError, which the caller names.
func pathError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

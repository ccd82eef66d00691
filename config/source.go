package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpulayer/gpulayer/internal/inputfile"
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
// path, without blocking and without reading more than the limit.
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

// readRegular is inputfile.Read with the path-less errors of the open
// turned into sentences naming path.
func readRegular(path string, limit int64) ([]byte, error) {
	b, err := inputfile.Read(path, limit)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return nil, fmt.Errorf("%s cannot be read: %s", path, pe.Err)
	}
	return b, err
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

// pathError drops the path from an *os.PathError, which the caller names.
func pathError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gpulayer/gpulayer/internal/inputfile"
	"io/fs"
)

// DefaultMaxBytes caps the size of a state file gpulayer reads or writes:
// 256 MiB. State holds the facts of the last refresh, a few tens of KiB per
// host with its topology, so this leaves room for thousands of hosts while
// keeping a runaway or hostile file from exhausting memory.
const DefaultMaxBytes = 256 << 20

// UnreadableError is a state file gpulayer cannot read: not valid JSON, not a
// state document, a field it does not know, not a regular file, or too
// large. gpulayer never writes over such a file.
type UnreadableError struct {
	Path string
	// Line and Column locate the problem in the file; 0 when unknown. A
	// value of the wrong type has only its line: encoding/json reports
	// where it stopped reading, not where the value began.
	Line, Column int
	Problem      string
	// Backup says what the backup file holds, for the person who must
	// repair the file; empty for a backup file itself.
	Backup string
	Err    error
}

func (e *UnreadableError) Error() string {
	where := e.Path
	switch {
	case e.Line > 0 && e.Column > 0:
		where = fmt.Sprintf("%s:%d:%d", e.Path, e.Line, e.Column)
	case e.Line > 0:
		where = fmt.Sprintf("%s:%d", e.Path, e.Line)
	}
	msg := fmt.Sprintf("state file %s: %s", where, e.Problem)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	if e.Backup != "" {
		msg += "; " + e.Backup
	}
	return msg + "; gpulayer does not overwrite it: repair it, or move it away (or restore the backup) and run again"
}

func (e *UnreadableError) Unwrap() error { return e.Err }

// NewerFormatError is a state document of a newer format_version than this
// gpulayer reads. Rewriting it would drop what this version does not know,
// so it is refused and left as it is.
type NewerFormatError struct {
	Path          string
	FormatVersion int
	// WrittenBy is the gpulayer version the document names.
	WrittenBy string
}

func (e *NewerFormatError) Error() string {
	by := ""
	if e.WrittenBy != "" {
		by = fmt.Sprintf(" (written by gpulayer %s)", e.WrittenBy)
	}
	return fmt.Sprintf("state file %s has format_version %d%s; this gpulayer reads format_version %d and does not rewrite a newer document: use a newer gpulayer",
		e.Path, e.FormatVersion, by, FormatVersion)
}

// readRegular reads the regular file at path, at most max bytes. A file that
// does not exist is (nil, nil). A symbolic link, a FIFO, a device or a file
// larger than max is an *UnreadableError; opening never blocks.
func readRegular(path string, max int64) ([]byte, error) {
	data, err := inputfile.ReadNoFollow(path, max)
	var refused *inputfile.Error
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case inputfile.IsLink(err):
		return nil, &UnreadableError{Path: path, Problem: "is a symbolic link; gpulayer replaces the state file by renaming, which would replace the link: name the file itself"}
	case errors.As(err, &refused) && refused.TooLarge():
		return nil, tooLarge(path, refused.Size, max)
	case errors.As(err, &refused):
		return nil, &UnreadableError{Path: path, Problem: refused.Problem()}
	case err != nil:
		return nil, fmt.Errorf("reading state file %s: %w", path, err)
	}
	return data, nil
}

func tooLarge(path string, size, max int64) error {
	return &UnreadableError{Path: path, Problem: fmt.Sprintf("is larger than the limit of %s (%d bytes or more)", inputfile.Size(max), size)}
}

// decode reads a state document strictly: one JSON object, of a
// format_version this package reads, with no field it does not know (a
// rewrite would silently drop it), with a lineage, a serial of at least 1
// (only Save writes the file, and its first write is serial 1), and no two
// jobs or machines of the same name.
func decode(path string, data []byte) (*State, error) {
	// The version first, leniently: a newer document is refused as newer,
	// not as one with unknown fields.
	var head struct {
		FormatVersion   *int   `json:"format_version"`
		GpulayerVersion string `json:"gpulayer_version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, jsonError(path, data, err)
	}
	switch {
	case head.FormatVersion == nil:
		return nil, &UnreadableError{Path: path, Problem: "is not a state document: it has no format_version"}
	case *head.FormatVersion > FormatVersion:
		return nil, &NewerFormatError{Path: path, FormatVersion: *head.FormatVersion, WrittenBy: head.GpulayerVersion}
	case *head.FormatVersion < 1:
		return nil, &UnreadableError{Path: path, Problem: fmt.Sprintf("has format_version %d, which no gpulayer writes", *head.FormatVersion)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	s := new(State)
	if err := dec.Decode(s); err != nil {
		return nil, jsonError(path, data, err)
	}
	if err := check(s); err != "" {
		return nil, &UnreadableError{Path: path, Problem: err}
	}
	oneLineErrors(s)
	if s.Jobs == nil {
		s.Jobs = []Job{}
	}
	if s.Leftovers == nil {
		s.Leftovers = []Job{}
	}
	if s.Machines == nil {
		s.Machines = []Machine{}
	}
	return s, nil
}

// jsonError turns an encoding/json error into an *UnreadableError with the
// line and column where the decoder stopped.
func jsonError(path string, data []byte, err error) error {
	e := &UnreadableError{Path: path, Problem: "is not a valid state document", Err: err}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		e.Problem = "is not valid JSON"
		// Offset counts the offending byte.
		e.Line, e.Column = position(data, max(syntax.Offset-1, 0))
	case errors.As(err, &typ):
		e.Line, _ = position(data, typ.Offset)
		e.Err = nil
		if typ.Field == "" {
			e.Problem = fmt.Sprintf("is not a state document: it is a JSON %s, not an object", typ.Value)
		} else {
			e.Problem = fmt.Sprintf("is not a valid state document: %s is a JSON %s, not %s", typ.Field, typ.Value, typ.Type)
		}
	default:
		// Unknown fields carry no offset.
		if bytes.Contains([]byte(err.Error()), []byte("unknown field")) {
			e.Problem = "has a field this gpulayer does not know (a newer gpulayer may have written it), so rewriting it would lose data"
		}
	}
	return e
}

// position is the 1-based line and column of byte offset off in data.
func position(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	before := data[:off]
	line = bytes.Count(before, []byte{'\n'}) + 1
	col = len(before) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// check says what makes a decoded document incoherent; "" when nothing does.
func check(s *State) string {
	if s.Lineage == "" {
		return "has no lineage"
	}
	if s.Serial == 0 {
		return "has serial 0; every saved state has serial 1 or more"
	}
	jobs := make(map[string]bool, len(s.Jobs))
	for _, j := range s.Jobs {
		if j.Name == "" {
			return "has a job with no name"
		}
		if jobs[j.Name] {
			return fmt.Sprintf("has two jobs named %q", j.Name)
		}
		jobs[j.Name] = true
	}
	if s.Watcher != nil && s.Watcher.ID == "" {
		return "has a watcher lease with no id"
	}
	if msg := checkWaits(s.Waits); msg != "" {
		return msg
	}
	type key struct{ fleet, name string }
	machines := make(map[key]bool, len(s.Machines))
	for _, m := range s.Machines {
		k := key{m.Fleet, m.Name}
		if machines[k] {
			return fmt.Sprintf("has two machines named %q in fleet %q", m.Name, m.Fleet)
		}
		machines[k] = true
	}
	return ""
}

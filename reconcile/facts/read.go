package facts

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gpulayer/gpulayer/internal/inputfile"
)

// MaxDocumentBytes bounds a facts document read from a file: a host's
// facts are a few kilobytes (its topology matrix most of them), so this
// holds tens of thousands of hosts.
const MaxDocumentBytes = 512 << 20

// ReadFile reads a saved facts document (`gpulayer probe --out`). Only a
// regular file is read, at most MaxDocumentBytes of it; a document of
// another version is refused rather than guessed at.
func ReadFile(path string) (*Document, error) {
	data, err := inputfile.Read(path, MaxDocumentBytes)
	if err != nil {
		return nil, err
	}
	return Decode(path, data)
}

// Decode reads a facts document; name says where it came from, for errors.
func Decode(name string, data []byte) (*Document, error) {
	var d Document
	// One pass: the version is checked after the document is read, and
	// an error in a document of another version reports the version.
	err := json.Unmarshal(data, &d)
	if err == nil && d.Version == 0 {
		return nil, fmt.Errorf("%s is not a facts document: it has no version", name)
	}
	if d.Version != 0 && d.Version != Version {
		return nil, fmt.Errorf("%s is a facts document of version %d; this gpulayer reads version %d", name, d.Version, Version)
	}
	if err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("%s is not a facts document: invalid JSON at byte %d: %w", name, se.Offset, err)
		}
		return nil, fmt.Errorf("%s is not a facts document: %w", name, err)
	}
	return &d, nil
}

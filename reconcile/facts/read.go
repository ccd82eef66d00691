package facts

import (
	"bytes"
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
	var head struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("%s is not a facts document: %w", name, err)
	}
	if head.Version == nil {
		return nil, fmt.Errorf("%s is not a facts document: it has no version", name)
	}
	if *head.Version != Version {
		return nil, fmt.Errorf("%s is a facts document of version %d; this gpulayer reads version %d", name, *head.Version, Version)
	}
	var d Document
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&d); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("%s: invalid JSON at byte %d: %w", name, se.Offset, err)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &d, nil
}

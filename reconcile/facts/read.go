package facts

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/gpulayer/gpulayer/internal/inputfile"
	"github.com/gpulayer/gpulayer/topology"
)

// MaxDocumentBytes bounds a facts document read from a file: a host's
// facts are a few kilobytes (its topology matrix most of them), so this
// holds tens of thousands of hosts.
const MaxDocumentBytes = 512 << 20

// ReadFile reads a saved facts document (`gpulayer probe --out`). Only a
// regular file is read, at most MaxDocumentBytes of it; a document of
// another version is refused rather than guessed at. The file is decoded
// as it is read, never held whole: a plan of thousands of hosts would
// otherwise keep tens of megabytes of JSON beside the facts made of it.
func ReadFile(path string) (*Document, error) {
	f, err := inputfile.Open(path, MaxDocumentBytes)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return decode(path, f)
}

// ReadFileAhead starts ReadFile(path) now and returns what waits for its
// result (the same result however often it is called). `plan --facts`
// must load its configuration before it uses the facts, but neither needs
// the other to be read: at 500 hosts the two are about a third of an
// offline plan each, and on two cores they take the time of the longer one.
func ReadFileAhead(path string) func() (*Document, error) {
	type read struct {
		doc *Document
		err error
	}
	done := make(chan read, 1)
	go func() {
		doc, err := ReadFile(path)
		done <- read{doc, err}
	}()
	return sync.OnceValues(func() (*Document, error) {
		r := <-done
		return r.doc, r.err
	})
}

// Decode reads a facts document; name says where it came from, for errors.
func Decode(name string, data []byte) (*Document, error) {
	return decode(name, bytes.NewReader(data))
}

// decode reads a document with encoding/json's v2 (the module that is
// encoding/json/v2 from Go 1.27 on): about 2.5 times as fast as v1 on the
// facts of thousands of hosts, and it reads a stream without holding it.
// Unlike v1 it matches keys case-sensitively and refuses duplicate keys
// and invalid UTF-8, none of which a document gpulayer writes has. What
// repeats from host to host (the topology of a machine model, its topo -m
// text, GPU names) is kept once (interner).
func decode(name string, r io.Reader) (*Document, error) {
	var d Document
	err := json.UnmarshalRead(r, &d, json.WithUnmarshalers(newInterner().unmarshalers()))
	// The version is checked after the document is read, and an error in a
	// document of another version reports the version (gpulayer writes
	// the version first, so it is read before anything can fail).
	if err == nil && d.Version == 0 {
		return nil, fmt.Errorf("%s is not a facts document: it has no version", name)
	}
	if d.Version != 0 && d.Version != Version {
		return nil, fmt.Errorf("%s is a facts document of version %d; this gpulayer reads version %d", name, d.Version, Version)
	}
	if err != nil {
		var refused *inputfile.Error
		if errors.As(err, &refused) {
			return nil, refused
		}
		var se *jsontext.SyntacticError
		if errors.As(err, &se) && se.Err != nil {
			where := ""
			if se.JSONPointer != "" {
				where = ", in " + string(se.JSONPointer)
			}
			return nil, fmt.Errorf("%s is not a facts document: invalid JSON at byte %d%s: %w", name, se.ByteOffset, where, se.Err)
		}
		return nil, fmt.Errorf("%s is not a facts document: %w", name, err)
	}
	return &d, nil
}

// interner keeps one copy of what many hosts of one document report the
// same: machines of one model print the same topo -m and parse to the
// same matrix. The hosts of a decoded document share those values, which
// no reader of facts modifies.
type interner struct {
	matrices map[string]*topology.Matrix // by their JSON
	strings  map[string]string
}

func newInterner() *interner {
	return &interner{matrices: map[string]*topology.Matrix{}, strings: map[string]string{}}
}

// unmarshalers decode a host with its repeated strings interned, and a
// topology matrix once per distinct JSON text.
func (in *interner) unmarshalers() *json.Unmarshalers {
	return json.JoinUnmarshalers(
		json.UnmarshalFromFunc(decodeHosts),
		json.UnmarshalFromFunc(func(dec *jsontext.Decoder, h *Host) error {
			// hostFields has Host's fields and not this function, so the
			// host is decoded as it would be without it.
			if err := json.UnmarshalDecode(dec, (*hostFields)(h)); err != nil {
				return err
			}
			h.TopologyRaw = in.intern(h.TopologyRaw)
			for i := range h.GPUs {
				g := &h.GPUs[i]
				g.Name, g.PCIBusID = in.intern(g.Name), in.intern(g.PCIBusID)
			}
			return nil
		}),
		json.UnmarshalFromFunc(func(dec *jsontext.Decoder, m **topology.Matrix) error {
			at := dec.StackPointer()
			raw, err := dec.ReadValue()
			if err != nil {
				return err
			}
			if raw.Kind() == 'n' {
				*m = nil
				return nil
			}
			if prev, ok := in.matrices[string(raw)]; ok {
				*m = prev
				return nil
			}
			var v topology.Matrix
			if err := json.Unmarshal(raw, &v); err != nil {
				// Said where in the document, not where in the matrix.
				var se *json.SemanticError
				if errors.As(err, &se) {
					se.JSONPointer = at + se.JSONPointer
					se.ByteOffset += dec.InputOffset() - int64(len(raw))
				}
				return err
			}
			in.matrices[string(raw)] = &v
			*m = &v
			return nil
		}),
	)
}

// hostsChunk is how many hosts decodeHosts decodes into one chunk: 256
// hosts are about 110 KiB.
const hostsChunk = 256

// decodeHosts decodes a JSON array of hosts into chunks of hostsChunk,
// then into one slice of exactly their number. Decoded into one slice
// grown as it fills, as by default, the hosts of a large document are
// copied a dozen times, their copies garbage that the facts read adds to
// the configuration's load beside it (the peak of `plan --facts`'s
// memory; 8 MiB at 5,000 hosts), and the slice kept through the plan is
// up to a third larger than the hosts. Anything but an array (null) is
// left to the default.
func decodeHosts(dec *jsontext.Decoder, hs *[]Host) error {
	if dec.PeekKind() != '[' {
		return errors.ErrUnsupported
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	var chunks [][]Host
	n := 0
	for dec.PeekKind() != ']' {
		if n%hostsChunk == 0 {
			chunks = append(chunks, make([]Host, hostsChunk))
		}
		if err := json.UnmarshalDecode(dec, &chunks[n/hostsChunk][n%hostsChunk]); err != nil {
			return err
		}
		n++
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	all := make([]Host, 0, n)
	for _, c := range chunks {
		all = append(all, c[:min(len(c), n-len(all))]...)
	}
	*hs = all
	return nil
}

// hostFields is Host without its unmarshaler.
type hostFields Host

// intern returns the copy of s seen first.
func (in *interner) intern(s string) string {
	if prev, ok := in.strings[s]; ok {
		return prev
	}
	in.strings[s] = s
	return s
}

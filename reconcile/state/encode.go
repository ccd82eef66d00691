package state

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/gpulayer/gpulayer/reconcile/facts"
)

// encode writes a document the same way every time: two-space indent, a
// final newline, and "&", "<" and ">" as themselves so that commands read
// as written. The bytes are those of an encoding/json Encoder with
// SetEscapeHTML(false) and SetIndent("", "  "); two things make them
// cheaper to write again and again (issue 19): the indentation is the
// indenter's, and the facts, most of a large state and the same in every
// save of an apply, are encoded once (indentedFacts).
func encode(s *State) ([]byte, error) {
	head := *s
	head.Facts, head.Watcher = nil, nil
	compact, err := marshal(&head)
	if err != nil {
		return nil, err
	}
	var ind indenter
	// Indentation makes a state about 1.8 times as large (its topology
	// matrices are lists of short strings): one allocation, not a
	// doubling series of copies.
	out := make([]byte, 0, 2*len(compact)+512)
	// Facts and Watcher are the document's last fields (a test checks):
	// they go before its closing brace.
	out = ind.append(out, compact[:len(compact)-1])
	if s.Facts != nil {
		f, err := indentedFacts(s.Facts, ind)
		if err != nil {
			return nil, err
		}
		out = append(out, f...)
	}
	if s.Watcher != nil {
		w, err := marshal(s.Watcher)
		if err != nil {
			return nil, err
		}
		out = ind.append(out, []byte(`,"watcher":`))
		out = ind.append(out, w)
	}
	return ind.append(out, []byte("}\n")), nil
}

// marshal is v as compact JSON, "&", "<" and ">" as themselves.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

// factsCache is the facts document encode wrote last, with its encoding
// (`,"facts": {...}` indented from where the indenter stood). A State's
// facts are never changed in place: a refresh makes a new document and
// the state takes it whole (Clone shares it, and the saver encodes it
// outside its lock while apply goes on), so the same pointer is the same
// facts. Holding the pointer keeps the document alive, so its address is
// never another's.
var factsCache struct {
	mu   sync.Mutex
	doc  *facts.Document
	at   indenter
	data []byte
}

// indentedFacts is `,"facts":` and doc, indented from where ind stands.
func indentedFacts(doc *facts.Document, ind indenter) ([]byte, error) {
	c := &factsCache
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.doc == doc && c.at == ind {
		return c.data, nil
	}
	compact, err := marshal(doc)
	if err != nil {
		return nil, err
	}
	at := ind
	data := ind.append(make([]byte, 0, 2*len(compact)+64), []byte(`,"facts":`))
	data = ind.append(data, compact)
	c.doc, c.at, c.data = doc, at, data
	return data, nil
}

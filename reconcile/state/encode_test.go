package state

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/reconcile/facts"
)

// referenceEncode is how documents were written before encode indented
// them itself and reused the facts' encoding: the format users, saved
// files and other gpulayers rely on.
func referenceEncode(t testing.TB, s *State) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestEncodeWritesWhatEncodingJSONsIndentingEncoderWrites(t *testing.T) {
	awkward := sample()
	awkward.Jobs[0].Spec.Command = []string{`a "quoted" \ back\\slash \"`, "<tag> & more", "tab\tnew\nline\x01", "\u2028\u2029 é 😀", "\xff\xfe not utf-8", "", `\`, `"`, "{}[],:"}
	awkward.Jobs[0].Spec.Env = map[string]string{"": "empty key", `k"ey`: `{"json": [1, 2]}`}
	awkward.Jobs[0].Error = `ends with a backslash \`
	awkward.Machines[0].HostKeys = []string{}
	awkward.Watcher = &Watcher{ID: "w-1", Host: "vm <1>", PID: 7, StartedAt: time.Unix(1, 0).UTC(), RenewedSerial: 3}
	withWatcher := applyState(t, 3)
	withWatcher.Watcher = &Watcher{ID: "w-2", Host: "vm-2", PID: 9, ExpiresAt: time.Unix(2, 0).UTC()}
	noFacts := applyState(t, 2)
	noFacts.Facts = nil
	emptyFacts := sample()
	emptyFacts.Facts = &facts.Document{}
	for name, s := range map[string]*State{
		"new": New(), "nil lists": {}, "sample": sample(), "awkward strings": awkward,
		"64 nodes": applyState(t, 64), "watcher after facts": withWatcher, "watcher without facts": awkward.Clone(),
		"no facts": noFacts, "empty facts": emptyFacts,
	} {
		t.Run(name, func(t *testing.T) {
			if name == "watcher without facts" {
				s.Facts = nil
			}
			want := referenceEncode(t, s)
			// Twice: the second reuses the facts' encoding.
			for i := range 2 {
				if got := mustEncode(t, s); !bytes.Equal(got, want) {
					t.Fatalf("encode #%d differs from encoding/json's indented output at byte %d:\n%s\nwant\n%s", i+1, firstDiff(got, want), got, want)
				}
			}
		})
	}
}

// TestEncodeWritesNewFactsNotTheLastOnes: facts are encoded once per
// document; a state given a new document (a refresh) writes that one,
// also after going back to an earlier one.
func TestEncodeWritesNewFactsNotTheLastOnes(t *testing.T) {
	a, b := sample(), sample()
	b.Facts = &facts.Document{Version: facts.Version, Hosts: []facts.Host{{Name: "b9", Address: "10.9.9.9", Status: facts.StatusUnreachable}}}
	for _, s := range []*State{a, b, a, b} {
		if got, want := mustEncode(t, s), referenceEncode(t, s); !bytes.Equal(got, want) {
			t.Fatalf("encode wrote other facts than the state's:\n%s\nwant\n%s", got, want)
		}
	}
}

// TestFactsAndWatcherAreTheDocumentsLastFields: encode writes everything
// but those two through encoding/json and splices them in before the
// closing brace; a field added after them would land in the wrong place.
func TestFactsAndWatcherAreTheDocumentsLastFields(t *testing.T) {
	typ := reflect.TypeFor[State]()
	n := typ.NumField()
	if typ.Field(n-2).Name != "Facts" || typ.Field(n-1).Name != "Watcher" {
		t.Fatalf("State's last fields are %s and %s; encode puts Facts and Watcher last: change encode with the fields",
			typ.Field(n-2).Name, typ.Field(n-1).Name)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// FuzzIndenterIndentsAsJSONIndent: for any JSON document, compacted as
// encoding/json writes it, the indenter writes what json.Indent writes.
func FuzzIndenterIndentsAsJSONIndent(f *testing.F) {
	for _, seed := range []string{
		`{}`, `[]`, `{"a":[]}`, `[{},[],{"b":{}}]`, `"a\"b\\"`, `{"x":"\\\\\"","y":[1,-2.5e3,true,false,null]}`,
		`{"":{"":[[[]]]}}`, "\"\u2028 \\u0000\"",
	} {
		f.Add([]byte(seed))
	}
	f.Add(referenceEncode(f, sample()))
	f.Fuzz(func(t *testing.T, doc []byte) {
		if !json.Valid(doc) {
			return
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, doc); err != nil {
			t.Fatal(err)
		}
		src := append(compact.Bytes(), '\n') // as an Encoder ends it
		var want bytes.Buffer
		if err := json.Indent(&want, src, "", "  "); err != nil {
			t.Fatal(err)
		}
		var ind indenter
		if got := ind.append(nil, src); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("indenter wrote\n%q\njson.Indent\n%q", got, want.Bytes())
		}
	})
}

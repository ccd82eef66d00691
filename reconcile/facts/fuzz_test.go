package facts_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/factsview"
)

// fuzzNonce is the nonce of the recorded probe output the fuzzer starts
// from (testdata/probe/h200-vm-NONCE.txt).
const fuzzNonce = "d20954550c042a18fe7a1dc7"

// FuzzParse feeds the probe parser what a hostile or broken machine could
// print. Whatever it reads, the parser must not fail or panic, must keep
// its own promises (GPUs by index, free GPUs exactly those without a
// process), and the table `gpulayer probe` prints from it must carry no
// control character a terminal would act on. The seed corpus is in
// testdata/fuzz/FuzzParse; the recorded outputs are added too.
func FuzzParse(f *testing.F) {
	recorded, err := filepath.Glob(filepath.Join("testdata", "probe", "*-"+fuzzNonce+".txt"))
	if err != nil || len(recorded) == 0 {
		f.Fatalf("no recorded probe output in testdata/probe: %v", err)
	}
	for _, path := range recorded {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, output []byte) {
		h := facts.Parse(output, fuzzNonce)
		switch {
		case h.Status == facts.StatusFailed && !startsALine(output, "==gpulayer:"+fuzzNonce+":begin:") &&
			!startsALine(output, "==gpulayer:"+fuzzNonce+":done"):
			// Output with none of the script's sections is no probe.
			if h.Error == "" || len(h.GPUs) != 0 {
				t.Fatalf("failed without an error, or with GPUs: %q %v", h.Error, h.GPUs)
			}
		case h.Status != facts.StatusOK:
			t.Fatalf("status %q: Parse reports what it could not read as warnings", h.Status)
		}
		if len(h.Warnings) > facts.MaxWarnings+1 || len(h.GPUs) > facts.MaxGPUs {
			t.Fatalf("%d warnings and %d GPUs kept, more than the limits", len(h.Warnings), len(h.GPUs))
		}
		for _, g := range h.GPUs {
			if len(g.Name) > facts.MaxFieldBytes || len(g.UUID) > facts.MaxFieldBytes {
				t.Fatalf("GPU %d: a field longer than %d bytes", g.Index, facts.MaxFieldBytes)
			}
		}
		var free []int
		for i, g := range h.GPUs {
			if i > 0 && g.Index < h.GPUs[i-1].Index {
				t.Fatalf("GPUs out of index order: %d after %d", g.Index, h.GPUs[i-1].Index)
			}
			if len(g.Processes) == 0 {
				free = append(free, g.Index)
			}
		}
		if !slices.Equal(free, h.FreeGPUs) && !(len(free) == 0 && len(h.FreeGPUs) == 0) {
			t.Fatalf("free GPUs %v, but the GPUs without a process are %v", h.FreeGPUs, free)
		}
		if _, err := json.Marshal(h); err != nil {
			t.Fatalf("the host does not marshal: %v", err)
		}
		h.Name, h.Address = "gpu-01", "10.0.0.1"
		var table bytes.Buffer
		if err := factsview.WriteTable(&table, &facts.Document{Version: facts.Version, Hosts: []facts.Host{h}}, false); err != nil {
			t.Fatal(err)
		}
		// Bytes, not runes: a byte that is not UTF-8 (0x9b, CSI to a
		// terminal in 8-bit mode) reads as U+FFFD when ranged over.
		if !utf8.Valid(table.Bytes()) {
			t.Fatalf("the table carries bytes that are not UTF-8 from the machine's output:\n%q", table.String())
		}
		for _, r := range table.String() {
			if r != '\n' && (unicode.IsControl(r) || strings.ContainsRune("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069", r)) {
				t.Fatalf("the table carries %U from the machine's output:\n%q", r, table.String())
			}
		}
	})
}

// startsALine reports whether a line of text starts with prefix.
func startsALine(text []byte, prefix string) bool {
	return bytes.HasPrefix(text, []byte(prefix)) || bytes.Contains(text, []byte("\n"+prefix))
}

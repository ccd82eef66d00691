package topology

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files (topology views) and fuzz seeds")

// TestFuzzSeedsMatchRecordings keeps testdata/fuzz/FuzzParseSMI in step
// with testdata/topo: one seed per recording, holding its exact bytes.
func TestFuzzSeedsMatchRecordings(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzParseSMI")
	for _, f := range recordings {
		want := "go test fuzz v1\nstring(" + strconv.Quote(readRecording(t, "../testdata/topo", f.file)) + ")\n"
		path := filepath.Join(dir, strings.TrimSuffix(f.file, ".txt"))
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./topology -run TestFuzzSeeds -update)", err)
		}
		if string(got) != want {
			t.Errorf("%s differs from its recording (run with -update)", path)
		}
	}
}

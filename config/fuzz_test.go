package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary native or JSON syntax to Load, then renders
// whatever it reports and formats the input: none of it may panic. The
// seed corpus in testdata/fuzz/FuzzLoad is every fixture and example file
// (regenerate it with go test ./config -run TestFuzzSeedCorpus -update).
func FuzzLoad(f *testing.F) {
	f.Add([]byte(zoneConfig), false)
	f.Fuzz(func(t *testing.T, src []byte, asJSON bool) {
		dir := t.TempDir()
		name := "main.hcl"
		if asJSON {
			name = "main.hcl.json"
		}
		if err := os.WriteFile(filepath.Join(dir, name), src, 0o644); err != nil {
			t.Fatal(err)
		}
		// Every third input is loaded as validate loads it, so that unknown
		// values reach every decoder too.
		cfg, diags := Load(dir, LoadOptions{Vars: []VarArg{{Assignment: "zone=europe-west1-b"}}, Environ: []string{"GPULAYER_VAR_nodes=2"},
			UnsetVariablesUnknown: len(src)%3 == 0})
		if cfg == nil {
			t.Fatal("Load returned no Config")
		}
		for _, d := range diags {
			if d.Summary == "" {
				t.Errorf("diagnostic without a summary: %#v", d)
			}
		}
		var buf bytes.Buffer
		if err := WriteDiagnostics(&buf, diags, cfg.Files, RenderOptions{Color: len(src)%2 == 0}); err != nil {
			t.Fatal(err)
		}
		if err := WriteDiagnosticsJSON(&buf, diags); err != nil {
			t.Fatal(err)
		}
		if !asJSON {
			if out, fd := Format(src, name); !fd.HasErrors() {
				UnifiedDiff(name, src, out)
			}
		}
	})
}

// TestFuzzSeedCorpusMatchesFixtures keeps the committed seed corpus in
// step with the fixtures and examples it is made from.
func TestFuzzSeedCorpusMatchesFixtures(t *testing.T) {
	var sources []string
	for _, pattern := range []string{
		"../testdata/config/*/*.hcl", "../testdata/config/*/*.hcl.json",
		"../examples/*/*.hcl", "testdata/fmt/*.hcl",
	} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, m...)
	}
	if len(sources) == 0 {
		t.Fatal("no seed sources")
	}
	corpus := filepath.Join("testdata", "fuzz", "FuzzLoad")
	for _, src := range sources {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(filepath.ToSlash(filepath.Clean(src)), "../")
		entry := strings.NewReplacer("/", "-", ".", "_").Replace(rel)
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbool(%v)\n", data, strings.HasSuffix(src, ".json"))
		path := filepath.Join(corpus, entry)
		if *update {
			if err := os.MkdirAll(corpus, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("seed %s is missing or stale (run go test ./config -run TestFuzzSeedCorpus -update)", path)
		}
	}
}

package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFormatGolden formats testdata/fmt/<name>.hcl and compares the result
// with testdata/golden/fmt/<name>.hcl, and the diff fmt --diff prints with
// testdata/golden/fmt/<name>.diff.
func TestFormatGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "fmt", "*.hcl"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no fmt inputs: %v", err)
	}
	for _, in := range inputs {
		name := filepath.Base(in)
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			out, diags := Format(src, name)
			if diags.HasErrors() {
				t.Fatalf("diagnostics:\n%s", diagList(diags))
			}
			golden(t, filepath.Join("fmt", name), out)
			golden(t, filepath.Join("fmt", strings.TrimSuffix(name, ".hcl")+".diff"), []byte(UnifiedDiff(name, src, out)))
			again, _ := Format(out, name)
			if string(again) != string(out) {
				t.Errorf("formatting is not idempotent")
			}
		})
	}
}

func TestFormatRefusesFileThatDoesNotParse(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(fixtures, "unclosed_brace", "main.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	out, diags := Format(src, "main.hcl")
	if out != nil || !diags.HasErrors() || diags[0].Subject == nil || diags[0].Subject.Start.Line != 1 {
		t.Fatalf("Format = %q, %s", out, diagList(diags))
	}
}

func TestFormattedQuickstartIsUnchanged(t *testing.T) {
	files, _ := filepath.Glob("../examples/quickstart/*.hcl")
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if out, _ := Format(src, f); string(out) != string(src) {
			t.Errorf("%s is not formatted:\n%s", f, UnifiedDiff(f, src, out))
		}
	}
}

func TestUnifiedDiffOfEqualTextsIsEmpty(t *testing.T) {
	if d := UnifiedDiff("x", []byte("a\nb\n"), []byte("a\nb\n")); d != "" {
		t.Errorf("diff = %q", d)
	}
}

func TestUnifiedDiffSplitsDistantChangesIntoHunks(t *testing.T) {
	var a, b []string
	for i := 0; i < 20; i++ {
		a = append(a, "line")
		b = append(b, "line")
	}
	a[2], b[2] = "old top", "new top"
	a[17], b[17] = "old bottom", "new bottom"
	d := UnifiedDiff("f", []byte(strings.Join(a, "\n")+"\n"), []byte(strings.Join(b, "\n")+"\n"))
	if strings.Count(d, "@@ -") != 2 || !strings.Contains(d, "@@ -1,6 +1,6 @@") || !strings.Contains(d, "@@ -15,6 +15,6 @@") {
		t.Errorf("diff:\n%s", d)
	}
}

func TestFormatRefusesNestingBeyondTheLimitAndCapsDiagnostics(t *testing.T) {
	out, diags := Format([]byte("x = "+strings.Repeat("[", deep)+strings.Repeat("]", deep)+"\n"), "deep.hcl")
	if out != nil || len(diags) != 1 || diags[0].Summary != "Nesting too deep" || diags[0].Subject.Filename != "deep.hcl" {
		t.Fatalf("Format = %.40q, %s", out, diagList(diags))
	}
	out, diags = Format([]byte(strings.Repeat("x = ?\n", 100)), "broken.hcl")
	if out != nil || len(diags) != maxDiagnosticsPerFile+1 || diags[len(diags)-1].Summary != "More problems not shown" {
		t.Fatalf("Format = %.40q, %d diagnostics:\n%s", out, len(diags), diagList(diags))
	}
}

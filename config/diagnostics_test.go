package config

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderDiagnosticsGolden renders every fixture's diagnostics in
// Terraform's shape and compares them with testdata/golden/<fixture>.txt.
func TestRenderDiagnosticsGolden(t *testing.T) {
	for _, name := range fixtureDirs(t) {
		t.Run(name, func(t *testing.T) {
			cfg, diags := Load(filepath.Join(fixtures, name), caseOf(t, name).options())
			var buf bytes.Buffer
			if err := WriteDiagnostics(&buf, diags, cfg.Files, RenderOptions{}); err != nil {
				t.Fatal(err)
			}
			golden(t, name+".txt", buf.Bytes())
		})
	}
}

func TestRenderDiagnosticsInColourHighlightsTheRange(t *testing.T) {
	cfg, diags := Load(filepath.Join(fixtures, "unknown_policy"), LoadOptions{})
	var buf bytes.Buffer
	if err := WriteDiagnostics(&buf, diags, cfg.Files, RenderOptions{Color: true}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "\x1b[") || strings.Contains(out, "^^^") {
		t.Errorf("colour output should use escape sequences, not carets:\n%q", out)
	}
	golden(t, "unknown_policy.color.txt", buf.Bytes())
}

func TestRenderedDiagnosticNamesFileLineAndBlock(t *testing.T) {
	cfg, diags := Load(filepath.Join(fixtures, "unknown_policy"), LoadOptions{})
	var buf bytes.Buffer
	if err := WriteDiagnostics(&buf, diags, cfg.Files, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"Error: Unknown policy",
		"",
		`  on ../testdata/config/unknown_policy/main.hcl line 6, in job "train":`,
		"   6:   policy  = policy.tigth",
		"                  ^^^^^^^^^^^^",
		"",
		`No policy "tigth" is declared. Did you mean "tight"?`,
		"",
		"",
	}, "\n")
	if buf.String() != want {
		t.Errorf("rendered:\n%s\nwant:\n%s", buf.String(), want)
	}
}

func TestDiagnosticsJSONHasCountsAndRanges(t *testing.T) {
	_, diags := Load(filepath.Join(fixtures, "three_mistakes"), LoadOptions{})
	var buf bytes.Buffer
	if err := WriteDiagnosticsJSON(&buf, diags); err != nil {
		t.Fatal(err)
	}
	golden(t, "three_mistakes.json", buf.Bytes())
	var r Report
	if err := json.Unmarshal(buf.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Valid || r.ErrorCount != 3 || r.WarningCount != 0 || len(r.Diagnostics) != 3 {
		t.Fatalf("report = %+v", r)
	}
	for _, d := range r.Diagnostics {
		if d.Severity != "error" || d.Range == nil || d.Range.Start.Line == 0 || d.Range.End.Byte <= d.Range.Start.Byte {
			t.Errorf("diagnostic %+v lacks a range", d)
		}
	}
}

func TestWarningsAloneLeaveTheReportValid(t *testing.T) {
	_, diags := Load(filepath.Join(fixtures, "fleet_without_machines"), LoadOptions{})
	r := NewReport(diags)
	if !r.Valid || r.WarningCount != 1 || r.ErrorCount != 0 || r.Diagnostics[0].Severity != "warning" {
		t.Fatalf("report = %+v", r)
	}
}

func TestRenderingStripsControlBytesFromSource(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "main.hcl", "job \"x\" {\n  nodes = 1\n  command = [\"a\"]\n  evil = \"\x1b]0;title\x07\"\n}\n")
	cfg, diags := Load(dir, LoadOptions{})
	var buf bytes.Buffer
	if err := WriteDiagnostics(&buf, diags, cfg.Files, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsAny(buf.Bytes(), "\x1b\x07") || len(diags) == 0 {
		t.Errorf("control bytes reached the output:\n%q", buf.String())
	}
}

func TestSnippetOfAVeryLongLineIsCutAroundTheRange(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("a", 300_000)
	writeFile(t, dir, "main.hcl", "locals {\n  x = [\""+long+"\", local.nope, \""+long+"\"]\n}\n")
	cfg, diags := Load(dir, LoadOptions{})
	if len(diags) != 1 {
		t.Fatalf("diagnostics:\n%s", diagList(diags))
	}
	var buf bytes.Buffer
	if err := WriteDiagnostics(&buf, diags, cfg.Files, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(buf.String(), "\n")
	var snippet, carets string
	for i, l := range lines {
		if strings.HasPrefix(l, "   2: ") {
			snippet, carets = l, lines[i+1]
		}
	}
	if len(snippet) > maxSnippetRunes+20 || !strings.HasPrefix(snippet, "   2: ...") || !strings.HasSuffix(snippet, "...") {
		t.Fatalf("snippet line of %d bytes: %.200q", len(snippet), snippet)
	}
	col := strings.Index(carets, "^")
	if col < 0 || snippet[col:col+len("local.nope")] != "local.nope" || strings.Count(carets, "^") != len("local.nope") {
		t.Errorf("carets do not mark local.nope:\n%s\n%s", snippet, carets)
	}
}

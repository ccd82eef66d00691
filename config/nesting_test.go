package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// deep is far beyond what the parsers' stacks survive (about 120 000
// levels of "[" ended the process before the limit existed).
const deep = 200_000

func rep(s string, n int) string { return strings.Repeat(s, n) }

func TestNestingBeyondTheLimitIsOneDiagnosticNamingFileAndLine(t *testing.T) {
	listVar := "variable \"x\" {\n  type    = list(any)\n  default = []\n}\n"
	tests := []struct {
		name     string
		files    map[string]string
		vars     []VarArg // File is relative to the directory
		environ  []string
		wantFile string // relative to the directory; "" for a --var or environment value
		wantLine int
	}{
		{name: "brackets", files: map[string]string{"main.hcl": "locals {\n  x = " + rep("[", deep) + rep("]", deep) + "\n}\n"},
			wantFile: "main.hcl", wantLine: 2},
		{name: "parentheses", files: map[string]string{"main.hcl": "locals {\n  x = " + rep("(", deep) + "1" + rep(")", deep) + "\n}\n"},
			wantFile: "main.hcl", wantLine: 2},
		{name: "object braces", files: map[string]string{"main.hcl": "locals {\n\n  x = " + rep("{a=", deep) + "1" + rep("}", deep) + "\n}\n"},
			wantFile: "main.hcl", wantLine: 3},
		{name: "binary operator chain", files: map[string]string{"main.hcl": "locals {\n  x = 1" + rep("+1", deep) + "\n}\n"},
			wantFile: "main.hcl", wantLine: 2},
		{name: "unary operators", files: map[string]string{"main.hcl": "locals {\n  x = " + rep("!", deep) + "true\n}\n"},
			wantFile: "main.hcl", wantLine: 2},
		{name: "conditional chain", files: map[string]string{"main.hcl": "locals {\n  x = " + rep("true?1:", deep/2) + "1\n}\n"},
			wantFile: "main.hcl", wantLine: 2},
		{name: "index chain", files: map[string]string{"main.hcl": "locals {\n  a = [0]\n  x = local.a" + rep("[local.a[0]]", deep/8) + "\n}\n"},
			wantFile: "main.hcl", wantLine: 3},
		{name: "splat chain", files: map[string]string{"main.hcl": "locals {\n  x = [[1]]" + rep("[*]", deep) + "\n}\n"},
			wantFile: "main.hcl", wantLine: 2},
		{name: "templates in templates", files: map[string]string{"main.hcl": "locals {\n  x = " + rep(`"${`, deep) + "1" + rep(`}"`, deep) + "\n}\n"},
			wantFile: "main.hcl", wantLine: 2},
		{name: "template directives", files: map[string]string{"main.hcl": "locals {\n  x = <<EOT\n" + rep("%{if true}", deep/4) + rep("%{endif}", deep/4) + "\nEOT\n}\n"},
			wantFile: "main.hcl", wantLine: 3},
		{name: "JSON arrays", files: map[string]string{"main.hcl.json": `{"locals": {"x": ` + rep("[", deep) + rep("]", deep) + "}}"},
			wantFile: "main.hcl.json", wantLine: 1},
		{name: "JSON string template", files: map[string]string{"main.hcl.json": "{\"locals\": {\n\"x\": \"${" + rep("[", deep) + rep("]", deep) + "}\"}}"},
			wantFile: "main.hcl.json", wantLine: 2},
		{name: "JSON string template behind escapes", files: map[string]string{"main.hcl.json": `{"locals": {"x": "` + rep(`${\u0022`, deep/8) + `"}}`},
			wantFile: "main.hcl.json", wantLine: 1},
		{name: "JSON type expression", files: map[string]string{"main.hcl.json": `{"variable": {"x": {"type": "` + rep("list(", deep/2) + "string" + rep(")", deep/2) + `"}}}`},
			wantFile: "main.hcl.json", wantLine: 1},
		{name: "auto variable file", files: map[string]string{"main.hcl": listVar, "x.auto.vars.hcl": "x = " + rep("[", deep) + rep("]", deep) + "\n"},
			wantFile: "x.auto.vars.hcl", wantLine: 1},
		{name: "var-file", files: map[string]string{"main.hcl": listVar, "v.hcl.vars": "\nx = " + rep("[", deep) + rep("]", deep) + "\n"},
			vars: []VarArg{{File: "v.hcl.vars"}}, wantFile: "v.hcl.vars", wantLine: 2},
		{name: "--var value", files: map[string]string{"main.hcl": listVar},
			vars: []VarArg{{Assignment: "x=" + rep("[", deep) + rep("]", deep)}}, wantLine: 1},
		{name: "environment value", files: map[string]string{"main.hcl": listVar},
			environ: []string{"GPULAYER_VAR_x=" + rep("[", deep) + rep("]", deep)}, wantLine: 1},
		{name: "--var value operator chain", files: map[string]string{"main.hcl": listVar},
			vars: []VarArg{{Assignment: "x=[1" + rep("\n+1", deep) + "]"}}, wantLine: maxNesting + 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range tc.files {
				writeFile(t, dir, name, text)
			}
			var vars []VarArg
			for _, v := range tc.vars {
				if v.File != "" {
					v.File = filepath.Join(dir, v.File)
				}
				vars = append(vars, v)
			}
			_, diags := Load(dir, LoadOptions{Vars: vars, Environ: tc.environ})
			if len(diags) != 1 || diags[0].Summary != "Nesting too deep" {
				t.Fatalf("want one \"Nesting too deep\" diagnostic, got:\n%s", diagList(diags))
			}
			d := diags[0]
			wantFile := "<value for var.x>"
			if tc.wantFile != "" {
				wantFile = filepath.Join(dir, tc.wantFile)
			}
			if d.Subject == nil || d.Subject.Filename != wantFile || d.Subject.Start.Line != tc.wantLine {
				t.Errorf("diagnostic at %v, want %s line %d", d.Subject, wantFile, tc.wantLine)
			}
			if tc.wantFile == "" && !strings.Contains(d.Detail, `variable "x"`) {
				t.Errorf("detail does not name the variable: %s", d.Detail)
			}
			if !strings.Contains(d.Detail, "128") {
				t.Errorf("detail does not give the limit: %s", d.Detail)
			}
		})
	}
}

func TestJSONDecodeRefusesDeepJSON(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "main.hcl", "locals {\n  x = jsondecode(\""+rep("[", deep)+rep("]", deep)+"\")\n}\n")
	_, diags := Load(dir, LoadOptions{})
	if len(diags) != 1 || !strings.Contains(diags[0].Detail, "nests more than 128 levels") {
		t.Fatalf("diagnostics:\n%s", diagList(diags))
	}
}

func TestNestingWithinTheLimitAndBracketsInTextAreAccepted(t *testing.T) {
	tests := map[string]string{
		"main.hcl": "locals {\n" +
			"  lists    = " + rep("[", maxNesting-1) + rep("]", maxNesting-1) + "\n" + // and the braces of locals

			"  sum      = 1" + rep(" + 1", maxNesting-1) + "\n" +
			"  compare  = 1" + rep(" == 1", maxNesting-1) + "\n" +
			"  many     = [" + rep("1 + 1 + 1, ", 5000) + "]\n" +
			"  text     = \"" + rep("[(", 5000) + "\\\"" + rep("{", 1000) + "\"\n" +
			"  escaped  = \"$${" + rep("[", 1000) + "\"\n" +
			"  heredoc  = <<-EOT\n" + rep("  "+rep("[", 300)+" ${local.text} %{if true}x%{endif}\n", 300) + "  EOT\n" +
			"  # " + rep("{", 1000) + "\n" +
			"  /* " + rep("(", 1000) + " */\n" +
			"  decoded  = jsondecode(\"" + rep("[", maxNesting) + rep("]", maxNesting) + "\")\n" +
			"  path     = \"" + rep("/a.b-c", 1000) + "\"\n" +
			"}\n" +
			rep("locals {\n  a"+rep("b", 10)+" = 1 + 1 + 1\n}\n", 1),
		"more.hcl.json": `{"locals": {"json": ` + rep("[", maxNesting-2) + rep("]", maxNesting-2) + `, "str": "` + rep("[(/.-", 1000) + rep("${local.text}", 1000) + `"}}`,
	}
	dir := t.TempDir()
	for name, text := range tests {
		writeFile(t, dir, name, text)
	}
	_, diags := Load(dir, LoadOptions{})
	if len(diags) > 0 {
		t.Fatalf("diagnostics:\n%s", diagList(diags))
	}
}

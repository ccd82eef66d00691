package config

import (
	"strings"
	"testing"
)

// TestEnvNamesAreThoseShCanExportToTheProgram pins which names a job's env
// may use: POSIX names, except those sh keeps for itself and the launch
// script's own variables; gpulayer's own variables are allowed (they win).
func TestEnvNamesAreThoseShCanExportToTheProgram(t *testing.T) {
	const (
		ok       = ""
		invalid  = "Invalid environment variable name"
		reserved = "Reserved environment variable name"
	)
	for name, want := range map[string]string{
		"A": ok, "_": ok, "_x": ok, "a1": ok, "NCCL_DEBUG": ok, "lower_case": ok, "X9_": ok,
		"PATH": ok, "HOME": ok, "MASTER_PORT": ok, "GPULAYER_RUN_ID": ok, "GPULAYER_port": ok,
		"": invalid, "1A": invalid, "A=B": invalid, "BAD NAME": invalid, "A-B": invalid, "A.B": invalid,
		"é": invalid, "A\n": invalid, "$X": invalid, "A;rm -rf ~": invalid, "A\x00": invalid,
		"IFS": reserved, "PWD": reserved, "OPTIND": reserved, "UID": reserved, "EUID": reserved,
		"PPID": reserved, "SHELLOPTS": reserved, "BASHOPTS": reserved, "BASH_VERSINFO": reserved,
		"gpulayer_port": reserved, "gpulayer_": reserved,
	} {
		summary, reason := EnvNameProblem(name)
		if summary != want {
			t.Errorf("%q: summary %q, want %q", name, summary, want)
		}
		if (summary == "") != (reason == "") {
			t.Errorf("%q: summary %q with reason %q", name, summary, reason)
		}
	}
}

func TestEnvNameDiagnosticSaysWhatAValidNameIs(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "main.hcl", "job \"j\" {\n  nodes   = 1\n  command = [\"a\"]\n  env     = { \"A=B\" = \"c\" }\n}\n")
	_, diags := Load(dir, LoadOptions{})
	if len(diags) != 1 {
		t.Fatalf("diagnostics:\n%s", diagList(diags))
	}
	for _, want := range []string{`"A=B" cannot be the name`, "[A-Za-z_][A-Za-z0-9_]*", `arrive as the variable "A"`} {
		if !strings.Contains(diags[0].Detail, want) {
			t.Errorf("detail %q lacks %q", diags[0].Detail, want)
		}
	}
	if s := diags[0].Subject; s.Start.Line != 4 || s.Start.Column != 15 || s.End.Column != 20 {
		t.Errorf("subject %s, want the key, line 4 columns 15-20", s)
	}
}

// TestEnvNameDiagnosticPointsAtTheKeyInJSON checks that JSON syntax, whose
// objects hcl reads differently, also gets the key's range.
func TestEnvNameDiagnosticPointsAtTheKeyInJSON(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "main.hcl.json", `{"job": {"j": {
  "nodes": 1,
  "command": ["a"],
  "env": {
    "OK": "1",
    "BAD NAME": "2"
  }
}}}
`)
	_, diags := Load(dir, LoadOptions{})
	if len(diags) != 1 || diags[0].Summary != "Invalid environment variable name" {
		t.Fatalf("diagnostics:\n%s", diagList(diags))
	}
	if s := diags[0].Subject; s.Start.Line != 6 || s.Start.Column != 5 {
		t.Errorf("subject %s, want the key at line 6, column 5", s)
	}
}

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/internal/iostreams"
)

func TestValidateQuickstartExitsZero(t *testing.T) {
	io, _, out, errOut := iostreams.Test()
	if code := run([]string{"validate", "../../examples/quickstart"}, io); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "Success! The configuration is valid.") {
		t.Errorf("stdout %q", out.String())
	}
}

func TestValidateThreeMistakesPrintsEachWithFileAndLine(t *testing.T) {
	io, _, _, errOut := iostreams.Test()
	if code := run([]string{"validate", "../../testdata/config/three_mistakes"}, io); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	for _, line := range []string{"line 2,", "line 11,", "line 13,"} {
		want := "on ../../testdata/config/three_mistakes/main.hcl " + line
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
	if n := strings.Count(errOut.String(), "Error: "); n != 3 {
		t.Errorf("%d errors printed, want 3", n)
	}
}

func TestValidateUnclosedBraceExitsOneWithFileAndLine(t *testing.T) {
	io, _, _, errOut := iostreams.Test()
	if code := run([]string{"validate", "../../testdata/config/unclosed_brace"}, io); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(errOut.String(), "on ../../testdata/config/unclosed_brace/main.hcl line 1") {
		t.Errorf("stderr:\n%s", errOut.String())
	}
}

func TestValidateJSONPrintsRanges(t *testing.T) {
	io, _, out, _ := iostreams.Test()
	if code := run([]string{"validate", "--json", "../../testdata/config/three_mistakes"}, io); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	var r config.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if r.Valid || r.ErrorCount != 3 || r.Diagnostics[1].Range == nil || r.Diagnostics[1].Range.Start.Line != 11 {
		t.Errorf("report %+v", r)
	}
	io, _, out, _ = iostreams.Test()
	if code := run([]string{"validate", "--json", "../../examples/quickstart"}, io); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	if !strings.Contains(out.String(), `"valid": true`) || !strings.Contains(out.String(), `"diagnostics": []`) {
		t.Errorf("stdout %s", out.String())
	}
}

func TestValidateVarFlagsApplyInCommandLineOrder(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("main.hcl", `variable "nodes" { type = number }
job "j" {
  nodes   = var.nodes
  command = ["true"]
}
`)
	zero := write("zero.vars", "nodes = 0\n")
	tests := []struct {
		args []string
		code int
	}{
		{[]string{"--var-file", zero, "--var", "nodes=2"}, 0},
		{[]string{"--var", "nodes=2", "--var-file", zero}, 1},
		{[]string{}, 0}, // no value: unknown, as terraform validate has it
	}
	for _, tc := range tests {
		io, _, _, errOut := iostreams.Test()
		args := append([]string{"validate", dir}, tc.args...)
		if code := run(args, io); code != tc.code {
			t.Errorf("%v: exit %d, want %d\n%s", tc.args, code, tc.code, errOut.String())
		}
	}
}

func TestValidateRunsInChdir(t *testing.T) {
	io, _, _, errOut := iostreams.Test()
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	if code := run([]string{"--chdir", "../../examples/quickstart", "validate"}, io); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
}

func TestValidateMissingDirectoryExitsOneWithTheReason(t *testing.T) {
	io, _, _, errOut := iostreams.Test()
	if code := run([]string{"validate", "/nonexistent/gpulayer"}, io); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(errOut.String(), "Cannot read configuration directory") || !strings.Contains(errOut.String(), "/nonexistent/gpulayer") {
		t.Errorf("stderr:\n%s", errOut.String())
	}
}

func TestValidateNeverPrintsASensitiveValue(t *testing.T) {
	for _, fixture := range []string{"sensitive_validation_message", "sensitive_conversion"} {
		dir := "../../testdata/config/" + fixture
		for _, args := range [][]string{
			{"validate", dir},
			{"validate", "--json", dir},
			{"validate", dir, "--var", "api_token=hunter2-Other", "--var", "gpus=hunter2-Other"},
			{"validate", "--json", dir, "--var", "api_token=hunter2-Other", "--var", "gpus=hunter2-Other"},
		} {
			io, _, out, errOut := iostreams.Test()
			if code := run(args, io); code != 1 {
				t.Fatalf("%v: exit %d, want 1; stderr:\n%s", args, code, errOut.String())
			}
			all := out.String() + errOut.String()
			if strings.Contains(all, "hunter2") {
				t.Errorf("%v printed the sensitive value:\n%s", args, all)
			}
			if !strings.Contains(all, "sensitive") {
				t.Errorf("%v does not say a value was withheld:\n%s", args, all)
			}
		}
	}
}

// TestValidateChecksWithoutValuesWherePlanNeedsThem is the CI job without
// secrets: validate accepts variables given no value and still reports
// the mistakes that do not depend on them; plan refuses to go on without
// the values, naming each variable.
func TestValidateChecksWithoutValuesWherePlanNeedsThem(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(`variable "nodes" { type = number }
variable "address" { type = string }
variable "token" { sensitive = true }
fleet "lab" {
  host "a1" { address = var.address }
}
job "train" {
  nodes   = var.nodes
  command = ["python", "train.py", "--token", var.token]
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	io, _, out, errOut := iostreams.Test()
	if code := run([]string{"validate", dir}, io); code != 0 || !strings.Contains(out.String(), "Success!") {
		t.Errorf("validate: exit %d, stdout %q, stderr:\n%s", code, out.String(), errOut.String())
	}

	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.MkdirAll(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	src, _ := os.ReadFile(filepath.Join(dir, "main.hcl"))
	if err := os.WriteFile(filepath.Join(bad, "main.hcl"), append(src, "policy \"p\" { rank = \"fastest\" }\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	io, _, _, errOut = iostreams.Test()
	if code := run([]string{"validate", bad}, io); code != 1 || !strings.Contains(errOut.String(), "Invalid value for rank") ||
		strings.Count(errOut.String(), "Error: ") != 1 {
		t.Errorf("validate of an independent mistake: exit %d, stderr:\n%s", code, errOut.String())
	}

	io, _, _, errOut = iostreams.Test()
	state := filepath.Join(t.TempDir(), "state.json")
	if code := run([]string{"plan", dir, "--state", state}, io); code != 1 {
		t.Errorf("plan: exit %d, want 1", code)
	}
	for _, name := range []string{"nodes", "address", "token"} {
		if want := "The variable \"" + name + "\" has no default and was given no value."; !strings.Contains(errOut.String(), want) {
			t.Errorf("plan's stderr lacks %q:\n%s", want, errOut.String())
		}
	}
}

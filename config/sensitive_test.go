package config

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// secret is the value of every sensitive variable below; no rendering of
// any diagnostic may contain it, or the upper-case form some cases derive.
const secret = "hunter2-Secret"

func TestSensitiveValuesNeverReachDiagnostics(t *testing.T) {
	const decl = "variable \"s\" {\n  sensitive = true\n}\n"
	tests := []struct {
		name    string
		files   map[string]string
		vars    []VarArg // File is relative to the directory
		environ []string
		summary string // a diagnostic that must be there
	}{
		{name: "validation message interpolating the value",
			files: map[string]string{"main.hcl": `variable "s" {
  sensitive = true
  validation {
    condition     = strlen(var.s) > 40
    error_message = "s is ${var.s}, too short."
  }
}
`}, vars: []VarArg{{Assignment: "s=" + secret}}, summary: "Invalid value for variable"},
		{name: "validation message computed from the value",
			files: map[string]string{"main.hcl": `variable "s" {
  sensitive = true
  validation {
    condition     = strlen(var.s) > 40
    error_message = "s is ${upper(var.s)}, too short."
  }
}
`}, environ: []string{"GPULAYER_VAR_s=" + secret}, summary: "Invalid value for variable"},
		{name: "tonumber in a local",
			files:   map[string]string{"main.hcl": decl + "locals {\n  n = tonumber(var.s)\n}\n"},
			vars:    []VarArg{{Assignment: "s=" + secret}},
			summary: "Invalid function argument"},
		{name: "tonumber in a validation condition",
			files: map[string]string{"main.hcl": `variable "s" {
  sensitive = true
  validation {
    condition     = tonumber(var.s) > 0
    error_message = "s must be positive."
  }
}
`}, vars: []VarArg{{Assignment: "s=" + secret}}, summary: "Invalid function argument"},
		{name: "regex compiled from the value",
			files:   map[string]string{"main.hcl": decl + "locals {\n  r = regex(\"(${var.s}\", \"x\")\n}\n"},
			vars:    []VarArg{{Assignment: "s=" + secret}},
			summary: "Invalid function argument"},
		{name: "enum attribute",
			files:   map[string]string{"main.hcl": decl + "job \"j\" {\n  nodes    = 1\n  command  = [\"a\"]\n  launcher = var.s\n}\n"},
			vars:    []VarArg{{Assignment: "s=" + secret}},
			summary: "Invalid value for launcher"},
		{name: "duration attribute",
			files:   map[string]string{"main.hcl": decl + "job \"j\" {\n  nodes        = 1\n  command      = [\"a\"]\n  stop_timeout = lower(var.s)\n}\n"},
			vars:    []VarArg{{Assignment: "s=" + secret}},
			summary: "Invalid duration for stop_timeout"},
		{name: "host address",
			files:   map[string]string{"main.hcl": decl + "fleet \"f\" {\n  host \"h\" { address = \"root@${var.s}\" }\n}\n"},
			vars:    []VarArg{{Assignment: "s=" + secret}},
			summary: "Invalid host address"},
		{name: "through an ssh block's attribute",
			files: map[string]string{"main.hcl": decl + "ssh \"lab\" {\n  user = var.s\n}\n" +
				"job \"j\" {\n  nodes    = 1\n  command  = [\"a\"]\n  launcher = upper(ssh.lab.user)\n}\n"},
			vars:    []VarArg{{Assignment: "s=" + secret}},
			summary: "Invalid value for launcher"},
		{name: "policy regions matching nothing",
			files: map[string]string{"main.hcl": decl + "policy \"p\" {\n  regions = [var.s]\n}\n" +
				"fleet \"f\" {\n  region = \"eu\"\n  host \"h\" { address = \"10.0.0.1\" }\n}\n" +
				"job \"j\" {\n  policy  = policy.p\n  nodes   = 1\n  command = [\"a\"]\n}\n"},
			vars:    []VarArg{{Assignment: "s=" + secret}},
			summary: "Policy regions match no declared machine"},
		{name: "environment variable name computed from the value",
			files:   map[string]string{"main.hcl": decl + "job \"j\" {\n  nodes   = 1\n  command = [\"a\"]\n  env     = { (upper(var.s)) = \"x\" }\n}\n"},
			vars:    []VarArg{{Assignment: "s=" + secret}},
			summary: "Invalid environment variable name"},
		{name: "torchrun argument from the value",
			files:   map[string]string{"main.hcl": decl + "job \"j\" {\n  nodes   = 1\n  command = [\"a\"]\n  torchrun {\n    args = [\"--log_dir\", var.s]\n  }\n}\n"},
			vars:    []VarArg{{Assignment: "s=--rdzv_conf=token=" + secret}},
			summary: "Reserved torchrun argument"},
		{name: "wrong type in an auto variable file",
			files: map[string]string{"main.hcl": "variable \"s\" {\n  type      = number\n  sensitive = true\n}\n",
				"s.auto.vars.hcl": "s = \"" + secret + "\"\n"},
			summary: "Invalid value for variable"},
		{name: "wrong type in a JSON variable file",
			files: map[string]string{"main.hcl": "variable \"s\" {\n  type      = bool\n  sensitive = true\n}\n",
				"values.json": "{\"s\": \"" + secret + "\"}"},
			vars:    []VarArg{{File: "values.json"}},
			summary: "Invalid value for variable"},
		{name: "failing validation of a default",
			files: map[string]string{"main.hcl": `variable "s" {
  sensitive = true
  default   = "` + secret + `"
  validation {
    condition     = strlen(var.s) > 40
    error_message = "s is too short."
  }
}
`}, summary: "Invalid value for variable"},
		{name: "a list value that does not parse",
			files:   map[string]string{"main.hcl": "variable \"s\" {\n  type      = list(string)\n  sensitive = true\n}\n"},
			vars:    []VarArg{{Assignment: "s=[" + secret}},
			summary: "Invalid value for variable"},
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
			cfg, diags := Load(dir, LoadOptions{Vars: vars, Environ: tc.environ})
			found := false
			for _, d := range diags {
				found = found || d.Summary == tc.summary
			}
			if !found {
				t.Fatalf("no %q diagnostic:\n%s", tc.summary, diagList(diags))
			}
			var text, colour, js, native bytes.Buffer
			if err := WriteDiagnostics(&text, diags, cfg.Files, RenderOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := WriteDiagnostics(&colour, diags, cfg.Files, RenderOptions{Color: true}); err != nil {
				t.Fatal(err)
			}
			if err := WriteDiagnosticsJSON(&js, diags); err != nil {
				t.Fatal(err)
			}
			// hcl's own renderer prints snippets and "with var.x as ..."
			// from the expression and context a diagnostic carries.
			if err := hcl.NewDiagnosticTextWriter(&native, cfg.Files, 200, false).WriteDiagnostics(diags); err != nil {
				t.Fatal(err)
			}
			for what, out := range map[string]string{"text": text.String(), "colour": colour.String(), "JSON": js.String(), "hcl's renderer": native.String()} {
				if strings.Contains(out, secret) || strings.Contains(out, strings.ToUpper(secret)) || strings.Contains(out, strings.ToLower(secret)) {
					t.Errorf("%s output shows the sensitive value:\n%s", what, out)
				}
			}
		})
	}
}

func TestConfigKeepsSensitiveValuesUnmarkedForItsUsers(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "main.hcl", "variable \"s\" {\n  sensitive = true\n}\nlocals {\n  l = upper(var.s)\n}\n"+
		"ssh \"lab\" {\n  user = var.s\n}\n")
	cfg, diags := Load(dir, LoadOptions{Vars: []VarArg{{Assignment: "s=" + secret}}})
	if len(diags) > 0 {
		t.Fatalf("diagnostics:\n%s", diagList(diags))
	}
	if l := cfg.Locals["l"]; l.ContainsMarked() || l.AsString() != strings.ToUpper(secret) {
		t.Errorf("local l = %#v", l)
	}
	if cfg.SSH[0].User != secret || !cfg.Variables[0].Sensitive || cfg.Variables[0].Value.AsString() != secret {
		t.Errorf("ssh user %q, variable %+v", cfg.SSH[0].User, cfg.Variables[0])
	}
}

package config

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// zoneConfig declares var.zone and a fleet that uses it, so that the value
// a source gives is visible in the loaded configuration.
const zoneConfig = `variable "zone" {
  type    = string
  default = "from-default"
}
fleet "f" {
  zone = var.zone
  host "h" { address = "10.0.0.1" }
}
`

func TestVariablePrecedenceFollowsTerraform(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "main.hcl", zoneConfig)
	other := t.TempDir()
	fileA := writeFile(t, other, "a.vars.hcl", `zone = "from-var-file-a"`)
	fileB := writeFile(t, other, "b.vars.hcl", `zone = "from-var-file-b"`)
	env := []string{"HOME=/root", "GPULAYER_VAR_zone=from-env"}

	tests := []struct {
		name     string
		autoA    bool // a.auto.vars.hcl
		autoB    bool // b.auto.vars.hcl
		environ  []string
		vars     []VarArg
		wantZone string
	}{
		{name: "default alone", wantZone: "from-default"},
		{name: "environment over default", environ: env, wantZone: "from-env"},
		{name: "auto file over environment", environ: env, autoA: true, wantZone: "from-auto-a"},
		{name: "later auto file in lexical order wins", environ: env, autoA: true, autoB: true, wantZone: "from-auto-b"},
		{name: "var-file over auto files", environ: env, autoA: true, autoB: true,
			vars: []VarArg{{File: fileA}}, wantZone: "from-var-file-a"},
		{name: "var after var-file wins", environ: env, autoA: true,
			vars: []VarArg{{File: fileA}, {Assignment: "zone=from-cli"}}, wantZone: "from-cli"},
		{name: "var-file after var wins", environ: env,
			vars: []VarArg{{Assignment: "zone=from-cli"}, {File: fileB}}, wantZone: "from-var-file-b"},
		{name: "last var wins", vars: []VarArg{{Assignment: "zone=one"}, {Assignment: "zone=two=2"}}, wantZone: "two=2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			writeFile(t, d, "main.hcl", zoneConfig)
			if tc.autoA {
				writeFile(t, d, "a.auto.vars.hcl", `zone = "from-auto-a"`)
			}
			if tc.autoB {
				writeFile(t, d, "b.auto.vars.hcl", `zone = "from-auto-b"`)
			}
			cfg, diags := Load(d, LoadOptions{Vars: tc.vars, Environ: tc.environ})
			if len(diags) > 0 {
				t.Fatalf("diagnostics:\n%s", diagList(diags))
			}
			if got := cfg.Fleets[0].Hosts[0].Location.Zone; got != tc.wantZone {
				t.Errorf("zone = %q, want %q", got, tc.wantZone)
			}
		})
	}
	_ = dir
}

func TestCommandLineValuesOfComplexTypesAreParsedAsExpressions(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "main.hcl", `variable "regions" { type = list(string) }
variable "nodes" { type = number }
policy "p" { regions = var.regions }
job "j" {
  policy  = policy.p
  nodes   = var.nodes
  command = ["true"]
}
`)
	cfg, diags := Load(dir, LoadOptions{
		Vars:    []VarArg{{Assignment: `regions=["europe-west1", "paris"]`}},
		Environ: []string{"GPULAYER_VAR_nodes=3"},
	})
	if diags.HasErrors() {
		t.Fatalf("diagnostics:\n%s", diagList(diags))
	}
	if got := strings.Join(cfg.Policies[0].Regions, ","); got != "europe-west1,paris" || cfg.Jobs[0].Nodes != 3 {
		t.Errorf("regions %q nodes %d", got, cfg.Jobs[0].Nodes)
	}
	for _, v := range cfg.Variables {
		if v.Name == "nodes" && !v.Value.RawEquals(cty.NumberIntVal(3)) {
			t.Errorf("var.nodes = %#v", v.Value)
		}
	}
}

func TestVariableValueProblemsAreReported(t *testing.T) {
	tests := []struct {
		name    string
		vars    []VarArg
		environ []string
		auto    string
		summary string
		warning bool
	}{
		{name: "undeclared --var", vars: []VarArg{{Assignment: "zones=x"}}, summary: "Value for undeclared variable"},
		{name: "--var without equals", vars: []VarArg{{Assignment: "zone"}}, summary: "Invalid --var option"},
		{name: "missing --var-file", vars: []VarArg{{File: "/nonexistent/gpulayer.vars.hcl"}}, summary: "Cannot read variable file"},
		{name: "wrong type from environment", environ: []string{"GPULAYER_VAR_count=many"}, summary: "Invalid value for variable"},
		{name: "undeclared in auto file", auto: "zonez = \"x\"\n", summary: "Value for undeclared variable", warning: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "main.hcl", zoneConfig+"variable \"count\" {\n  type    = number\n  default = 1\n}\n")
			if tc.auto != "" {
				writeFile(t, dir, "x.auto.vars.hcl", tc.auto)
			}
			_, diags := Load(dir, LoadOptions{Vars: tc.vars, Environ: tc.environ})
			if len(diags) != 1 || diags[0].Summary != tc.summary || diags.HasErrors() == tc.warning {
				t.Fatalf("want one %q (warning %v), got:\n%s", tc.summary, tc.warning, diagList(diags))
			}
		})
	}
}

func TestUndeclaredEnvironmentVariablesAreIgnored(t *testing.T) {
	_, diags := Load(filepath.Join("..", "examples", "quickstart"), LoadOptions{Environ: []string{"GPULAYER_VAR_nothing=1", "GPULAYER_VAR_zone=europe-west1-c"}})
	if len(diags) > 0 {
		t.Fatalf("diagnostics:\n%s", diagList(diags))
	}
}

func TestValidationRuleChecksValuesFromEverySource(t *testing.T) {
	_, diags := Load(filepath.Join("..", "examples", "quickstart"), LoadOptions{Vars: []VarArg{{Assignment: "zone=Europe West"}}})
	if len(diags) != 1 || diags[0].Summary != "Invalid value for variable" || !strings.Contains(diags[0].Detail, "must be a GCP zone") {
		t.Fatalf("diagnostics:\n%s", diagList(diags))
	}
	if diags[0].Subject == nil || diags[0].Subject.Filename != "<value for var.zone>" {
		t.Errorf("subject = %v, want the command-line value", diags[0].Subject)
	}
}

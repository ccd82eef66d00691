package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
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

// TestUnsetVariablesAreErrorsUnlessValidateAsksForUnknowns loads the
// fixture whose every variable has no value as plan does (each is an
// error, and nothing computed from them is reported besides) and as
// validate does (unknown: only the mistakes that do not depend on them).
func TestUnsetVariablesAreErrorsUnlessValidateAsksForUnknowns(t *testing.T) {
	dir := filepath.Join(fixtures, "unset_variables_unknown")
	summaries := func(diags hcl.Diagnostics) []string {
		var out []string
		for _, d := range diags {
			out = append(out, fmt.Sprintf("%d %s", d.Subject.Start.Line, d.Summary))
		}
		return out
	}
	_, diags := Load(dir, LoadOptions{})
	want := []string{
		"3 No value for required variable", "12 No value for required variable", "16 No value for required variable",
		"18 No value for required variable", "22 No value for required variable",
		"59 Invalid value for group_locality", "68 Invalid environment variable name",
	}
	if got := summaries(diags); !slices.Equal(got, want) {
		t.Errorf("as plan loads it:\n got %q\nwant %q", got, want)
	}
	cfg, diags := Load(dir, LoadOptions{UnsetVariablesUnknown: true})
	if got := summaries(diags); !slices.Equal(got, want[5:]) {
		t.Errorf("as validate loads it:\n got %q\nwant %q", got, want[5:])
	}
	for _, v := range cfg.Variables {
		if v.Value.IsKnown() || !v.Value.Type().Equals(v.Type) || v.HasValue() {
			t.Errorf("variable %s = %#v, want unknown of type %s and no value", v.Name, v.Value, v.Type.FriendlyName())
		}
	}
}

// TestAnUnknownOfAnyTypeIsCheckedNowhere uses an untyped variable without
// a value (cty.DynamicVal, which converts to every type) in every kind of
// attribute: nothing can be said against it, and nothing may panic.
func TestAnUnknownOfAnyTypeIsCheckedNowhere(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "main.hcl", `variable "v" {}
locals {
  list = [for x in var.v : upper(x)]
  file = file(var.v)
}
ssh "s" {
  port            = var.v
  host_key_check  = var.v
  connect_timeout = var.v
}
fleet "f" {
  ssh    = ssh.s
  region = var.v
  labels = var.v
  host "h" { address = var.v }
}
fleet "g" {
  count = var.v
  gcp {
    project      = var.v
    zone         = var.v
    machine_type = var.v
    image        = var.v
    tags         = var.v
    disk_size_gb = var.v
    placement    = var.v
  }
}
policy "p" {
  rank    = var.v
  regions = var.v
}
job "j" {
  policy        = policy.p
  nodes         = var.v
  gpus_per_node = length(var.v)
  command       = concat(local.list, [var.v])
  env           = var.v
  workdir       = local.file
  stop_timeout  = var.v
  master_port   = var.v ? 1 : 2
}
backend "gcs" {
  bucket = var.v
  prefix = var.v
}
`)
	if _, diags := Load(dir, LoadOptions{UnsetVariablesUnknown: true}); len(diags) > 0 {
		t.Errorf("diagnostics:\n%s", diagList(diags))
	}
}

func TestValidationRulesJudgeOnlyKnownValues(t *testing.T) {
	const rules = `
  validation {
    condition     = var.nodes >= 1
    error_message = "nodes must be at least 1."
  }
  validation {
    condition     = var.nodes % 2 == 1
    error_message = "nodes must be odd."
  }
}
`
	tests := []struct {
		name, config string
		vars         []VarArg
		want         []string // details or summaries that must be there, in order
	}{
		{name: "unknown value", config: "variable \"nodes\" {\n  type = number\n" + rules},
		{name: "given value, every failed rule", config: "variable \"nodes\" {\n  type = number\n" + rules,
			vars: []VarArg{{Assignment: "nodes=0"}}, want: []string{"nodes must be at least 1.", "nodes must be odd."}},
		{name: "known value, rule on an unknown one", config: `variable "most" { type = number }
variable "nodes" {
  default = 2
  validation {
    condition     = var.nodes <= var.most
    error_message = "too many nodes."
  }
}
`},
		{name: "unknown value, a typo in the rule", config: `variable "nodes" {
  validation {
    condition     = var.nodez >= 1
    error_message = "nodes must be at least 1."
  }
}
`, want: []string{"Unknown input variable"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "main.hcl", tc.config)
			_, diags := Load(dir, LoadOptions{Vars: tc.vars, UnsetVariablesUnknown: true})
			if len(diags) != len(tc.want) {
				t.Fatalf("got %d diagnostics, want %d:\n%s", len(diags), len(tc.want), diagList(diags))
			}
			for i, w := range tc.want {
				if diags[i].Summary != w && !strings.HasPrefix(diags[i].Detail, w) {
					t.Errorf("diagnostic %d = %s, want %q", i, diags[i], w)
				}
			}
		})
	}
}

// TestAnUnknownOfTheWrongTypeIsStillWrong: a typed variable without a value
// has a known type, so using it where that type cannot go is reported.
func TestAnUnknownOfTheWrongTypeIsStillWrong(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "main.hcl", `variable "hosts" { type = list(string) }
variable "port" { type = string }
job "j" {
  nodes       = var.hosts
  command     = ["a"]
  master_port = var.port
}
`)
	_, diags := Load(dir, LoadOptions{UnsetVariablesUnknown: true})
	if len(diags) != 1 || diags[0].Summary != "Incorrect attribute value type" || diags[0].Subject.Start.Line != 4 ||
		!strings.Contains(diags[0].Detail, `"nodes": number required`) {
		t.Fatalf("want one type error at line 4 (a string may hold a port number), got\n%s", diagList(diags))
	}
}

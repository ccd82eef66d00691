package config

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

var update = flag.Bool("update", false, "rewrite golden files and the FuzzLoad seed corpus")

// fixtures holds one configuration directory per diagnostic.
const fixtures = "../testdata/config"

type diagnosticCase struct {
	fixture  string
	severity hcl.DiagnosticSeverity
	summary  string
	line     int
	count    int // diagnostics in the fixture; 0 means 1
	// validate loads the fixture as gpulayer validate does: variables
	// without a value are unknown.
	validate bool
}

// options are the LoadOptions the fixture's case asks for.
func (tc diagnosticCase) options() LoadOptions {
	return LoadOptions{UnsetVariablesUnknown: tc.validate}
}

// caseOf is the diagnostic case of a fixture.
func caseOf(t *testing.T, fixture string) diagnosticCase {
	t.Helper()
	for _, tc := range diagnosticCases {
		if tc.fixture == fixture {
			return tc
		}
	}
	t.Fatalf("fixture %s has no entry in diagnosticCases", fixture)
	return diagnosticCase{}
}

var diagnosticCases = []diagnosticCase{
	{fixture: "count_negative", severity: hcl.DiagError, summary: "Invalid value for count", line: 2},
	{fixture: "count_without_gcp", severity: hcl.DiagError, summary: "count without a gcp block", line: 2},
	{fixture: "duplicate_host", severity: hcl.DiagError, summary: "Duplicate host name", line: 7},
	{fixture: "duplicate_job", severity: hcl.DiagError, summary: "Duplicate job", line: 6},
	{fixture: "duplicate_policy", severity: hcl.DiagError, summary: "Duplicate policy", line: 5},
	{fixture: "empty_command", severity: hcl.DiagError, summary: "Empty command", line: 3},
	{fixture: "env_invalid_name", severity: hcl.DiagError, summary: "Invalid environment variable name", line: 6, count: 2},
	{fixture: "restart_invalid", severity: hcl.DiagError, summary: "Invalid value for kind", line: 4, count: 5},
	{fixture: "env_reserved_name", severity: hcl.DiagError, summary: "Reserved environment variable name", line: 8, count: 2},
	{fixture: "failed_validation", severity: hcl.DiagError, summary: "Invalid value for variable", line: 3},
	{fixture: "fleet_without_machines", severity: hcl.DiagWarning, summary: "Fleet without machines", line: 1},
	{fixture: "gcp_without_count", severity: hcl.DiagError, summary: "Missing count", line: 1},
	{fixture: "gcp_accelerator_alone", severity: hcl.DiagError, summary: "accelerator_type without accelerator_count", line: 8},
	{fixture: "gcp_invalid_placement", severity: hcl.DiagError, summary: "Invalid value for placement", line: 8},
	{fixture: "gcp_invalid_zone", severity: hcl.DiagError, summary: "Invalid GCP zone", line: 5},
	{fixture: "gcp_machine_named_like_host", severity: hcl.DiagError, summary: "Created machine named like a host", line: 7},
	{fixture: "gcp_reserved_label", severity: hcl.DiagError, summary: "Reserved label", line: 8},
	{fixture: "gpus_per_node_negative", severity: hcl.DiagError, summary: "Invalid value for gpus_per_node", line: 3},
	{fixture: "hosts_and_gcp", severity: hcl.DiagError, summary: "Fleet with both hosts and a gcp block", line: 4},
	{fixture: "invalid_address", severity: hcl.DiagError, summary: "Invalid host address", line: 3},
	{fixture: "invalid_bastion", severity: hcl.DiagError, summary: "Invalid bastion address", line: 2},
	{fixture: "invalid_bucket_choice", severity: hcl.DiagError, summary: "Invalid value for bucket_choice", line: 2},
	{fixture: "invalid_compatible", severity: hcl.DiagError, summary: "Invalid value for compatible", line: 2},
	{fixture: "slice_looser_than_group", severity: hcl.DiagError, summary: "Slice looser than the group", line: 5},
	{fixture: "slice_nodes_not_multiple", severity: hcl.DiagError, summary: "nodes not a multiple of the slice", line: 10},
	{fixture: "invalid_duration", severity: hcl.DiagError, summary: "Invalid duration for stop_timeout", line: 4},
	{fixture: "invalid_expected_duration", severity: hcl.DiagError, summary: "Invalid duration for expected_duration", line: 4},
	{fixture: "max_wait_without_prefer", severity: hcl.DiagError, summary: "max_wait needs group_locality = \"prefer\"", line: 3},
	{fixture: "max_wait_too_long", severity: hcl.DiagError, summary: "Invalid value for max_wait", line: 2},
	{fixture: "invalid_group_locality", severity: hcl.DiagError, summary: "Invalid value for group_locality", line: 2},
	{fixture: "invalid_host_key_check", severity: hcl.DiagError, summary: "Invalid value for host_key_check", line: 2},
	{fixture: "invalid_job_name", severity: hcl.DiagError, summary: "Invalid job name", line: 1},
	{fixture: "invalid_policy_name", severity: hcl.DiagError, summary: "Invalid policy name", line: 1},
	{fixture: "invalid_variable_type", severity: hcl.DiagError, summary: "Invalid type specification", line: 2},
	{fixture: "invalid_launcher", severity: hcl.DiagError, summary: "Invalid value for launcher", line: 4},
	{fixture: "invalid_link_bandwidth", severity: hcl.DiagError, summary: "Invalid bandwidth", line: 4},
	{fixture: "invalid_on_unschedulable", severity: hcl.DiagError, summary: "Invalid value for on_unschedulable", line: 2},
	{fixture: "invalid_rank", severity: hcl.DiagError, summary: "Invalid value for rank", line: 2},
	{fixture: "ipv6_without_brackets", severity: hcl.DiagError, summary: "Invalid host address", line: 2},
	{fixture: "json_unknown_attribute", severity: hcl.DiagError, summary: "Extraneous JSON object property", line: 5, count: 2},
	{fixture: "local_cycle", severity: hcl.DiagError, summary: "Cycle in local values", line: 2},
	{fixture: "backend_invalid_bucket", severity: hcl.DiagError, summary: "Invalid bucket name", line: 2},
	{fixture: "backend_unknown", severity: hcl.DiagError, summary: "Unknown backend", line: 1},
	{fixture: "master_port_out_of_range", severity: hcl.DiagError, summary: "Invalid value for master_port", line: 4},
	{fixture: "start_check_invalid", severity: hcl.DiagError, summary: "Invalid duration for start_check", line: 4},
	{fixture: "start_check_too_long", severity: hcl.DiagError, summary: "Invalid value for start_check", line: 4},
	{fixture: "missing_required_argument", severity: hcl.DiagError, summary: "Missing required argument", line: 1},
	{fixture: "nodes_below_one", severity: hcl.DiagError, summary: "Invalid value for nodes", line: 2},
	{fixture: "nesting_too_deep", severity: hcl.DiagError, summary: "Nesting too deep", line: 2},
	{fixture: "port_out_of_range", severity: hcl.DiagError, summary: "Invalid value for port", line: 2},
	{fixture: "quoted_policy_reference", severity: hcl.DiagError, summary: "Invalid policy reference", line: 4},
	{fixture: "regions_match_nothing", severity: hcl.DiagWarning, summary: "Policy regions match no declared machine", line: 11},
	{fixture: "required_variable", severity: hcl.DiagError, summary: "No value for required variable", line: 1},
	{fixture: "sensitive_conversion", severity: hcl.DiagError, summary: "Invalid function argument", line: 8},
	{fixture: "sensitive_validation_message", severity: hcl.DiagError, summary: "Invalid value for variable", line: 4},
	{fixture: "three_mistakes", severity: hcl.DiagError, summary: "Invalid value for group_locality", line: 2, count: 3},
	{fixture: "torchrun_block_of_plain_job", severity: hcl.DiagWarning, summary: "torchrun block of a job that does not use torchrun", line: 6},
	{fixture: "torchrun_duplicate_block", severity: hcl.DiagError, summary: "Duplicate torchrun block", line: 8},
	{fixture: "torchrun_reserved_arg", severity: hcl.DiagError, summary: "Reserved torchrun argument", line: 13, count: 4},
	{fixture: "unclosed_brace", severity: hcl.DiagError, summary: "Unclosed configuration block", line: 1},
	{fixture: "unknown_attribute", severity: hcl.DiagError, summary: "Unsupported argument", line: 3},
	{fixture: "unknown_block", severity: hcl.DiagError, summary: "Unsupported block type", line: 6},
	{fixture: "unknown_local", severity: hcl.DiagError, summary: "Unknown local value", line: 7},
	{fixture: "unknown_policy", severity: hcl.DiagError, summary: "Unknown policy", line: 6},
	{fixture: "unknown_reference_root", severity: hcl.DiagError, summary: "Unknown reference", line: 6},
	{fixture: "unknown_ssh", severity: hcl.DiagError, summary: "Unknown ssh block", line: 6},
	{fixture: "unknown_variable", severity: hcl.DiagError, summary: "Unknown input variable", line: 7},
	{fixture: "unset_variables_unknown", severity: hcl.DiagError, summary: "Invalid value for group_locality", line: 59, count: 2, validate: true},
	{fixture: "wrong_type", severity: hcl.DiagError, summary: "Incorrect attribute value type", line: 3},
}

func TestLoadReportsEachDiagnosticWithSummaryAndLine(t *testing.T) {
	for _, tc := range diagnosticCases {
		t.Run(tc.fixture, func(t *testing.T) {
			dir := filepath.Join(fixtures, tc.fixture)
			_, diags := Load(dir, tc.options())
			want := max(tc.count, 1)
			if len(diags) != want {
				t.Fatalf("got %d diagnostics, want %d:\n%s", len(diags), want, diagList(diags))
			}
			d := diags[0]
			if d.Severity != tc.severity || d.Summary != tc.summary {
				t.Errorf("first diagnostic = %v %q, want %v %q", d.Severity, d.Summary, tc.severity, tc.summary)
			}
			if d.Subject == nil {
				t.Fatalf("diagnostic %q has no source range", d.Summary)
			}
			if d.Subject.Start.Line != tc.line || !strings.HasPrefix(d.Subject.Filename, dir+string(filepath.Separator)) {
				t.Errorf("diagnostic at %s:%d, want a file of %s at line %d", d.Subject.Filename, d.Subject.Start.Line, dir, tc.line)
			}
			if strings.TrimSpace(d.Detail) == "" {
				t.Errorf("diagnostic %q has no detail sentence", d.Summary)
			}
		})
	}
}

func TestEveryFixtureHasADiagnosticCase(t *testing.T) {
	entries, err := os.ReadDir(fixtures)
	if err != nil {
		t.Fatal(err)
	}
	cased := map[string]bool{}
	for _, tc := range diagnosticCases {
		cased[tc.fixture] = true
	}
	for _, e := range entries {
		if e.IsDir() && !cased[e.Name()] {
			t.Errorf("fixture %s has no entry in diagnosticCases", e.Name())
		}
	}
}

func TestThreeIndependentMistakesYieldThreeDiagnosticsWithFileAndLine(t *testing.T) {
	dir := filepath.Join(fixtures, "three_mistakes")
	_, diags := Load(dir, LoadOptions{})
	want := []struct {
		summary string
		line    int
	}{
		{"Invalid value for group_locality", 2},
		{"Unknown policy", 11},
		{"Incorrect attribute value type", 13},
	}
	if len(diags) != len(want) {
		t.Fatalf("got %d diagnostics, want 3:\n%s", len(diags), diagList(diags))
	}
	for i, w := range want {
		d := diags[i]
		if d.Summary != w.summary || d.Subject == nil || d.Subject.Start.Line != w.line ||
			d.Subject.Filename != filepath.Join(dir, "main.hcl") {
			t.Errorf("diagnostic %d = %s, want %q at main.hcl line %d", i, d, w.summary, w.line)
		}
	}
}

func TestUnknownNamesSuggestTheClosestDeclaredOne(t *testing.T) {
	tests := []struct {
		fixture, suggestion string
	}{
		{"unknown_policy", `Did you mean "tight"?`},
		{"unknown_variable", `Did you mean "epochs"?`},
		{"unknown_local", `Did you mean "script"?`},
		{"unknown_ssh", `Did you mean "lab"?`},
		{"unknown_reference_root", `Did you mean "var"?`},
		{"unknown_attribute", `Did you mean "gpus_per_node"?`},
		{"unknown_block", `Did you mean "fleet"?`},
		{"invalid_group_locality", `Did you mean "zone"?`},
		{"invalid_variable_type", `Did you mean "string"?`},
		{"quoted_policy_reference", `Did you mean policy.tight, without quotes?`},
	}
	for _, tc := range tests {
		_, diags := Load(filepath.Join(fixtures, tc.fixture), LoadOptions{})
		if len(diags) == 0 || !strings.Contains(diags[0].Detail, tc.suggestion) {
			t.Errorf("%s: detail %q lacks %q", tc.fixture, detailOf(diags), tc.suggestion)
		}
	}
}

func TestEnumDiagnosticsListEveryAllowedValue(t *testing.T) {
	tests := map[string][]string{
		"invalid_group_locality":   GroupLocalities,
		"invalid_rank":             Ranks,
		"invalid_on_unschedulable": Unschedulables,
		"invalid_bucket_choice":    BucketChoices,
		"invalid_launcher":         Launchers,
		"invalid_host_key_check":   HostKeyChecks,
		"invalid_compatible":       Compatibles,
	}
	for fixture, allowed := range tests {
		_, diags := Load(filepath.Join(fixtures, fixture), LoadOptions{})
		for _, v := range allowed {
			if !strings.Contains(detailOf(diags), `"`+v+`"`) {
				t.Errorf("%s: detail %q does not list %q", fixture, detailOf(diags), v)
			}
		}
	}
}

// A configuration that loads without a diagnostic keeps each file's
// source (a saved plan records it) but not its syntax tree, which only
// names the block of a diagnostic and is most of what a configuration of
// thousands of hosts holds; one with diagnostics keeps the trees, so they
// render with the block they are in.
func TestALoadWithoutDiagnosticsKeepsTheSourcesNotTheSyntaxTrees(t *testing.T) {
	dir := "../examples/quickstart"
	cfg, diags := Load(dir, LoadOptions{})
	if len(diags) > 0 {
		t.Fatalf("quickstart has diagnostics:\n%s", diagList(diags))
	}
	if len(cfg.Files) == 0 {
		t.Fatal("no files")
	}
	for name, f := range cfg.Files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(f.Bytes, src) {
			t.Errorf("%s: the source kept is not the file's", name)
		}
		if f.Body != nil || f.Nav != nil {
			t.Errorf("%s: the syntax tree is kept", name)
		}
	}
	cfg, diags = Load(filepath.Join(fixtures, "three_mistakes"), LoadOptions{})
	var out bytes.Buffer
	if err := WriteDiagnostics(&out, diags, cfg.Files, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `, in job "`) {
		t.Errorf("diagnostics render without the block they are in:\n%s", out.String())
	}
}

func TestQuickstartLoadsWithInheritedLocationsAndLabels(t *testing.T) {
	cfg, diags := Load("../examples/quickstart", LoadOptions{})
	if len(diags) > 0 {
		t.Fatalf("quickstart has diagnostics:\n%s", diagList(diags))
	}
	if len(cfg.Fleets) != 2 || len(cfg.Policies) != 2 || len(cfg.Jobs) != 2 {
		t.Fatalf("fleets %d, policies %d, jobs %d; want 2 each", len(cfg.Fleets), len(cfg.Policies), len(cfg.Jobs))
	}
	hosts := map[string]*Host{}
	var order []string
	for _, h := range cfg.Hosts() {
		hosts[h.Name] = h
		order = append(order, h.Fleet+"/"+h.Name)
	}
	if got := strings.Join(order, " "); got != "lab/a1 lab/a2 lab/a3 lab/b1" {
		t.Errorf("Hosts() order = %s", got)
	}
	a3, b1 := hosts["a3"], hosts["b1"]
	if a3.Address != "10.1.0.13" || a3.Port != 2222 {
		t.Errorf("a3 address %q port %d, want 10.1.0.13 and 2222", a3.Address, a3.Port)
	}
	if a3.Labels["team"] != "vision" || a3.Labels["gpu"] != "rtx6000ada" {
		t.Errorf("a3 labels %v: want the fleet's team and its own gpu", a3.Labels)
	}
	if b1.Address != "fd00:10:1::21" || b1.Location != (Location{Region: "paris", Zone: "paris-1", NetworkGroup: "rack-4"}) {
		t.Errorf("b1 = %q %+v: want the fleet's region and zone, its own network group", b1.Address, b1.Location)
	}
	var cloud, lab *Fleet
	for _, f := range cfg.Fleets {
		if f.Name == "cloud" {
			cloud = f
		} else {
			lab = f
		}
	}
	if lab.SSH == nil || lab.SSH.User != "ubuntu" || lab.SSH.ConnectTimeout.String() != "15s" || lab.SSH.Port != 22 {
		t.Errorf("lab ssh = %+v", lab.SSH)
	}
	if cloud.GCP == nil || cloud.Count != 2 || cloud.Location.Region != "europe-west1" || cloud.Location.Zone != "europe-west1-b" {
		t.Errorf("cloud fleet count %d location %+v gcp %+v", cloud.Count, cloud.Location, cloud.GCP)
	}
	train := cfg.Jobs[1]
	if train.Name != "train" || train.Policy == nil || train.Policy.Name != "tight" ||
		strings.Join(train.Command, " ") != "python train.py --epochs 3" || train.Env["WANDB_MODE"] != "offline" {
		t.Errorf("train = %+v", train)
	}
	eval := cfg.Jobs[0]
	if eval.Policy.BucketChoice != BucketFirstFill || eval.Launcher != LauncherPlain || eval.StopTimeout != DefaultStopTimeout {
		t.Errorf("eval = %+v, policy %+v", eval, eval.Policy)
	}
}

func TestJSONSyntaxLoadsLikeNativeSyntax(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "main.hcl.json", `{
  "variable": {"nodes": {"default": 2}},
  "policy": {"tight": {"group_locality": "zone"}},
  "job": {"train": {"policy": "policy.tight", "nodes": "${var.nodes}", "command": ["python", "train.py"]}}
}`)
	cfg, diags := Load(dir, LoadOptions{})
	if len(diags) > 0 {
		t.Fatalf("diagnostics:\n%s", diagList(diags))
	}
	if j := cfg.Jobs[0]; j.Nodes != 2 || j.Policy == nil || j.Policy.GroupLocality != LocalityZone {
		t.Errorf("job = %+v", j)
	}
}

func TestPolicyDefaultsApplyWhenUnset(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "main.hcl", `policy "p" {}
job "j" {
  policy  = policy.p
  nodes   = 1
  command = ["true"]
}
job "k" {
  nodes   = 1
  command = ["true"]
}
`)
	cfg, diags := Load(dir, LoadOptions{})
	if len(diags) > 0 {
		t.Fatalf("diagnostics:\n%s", diagList(diags))
	}
	want := DefaultPolicy()
	got := cfg.Policies[0]
	if got.GroupLocality != want.GroupLocality || got.Rank != want.Rank || got.OnUnschedulable != want.OnUnschedulable || got.BucketChoice != BucketBestFit {
		t.Errorf("policy = %+v, want the defaults of %+v", got, want)
	}
	if p := cfg.Jobs[1].EffectivePolicy(); p.Name != "default" || cfg.Jobs[1].Policy != nil {
		t.Errorf("job without policy: EffectivePolicy = %+v", p)
	}
	if cfg.Jobs[0].GPUsPerNode != DefaultGPUsPerNode || cfg.Jobs[0].Launcher != LauncherTorchrun {
		t.Errorf("job defaults = %+v", cfg.Jobs[0])
	}
}

func TestPolicyDecodesCompatibleAndSlice(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "main.hcl", `policy "p" {
  group_locality = "zone"
  rank           = "binpack"
  compatible     = ["torch", "gpu_model"]
  slice {
    nodes    = 2
    locality = "network_group"
  }
}
job "j" {
  policy  = policy.p
  nodes   = policy.p.slice.nodes * 3
  command = ["true"]
}
`)
	cfg, diags := Load(dir, LoadOptions{})
	if len(diags) > 0 {
		t.Fatalf("diagnostics:\n%s", diagList(diags))
	}
	p := cfg.Policies[0]
	if p.Rank != RankBinpack || !slices.Equal(p.Compatible, []string{"torch", "gpu_model"}) || p.Slice == nil ||
		p.Slice.Nodes != 2 || p.Slice.Locality != LocalityNetworkGroup || p.Slice.DeclRange.Start.Line != 5 || p.Compatible == nil {
		t.Errorf("policy %+v slice %+v", p, p.Slice)
	}
	if cfg.Jobs[0].Nodes != 6 {
		t.Errorf("nodes %d, want 6 from policy.p.slice.nodes", cfg.Jobs[0].Nodes)
	}
	if d := DefaultPolicy(); !slices.Equal(d.Compatible, []string{CompatTorch}) || d.Slice != nil {
		t.Errorf("default policy %+v", d)
	}
}

func TestPolicyRejectsBadCompatibleAndSlices(t *testing.T) {
	for _, tt := range []struct{ body, summary string }{
		{`compatible = []`, "Empty compatible"},
		{`compatible = ["gpu_model", "gpu_model"]`, "Duplicate value in compatible"},
		{"slice {\n    nodes = 2\n    locality = \"any\"\n  }", "Invalid value for locality"},
		{"slice {\n    nodes = 0\n    locality = \"zone\"\n  }", "Invalid value for nodes"},
		{"slice {\n    locality = \"zone\"\n  }", "Missing required argument"},
		{"slice {\n    nodes = 2\n    locality = \"zone\"\n  }\n  slice {\n    nodes = 2\n    locality = \"zone\"\n  }", "Duplicate slice block"},
		{"group_locality = \"network_group\"\n  slice {\n    nodes = 2\n    locality = \"zone\"\n  }", "Slice looser than the group"},
	} {
		dir := t.TempDir()
		writeFile(t, dir, "main.hcl", "policy \"p\" {\n  "+tt.body+"\n}\n")
		_, diags := Load(dir, LoadOptions{})
		if len(diags) != 1 || diags[0].Summary != tt.summary {
			t.Errorf("%s: diagnostics\n%s\nwant one %q", tt.body, diagList(diags), tt.summary)
		}
	}
}

func TestLocalsResolveInDependencyOrderWithFunctions(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "main.hcl", `locals {
  cmd    = concat(local.base, [format("--epochs=%d", var.epochs)])
  base   = split(" ", upper(local.python))
  python = "python train.py"
  banner = file("banner.txt")
}
variable "epochs" { default = 3 }
job "j" {
  nodes   = max(1, length(local.cmd) - 2)
  command = local.cmd
  env     = { BANNER = trimspace(local.banner), KEYS = join(",", keys({ b = 1, a = 2 })) }
}
`)
	writeFile(t, dir, "banner.txt", "hello\n")
	cfg, diags := Load(dir, LoadOptions{})
	if len(diags) > 0 {
		t.Fatalf("diagnostics:\n%s", diagList(diags))
	}
	j := cfg.Jobs[0]
	if strings.Join(j.Command, " ") != "PYTHON TRAIN.PY --epochs=3" || j.Nodes != 1 || j.Env["BANNER"] != "hello" || j.Env["KEYS"] != "a,b" {
		t.Errorf("job = %+v", j)
	}
}

func TestFileFunctionReportsAMissingFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "main.hcl", "locals {\n  key = file(\"missing.pem\")\n}\n")
	_, diags := Load(dir, LoadOptions{})
	if len(diags) != 1 || diags[0].Subject.Start.Line != 2 || !strings.Contains(diags[0].Detail, "missing.pem") {
		t.Fatalf("diagnostics:\n%s", diagList(diags))
	}
}

func TestEmptyDirectoryIsAnError(t *testing.T) {
	_, diags := Load(t.TempDir(), LoadOptions{})
	if !diags.HasErrors() || diags[0].Summary != "No configuration files" {
		t.Fatalf("diagnostics:\n%s", diagList(diags))
	}
}

func writeFile(t testing.TB, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func diagList(diags hcl.Diagnostics) string {
	var b strings.Builder
	for _, d := range diags {
		b.WriteString("  " + d.Error() + "\n")
	}
	return b.String()
}

func detailOf(diags hcl.Diagnostics) string {
	if len(diags) == 0 {
		return ""
	}
	return diags[0].Detail
}

// fixtureDirs lists the fixture directories, sorted.
func fixtureDirs(t testing.TB) []string {
	entries, err := os.ReadDir(fixtures)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	sort.Strings(dirs)
	return dirs
}

// golden compares got with testdata/golden/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./config -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\n%s", name, UnifiedDiff(name, want, got))
	}
}

func TestJSONReferenceSuggestionKeepsQuotes(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "main.hcl.json", `{"policy": {"tight": {}}, "job": {"j": {"policy": "tight", "nodes": 1, "command": ["true"]}}}`)
	_, diags := Load(dir, LoadOptions{})
	if len(diags) != 1 || !strings.Contains(diags[0].Detail, `Did you mean "policy.tight"?`) {
		t.Fatalf("diagnostics:\n%s", diagList(diags))
	}
}

// chainOfLocals declares a0 = local.a1 + 1, a1 = local.a2 + 1, ..., so
// that each local refers to one declared after it.
func chainOfLocals(n int) string {
	var b strings.Builder
	b.WriteString("locals {\n")
	for i := range n - 1 {
		fmt.Fprintf(&b, "  a%d = local.a%d + 1\n", i, i+1)
	}
	fmt.Fprintf(&b, "  a%d = 0\n}\n", n-1)
	return b.String()
}

func TestLocalsDeclaredBeforeWhatTheyReferToResolve(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "main.hcl", chainOfLocals(300))
	cfg, diags := Load(dir, LoadOptions{})
	if len(diags) > 0 {
		t.Fatalf("diagnostics:\n%s", diagList(diags))
	}
	if v := cfg.Locals["a0"]; !v.RawEquals(cty.NumberIntVal(299)) {
		t.Errorf("local.a0 = %#v, want 299", v)
	}
}

func TestACycleOfManyLocalsNamesTenOfThem(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("locals {\n")
	for i := range 30 {
		fmt.Fprintf(&b, "  c%02d = local.c%02d\n", i, (i+1)%30)
	}
	b.WriteString("  after = local.c00\n  fine = 1\n}\n")
	writeFile(t, dir, "main.hcl", b.String())
	_, diags := Load(dir, LoadOptions{})
	if len(diags) != 1 || diags[0].Summary != "Cycle in local values" {
		t.Fatalf("diagnostics:\n%s", diagList(diags))
	}
	want := "local.after, local.c00, local.c01, local.c02, local.c03, local.c04, local.c05, local.c06, local.c07, local.c08, and 21 more depend on each other"
	if !strings.HasPrefix(diags[0].Detail, want) {
		t.Errorf("detail %q, want it to start %q", diags[0].Detail, want)
	}
}

// TestGCPBlockDecodesEveryAttribute reads a gcp block that sets everything
// a user can set, and checks each value reaches the fleet.
func TestGCPBlockDecodesEveryAttribute(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "main.hcl", `
fleet "cloud" {
  count = 3
  gcp {
    project           = "my-project"
    zone              = "europe-west4-a"
    machine_type      = "n1-standard-16"
    image             = "projects/deeplearning-platform-release/global/images/family/pytorch-latest-gpu"
    accelerator_type  = "nvidia-tesla-v100"
    accelerator_count = 4
    disk_size_gb      = 200
    spot              = true
    network           = "ml"
    subnetwork        = "ml-europe"
    service_account   = "trainer@my-project.iam.gserviceaccount.com"
    tags              = ["gpu", "ssh"]
    metadata          = { enable-oslogin = "TRUE" }
    labels            = { team = "vision" }
    placement         = "compact"
    endpoint          = "http://127.0.0.1:8080/"
  }
}
`)
	cfg, diags := Load(dir, LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diagList(diags))
	}
	f := cfg.Fleets[0]
	g := f.GCP
	want := GCP{
		Project: "my-project", Zone: "europe-west4-a", MachineType: "n1-standard-16",
		Image:           "projects/deeplearning-platform-release/global/images/family/pytorch-latest-gpu",
		AcceleratorType: "nvidia-tesla-v100", AcceleratorCount: 4, DiskSizeGB: 200, Spot: true,
		Network: "ml", Subnetwork: "ml-europe", ServiceAccount: "trainer@my-project.iam.gserviceaccount.com",
		Tags: []string{"gpu", "ssh"}, Metadata: map[string]string{"enable-oslogin": "TRUE"},
		Labels: map[string]string{"team": "vision"}, Placement: "compact", Endpoint: "http://127.0.0.1:8080/",
	}
	want.DeclRange = g.DeclRange
	if !reflect.DeepEqual(*g, want) {
		t.Errorf("gcp block\n got %+v\nwant %+v", *g, want)
	}
	if f.Count != 3 || f.Location.Region != "europe-west4" || f.Location.Zone != "europe-west4-a" {
		t.Errorf("fleet count %d location %+v", f.Count, f.Location)
	}
}

// TestGCPBlockRejectsWhatGCPWould checks each gcp validation names the
// attribute and says what is wrong.
func TestGCPBlockRejectsWhatGCPWould(t *testing.T) {
	for _, tc := range []struct{ attr, want string }{
		{`project = "My Project"`, "is not a project id"},
		{`zone = "europe-west1"`, "is not a zone"},
		{`machine_type = "projects/p/zones/z/machineTypes/a2"`, "is not a machine type name"},
		{`accelerator_count = 2`, "accelerator_count without accelerator_type"},
		{`accelerator_count = 0`, "must be at least 1"},
		{`disk_size_gb = 5`, "must be at least 10"},
		{`tags = ["Has Space"]`, "is not a network tag"},
		{`labels = { Team = "x" }`, "Label key \"Team\""},
		{`labels = { team = "Vision" }`, "value of label \"team\""},
		{`placement = "close"`, "not a valid placement"},
		{`endpoint = "127.0.0.1:8080"`, "is not an http or https URL"},
	} {
		dir := t.TempDir()
		attrs := map[string]string{
			"project": `"my-project"`, "zone": `"us-central1-a"`, "machine_type": `"a2-highgpu-1g"`, "image": `"img"`,
		}
		name := strings.TrimSpace(strings.SplitN(tc.attr, "=", 2)[0])
		delete(attrs, name)
		body := tc.attr + "\n"
		for _, k := range sortedKeys(attrs) {
			body += k + " = " + attrs[k] + "\n"
		}
		writeFile(t, dir, "main.hcl", "fleet \"cloud\" {\n count = 1\n gcp {\n"+body+"}\n}\n")
		_, diags := Load(dir, LoadOptions{})
		if !diags.HasErrors() || !strings.Contains(diagList(diags), tc.want) || !strings.Contains(diagList(diags), "main.hcl:4") {
			t.Errorf("%s: want an error at main.hcl:4 saying %q, got\n%s", tc.attr, tc.want, diagList(diags))
		}
	}
}

// TestANullElementIsAnErrorNamingIt: a list or map of strings with a null
// in it is refused, naming the element, where it used to crash Load.
func TestANullElementIsAnErrorNamingIt(t *testing.T) {
	for _, tc := range []struct{ attr, want string }{
		{`command = ["python", null]`, `"command": element 1 is null`},
		{`env = { A = "1", B = null }`, `"env": element "B" is null`},
		{`labels = { team = null }`, `"labels": element "team" is null`},
	} {
		dir := t.TempDir()
		body := "  nodes = 1\n  " + tc.attr + "\n"
		if !strings.HasPrefix(tc.attr, "command") {
			body += "  command = [\"a\"]\n"
		}
		writeFile(t, dir, "main.hcl", "job \"j\" {\n"+body+"}\n")
		_, diags := Load(dir, LoadOptions{})
		if len(diags) != 1 || diags[0].Summary != "Incorrect attribute value type" || !strings.Contains(diags[0].Detail, tc.want) ||
			diags[0].Subject.Start.Line != 3 {
			t.Errorf("%s: want one error at line 3 saying %q, got\n%s", tc.attr, tc.want, diagList(diags))
		}
	}
}

package config

import (
	"slices"
	"strings"
	"testing"
)

// TestTorchrunArgsRefuseWhatGpulayerSets pins which launcher options a
// job may add: gpulayer's own are refused in torch 1's and torch 2's
// spellings, with =VALUE, and abbreviated as argparse would take them;
// every other option, short options and values pass.
func TestTorchrunArgsRefuseWhatGpulayerSets(t *testing.T) {
	refused := []string{
		"--nnodes", "--nnodes=2", "--nproc_per_node", "--nproc-per-node=4", "--node_rank", "--node-rank=1",
		"--master_addr", "--master-addr=10.0.0.1", "--master_port", "--master-port=29500",
		"--max_restarts", "--max-restarts=3", "--rdzv_backend", "--rdzv-endpoint=h:1", "--rdzv_id=x",
		"--rdzv_conf=timeout=5", "--rdzv-future-option", "--standalone", "--no_python", "--no-python",
		"--nproc", "--nnod", "--master", "--max", "--stand", "--rdz",
	}
	allowed := []string{
		"--log_dir", "--log-dir=/tmp/l", "--redirects", "3", "-r", "-t", "--tee=1", "--monitor_interval=1",
		"--monitor-interval", "--start_method=spawn", "--start", "--role", "--run_path", "--local_addr", "--local-ranks-filter=0",
		"-m", "--module", "--", "train.py", "-nnodes", "",
	}
	for _, a := range refused {
		if why := TorchrunArgProblem(a); !strings.Contains(why, "gpulayer sets itself") {
			t.Errorf("%q: %q, want it refused", a, why)
		}
	}
	for _, a := range allowed {
		if why := TorchrunArgProblem(a); why != "" {
			t.Errorf("%q refused: %s", a, why)
		}
	}
	if why := TorchrunArgProblem("--nproc"); !strings.Contains(why, "abbreviates --nproc_per_node") {
		t.Errorf("--nproc: %q, want it named the option it abbreviates", why)
	}
}

func TestTorchrunBlockArgsLoadIntoTheJob(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "main.hcl", `
job "train" {
  nodes   = 2
  command = ["python", "train.py"]
  torchrun {
    args = ["--log_dir", "logs", "--redirects", "3"]
  }
}
job "plain_default" {
  nodes   = 1
  command = ["python", "x.py"]
}
`)
	cfg, diags := Load(dir, LoadOptions{})
	if len(diags) != 0 {
		t.Fatalf("diagnostics:\n%s", diagList(diags))
	}
	byName := map[string]*Job{}
	for _, j := range cfg.Jobs {
		byName[j.Name] = j
	}
	if got := byName["train"].TorchrunArgs; !slices.Equal(got, []string{"--log_dir", "logs", "--redirects", "3"}) {
		t.Errorf("train: torchrun args %q", got)
	}
	if got := byName["plain_default"].TorchrunArgs; got != nil {
		t.Errorf("a job without a torchrun block has args %q", got)
	}
}

// TestTorchrunArgsOfAVariableWithoutValueAreCheckedWhereKnown: at
// validate, an element from a variable given no value is not judged, and
// a written-out reserved one next to it still is.
func TestTorchrunArgsOfAVariableWithoutValueAreCheckedWhereKnown(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "main.hcl", `
variable "log_dir" { type = string }
job "train" {
  nodes   = 2
  command = ["python", "train.py"]
  torchrun {
    args = ["--log_dir", var.log_dir, "--standalone"]
  }
}
`)
	_, diags := Load(dir, LoadOptions{UnsetVariablesUnknown: true})
	if len(diags) != 1 || diags[0].Summary != "Reserved torchrun argument" || diags[0].Subject.Start.Line != 7 ||
		diags[0].Subject.Start.Column != 39 {
		t.Fatalf("want one Reserved torchrun argument at line 7 column 39 (\"--standalone\"):\n%s", diagList(diags))
	}
}

// TestTorchrunBlockInJSONSyntax: the block reads the same in JSON syntax,
// and a reserved argument is pointed at where it is written.
func TestTorchrunBlockInJSONSyntax(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "main.hcl.json", `{"job": {"train": {
  "nodes": 2,
  "command": ["python", "train.py"],
  "torchrun": {"args": ["--log_dir", "logs",
    "--node-rank=1"]}
}}}
`)
	_, diags := Load(dir, LoadOptions{})
	if len(diags) != 1 || diags[0].Summary != "Reserved torchrun argument" || diags[0].Subject.Start.Line != 5 {
		t.Fatalf("want one Reserved torchrun argument at line 5:\n%s", diagList(diags))
	}
}

package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	torchDDP      = "../../examples/torch-ddp"
	torchDDPFacts = "../../testdata/facts/torch-ddp.json"
)

// TestTorchDDPExampleValidatesAndPlansOffline: examples/torch-ddp is valid
// with its machines' addresses unknown, and planned from recorded facts
// (no SSH) it places its torchrun job on both machines, one GPU each. The
// same facts with torchrun missing on one machine leave the job unplaced,
// so the plan depends on the facts reporting torchrun.
func TestTorchDDPExampleValidatesAndPlansOffline(t *testing.T) {
	if code, out, errOut := runCmd(t, "validate", torchDDP); code != 0 {
		t.Fatalf("validate: exit %d\n%s%s", code, out, errOut)
	}
	vars := []string{"--var", "gpu0=10.0.0.10", "--var", "gpu1=10.0.0.11"}
	plan := func(factsPath string) (int, string, string) {
		args := append([]string{"plan", torchDDP, "--facts", factsPath, "--state", filepath.Join(t.TempDir(), "state.json"), "--detailed-exitcode"}, vars...)
		return runCmd(t, args...)
	}
	code, out, errOut := plan(torchDDPFacts)
	if code != 2 {
		t.Fatalf("plan: exit %d, want 2\n%s%s", code, out, errOut)
	}
	for _, want := range []string{`+ job "ddp" will be launched`, "2 × 1 GPU, torchrun, policy one_zone",
		"placed on worker group [gpu-0 gpu-1] (same zone lab-1", "node 0  gpu-0  10.0.0.10", "node 1  gpu-1  10.0.0.11"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}

	b, err := os.ReadFile(torchDDPFacts)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	doc["hosts"].([]any)[1].(map[string]any)["torchrun"] = "" // probed: none on the PATH
	noTorchrun := filepath.Join(t.TempDir(), "facts.json")
	b, _ = json.Marshal(doc)
	writeFile(t, noTorchrun, string(b))
	_, out, errOut = plan(noTorchrun)
	if strings.Contains(out, "node 1  gpu-1") || !strings.Contains(out+errOut, "host gpu-1: no torchrun on the PATH") {
		t.Errorf("plan with no torchrun on gpu-1 still places on it, or does not say so:\n%s%s", out, errOut)
	}
}

// TestTorchDDPTrainingRunsUnderTorchrun runs the example's train.py as its
// job does, under this computer's torchrun with the example's own torchrun
// args, two processes on one node over gloo (CUDA hidden), and checks that
// rank 0 reports a world of 2 and one loss per epoch, falling: the ranks
// trained one model together.
func TestTorchDDPTrainingRunsUnderTorchrun(t *testing.T) {
	requireTorch(t)
	const epochs = 3
	// Debian's torch 1.13 imports slowly on a loaded machine; a hang in
	// the rendezvous must still end the test.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	logs := t.TempDir()
	cmd := exec.CommandContext(ctx, "torchrun", "--standalone", "--nnodes", "1", "--nproc_per_node", "2",
		"--redirects", "1", "--tee", "1", "--log_dir", logs,
		"train.py", "--epochs", strconv.Itoa(epochs))
	cmd.Dir = filepath.Join(torchDDP, "src")
	cmd.Env = append(os.Environ(), "CUDA_VISIBLE_DEVICES=", "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("torchrun: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "ddp: world size 2, backend gloo") {
		t.Errorf("rank 0 did not report a gloo group of 2:\n%s", out)
	}
	var losses []float64
	for _, m := range regexp.MustCompile(`epoch (\d+) loss ([0-9.]+)`).FindAllStringSubmatch(string(out), -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		losses = append(losses, v)
	}
	if len(losses) != epochs {
		t.Fatalf("%d epoch losses printed, want %d (rank 0 only):\n%s", len(losses), epochs, out)
	}
	if losses[epochs-1] >= losses[0] {
		t.Errorf("loss did not fall over %d epochs: %v", epochs, losses)
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/reconcile/launch"
)

// ranksPy is a worker of a real torch.distributed job: it joins the group
// from torchrun's environment over gloo (never CUDA: the sandbox's GPUs are
// not real), all-reduces rank+1, waits at a barrier, and writes what it saw
// to OUT/rank-RANK.json (renamed into place, so a reader never sees half
// of one). Then it waits to be stopped, so that the test sees the stop
// end a running job.
const ranksPy = `import json, os, sys, time
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.tensor([rank + 1.0])
dist.all_reduce(t)
dist.barrier()
seen = {
    "rank": os.environ["RANK"],
    "world_size": os.environ["WORLD_SIZE"],
    "local_rank": os.environ["LOCAL_RANK"],
    "node_rank": os.environ["GPULAYER_NODE_RANK"],
    "machine": os.environ["GPULAYER_SANDBOX_MACHINE"],
    "sum": t.item(),
    "torch": torch.__version__,
    "pid": os.getpid(),
}
out = sys.argv[1]
tmp = os.path.join(out, ".rank-%d.tmp" % rank)
with open(tmp, "w") as f:
    json.dump(seen, f)
os.rename(tmp, os.path.join(out, "rank-%d.json" % rank))
print("rank", rank, "all-reduced", t.item())
while True:
    time.sleep(1)
`

// rankSeen is what one worker wrote.
type rankSeen struct {
	Rank      string  `json:"rank"`
	WorldSize string  `json:"world_size"`
	LocalRank string  `json:"local_rank"`
	NodeRank  string  `json:"node_rank"`
	Machine   string  `json:"machine"`
	Sum       float64 `json:"sum"`
	Torch     string  `json:"torch"`
	PID       int     `json:"pid"`
}

// requireTorch skips the test where this computer has no torchrun, or its
// torchrun's python has no torch (torchrun runs a python script with its
// own interpreter, which need not be the first python3 on the PATH: pyenv's
// is not Debian's), unless GPULAYER_REQUIRE_TORCH=1 (.ci/run, which
// installs Debian's python3-torch) makes that a failure.
func requireTorch(t *testing.T) {
	t.Helper()
	missing := ""
	if tr, err := exec.LookPath("torchrun"); err != nil {
		missing = "torchrun is not on the PATH"
	} else if py := interpreterOf(tr); exec.Command(py, "-c", `import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)`).Run() != nil {
		missing = fmt.Sprintf("%s (the python of %s) has no torch", py, tr)
	}
	switch {
	case missing == "":
	case os.Getenv("GPULAYER_REQUIRE_TORCH") == "1":
		t.Fatalf("%s, and GPULAYER_REQUIRE_TORCH=1 (Debian: apt-get install python3-torch)", missing)
	default:
		t.Skipf("%s (Debian: apt-get install python3-torch; GPULAYER_REQUIRE_TORCH=1 makes this a failure)", missing)
	}
}

// interpreterOf is the program a script's #! line names (through env,
// the one PATH finds), or python3 when the line says nothing usable.
func interpreterOf(script string) string {
	b, _ := os.ReadFile(script)
	line, _, _ := strings.Cut(string(b[:min(len(b), 256)]), "\n")
	f := strings.Fields(strings.TrimPrefix(line, "#!"))
	switch {
	case !strings.HasPrefix(line, "#!") || len(f) == 0:
		return "python3"
	case filepath.Base(f[0]) == "env" && len(f) > 1:
		return f[1]
	}
	return f[0]
}

// TestTorchrunJobRunsRealTorchOnTheSandbox is a real PyTorch job end to
// end: a 2-node × 2-process torchrun job on two sandbox machines (each its
// own machine, on loopback: MASTER_ADDR is 127.0.0.1) rendezvous across
// the nodes, all-reduce over gloo and each rank reports RANK 0-3,
// WORLD_SIZE 4, LOCAL_RANK 0-1 on each node and the sum 1+2+3+4 = 10;
// destroy then leaves no process of the run. Debian's torch 1.13 runs on
// a Python it does not support, and its torchrun needs --redirects and
// --tee set (docs/apply.md): the job's torchrun block gives them.
func TestTorchrunJobRunsRealTorchOnTheSandbox(t *testing.T) {
	requireTorch(t)
	start := time.Now()
	work := t.TempDir()
	out := filepath.Join(work, "out")
	for _, d := range []string{out, filepath.Join(work, "tmp")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(work, "ranks.py"), ranksPy)
	sb, dir := sandboxJobs(t, 2, fmt.Sprintf(`
job "ddp" {
  nodes         = 2
  gpus_per_node = 2
  launcher      = "torchrun"
  stop_timeout  = "5s"
  workdir       = %q
  command       = ["python3", "ranks.py", %q]
  env           = { TMPDIR = %q }

  torchrun {
    args = ["--redirects", "1", "--tee", "1", "--log_dir", %q]
  }
}
`, work, out, filepath.Join(work, "tmp"), filepath.Join(work, "torchrun-logs")))

	code, planOut, errOut := runCmd(t, "plan", dir)
	// The probe reports each machine's recorded torch version (the job
	// imports the computer's own torch, whatever it is).
	if code != 0 || !strings.Contains(planOut, `+ job "ddp" will be launched`) || !strings.Contains(planOut, "torch "+sb.Machines[0].Torch) {
		t.Fatalf("plan: exit %d\n%s%s", code, planOut, errOut)
	}
	if code, applyOut, errOut := runCmd(t, "apply", dir, "--auto-approve"); code != 0 || !strings.Contains(applyOut, "Apply complete: 1 launched") {
		t.Fatalf("apply: exit %d\n%s%s", code, applyOut, errOut)
	}
	job := loadState(t, dir).Job("ddp")
	runID := job.RunID
	// Where each node's leader records how its command ended.
	var exitFiles []string
	for _, n := range job.Nodes {
		for _, m := range sb.Machines {
			if m.Name == n.Host {
				exitFiles = append(exitFiles, filepath.Join(m.Dir, "home", launch.ExitPath("ddp", runID, n.Rank)))
			}
		}
	}
	if len(exitFiles) != 2 {
		t.Fatalf("state places the job on %+v, not on two of the sandbox's machines", job.Nodes)
	}
	// logs reads the configuration of the working directory.
	t.Chdir(dir)
	nodeLogs := func() string {
		_, logs, errOut := runCmd(t, "logs", "ddp", "--tail", "40")
		return logs + errOut
	}

	// torch is slow to import (seconds per process, six of them here on
	// however few cores): the wait is bounded, a node that ends first
	// (torchrun refusing its arguments, a worker failing) ends it, and
	// either fails with what the nodes printed.
	seen := map[int]rankSeen{}
	for deadline := time.Now().Add(120 * time.Second); len(seen) < 4; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after %s, %d of 4 ranks reported; the nodes' logs:\n%s", time.Since(start).Round(time.Second), len(seen), nodeLogs())
		}
		for _, f := range exitFiles {
			if status, err := os.ReadFile(f); err == nil {
				t.Fatalf("a node ended (exit status %s) after %d of 4 ranks reported; the nodes' logs:\n%s",
					strings.TrimSpace(string(status)), len(seen), nodeLogs())
			}
		}
		for r := range 4 {
			b, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("rank-%d.json", r)))
			if err != nil {
				continue
			}
			var s rankSeen
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatalf("rank %d wrote %q: %v", r, b, err)
			}
			seen[r] = s
		}
	}
	t.Logf("4 ranks reported %s after the plan; the probe said torch %s, the job ran torch %s",
		time.Since(start).Round(100*time.Millisecond), sb.Machines[0].Torch, seen[0].Torch)

	machineOf := map[string]string{} // node rank -> sandbox machine
	localRanks := map[string][]string{}
	for r, s := range seen {
		if s.Rank != fmt.Sprint(r) || s.WorldSize != "4" || s.Sum != 10 {
			t.Errorf("rank %d saw RANK=%s WORLD_SIZE=%s and the all-reduced sum %v; want RANK=%d WORLD_SIZE=4 and 10", r, s.Rank, s.WorldSize, s.Sum, r)
		}
		// torchrun numbers a node's workers after those of the nodes
		// before it: node 0 holds ranks 0 and 1.
		if want := fmt.Sprint(r / 2); s.NodeRank != want {
			t.Errorf("rank %d ran on node %s, want node %s", r, s.NodeRank, want)
		}
		if m, ok := machineOf[s.NodeRank]; ok && m != s.Machine {
			t.Errorf("node %s's ranks ran on two machines: %s and %s", s.NodeRank, m, s.Machine)
		}
		machineOf[s.NodeRank] = s.Machine
		localRanks[s.NodeRank] = append(localRanks[s.NodeRank], s.LocalRank)
	}
	for node, lr := range localRanks {
		if slices.Sort(lr); !slices.Equal(lr, []string{"0", "1"}) {
			t.Errorf("node %s's LOCAL_RANKs are %v, want [0 1]", node, lr)
		}
	}
	if machineOf["0"] == "" || machineOf["0"] == machineOf["1"] {
		t.Errorf("the two nodes ran on machines %q and %q, want two machines", machineOf["0"], machineOf["1"])
	}

	// Every worker is a process of the run until the stop.
	running := runProcesses(runID)
	for r, s := range seen {
		if !slices.Contains(running, s.PID) {
			t.Errorf("rank %d (pid %d) is not among the run's processes %v", r, s.PID, running)
		}
	}
	if code, destroyOut, errOut := runCmd(t, "destroy", dir, "--auto-approve"); code != 0 || !strings.Contains(destroyOut, "1 stopped") {
		t.Fatalf("destroy: exit %d\n%s%s", code, destroyOut, errOut)
	}
	if left := runProcesses(runID); len(left) > 0 {
		t.Errorf("processes %v of run %s survived destroy", left, runID)
	}
}

package reconcile_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/placement"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/planview"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/topology"
)

var update = flag.Bool("update", false, "rewrite the golden plans")

// The fleet of every case: four DGX-1s in one zone, three in rack-3 and
// one in rack-4.
const fleetHCL = `
fleet "lab" {
  region        = "paris"
  zone          = "paris-1"
  network_group = "rack-3"
  host "a1" { address = "10.1.0.11" }
  host "a2" { address = "10.1.0.12" }
  host "a3" { address = "10.1.0.13:2222" }
  host "b1" {
    address       = "10.1.0.21"
    network_group = "rack-4"
  }
}

policy "rack" {
  group_locality = "network_group"
}
`

const trainHCL = `
job "train" {
  policy        = policy.rack
  nodes         = 2
  gpus_per_node = 4
  command       = ["python", "train.py", "--epochs", "3"]
  env           = { NCCL_DEBUG = "WARN" }
}
`

const evalHCL = `
job "eval" {
  nodes         = 1
  gpus_per_node = 1
  command       = ["python", "eval.py"]
  launcher      = "plain"
}
`

// loadConfig writes the files into a temporary directory and loads them.
func loadConfig(t *testing.T, hcl ...string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	for i, src := range hcl {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.hcl", i)), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, diags := config.Load(dir, config.LoadOptions{})
	if diags.HasErrors() {
		t.Fatalf("config: %s", diags.Error())
	}
	return cfg
}

var dgx1 = func() *topology.Matrix {
	b, err := os.ReadFile("../testdata/topo/dgx1-v100-8x-nv1-nv2-mlx5-driver440.txt")
	if err != nil {
		panic(err)
	}
	m, err := topology.ParseSMI(string(b))
	if err != nil {
		panic(err)
	}
	return m
}()

// machine is a probed DGX-1 with every GPU free.
func machine(name, ng string) facts.Host {
	h := facts.Host{
		Name: name, Fleet: "lab", Address: "10.1.0.1", Status: facts.StatusOK,
		Location:     facts.Location{Region: "paris", Zone: "paris-1", NetworkGroup: ng, Source: facts.SourceHost},
		TorchVersion: "2.5.1", Topology: dgx1, BootID: "boot-" + name,
		FreeGPUs: []int{},
		ProbedAt: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC),
	}
	for i := range 8 {
		h.GPUs = append(h.GPUs, facts.GPU{
			Index: i, UUID: fmt.Sprintf("GPU-%s-%d", name, i), Name: "Tesla V100-SXM2-32GB",
			MemoryTotalMiB: 32768, Processes: []facts.Process{},
		})
	}
	return h
}

// fleetFacts are the four machines, all free.
func fleetFacts() *facts.Document {
	return &facts.Document{Version: facts.Version, Hosts: []facts.Host{
		machine("a1", "rack-3"), machine("a2", "rack-3"), machine("a3", "rack-3"), machine("b1", "rack-4"),
	}}
}

// finish computes FreeGPUs from the GPUs' processes, as the probe does.
func finish(doc *facts.Document) *facts.Document {
	for i := range doc.Hosts {
		h := &doc.Hosts[i]
		h.FreeGPUs = []int{}
		for _, g := range h.GPUs {
			if len(g.Processes) == 0 {
				h.FreeGPUs = append(h.FreeGPUs, g.Index)
			}
		}
	}
	return doc
}

// running records job as running on the given hosts and GPUs, launched
// with cfg's spec, and makes the facts show its processes alive on those
// GPUs.
func running(t *testing.T, st *state.State, doc *facts.Document, cfg *config.Config, job string, runID string, placement map[string][]int, hostOrder ...string) {
	t.Helper()
	var spec state.JobSpec
	for _, j := range cfg.Jobs {
		if j.Name == job {
			spec = reconcile.JobSpec(j, nil)
		}
	}
	j := state.Job{Name: job, Spec: spec, ConfigHash: spec.Hash(), Status: state.JobRunning, RunID: runID,
		LaunchedAt: time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)}
	for rank, hostName := range hostOrder {
		fh := doc.Find(hostName)
		pid := 4000 + 100*rank + len(st.Jobs)*10
		var addr string
		var port int
		for _, f := range reconcile.WithMachines(cfg, st.Machines).Fleets {
			for _, h := range f.Hosts {
				if h.Name == hostName {
					addr, port = h.Address, h.Port
				}
			}
		}
		j.Nodes = append(j.Nodes, state.Node{
			Rank: rank, Host: hostName, Fleet: "lab", Address: addr, Port: port,
			GPUs: placement[hostName], Location: state.Location{Region: "paris", Zone: "paris-1", NetworkGroup: fh.Location.NetworkGroup},
			Process: &state.Process{PID: pid, PGID: pid, StartTime: 777, BootID: fh.BootID, RunID: runID},
		})
		fh.PIDs = append(fh.PIDs, facts.PID{PID: pid, Alive: true, StartTime: 777})
		for _, g := range placement[hostName] {
			fh.GPUs[g].Processes = append(fh.GPUs[g].Processes, facts.Process{PID: pid + 1, UsedMemoryMiB: 1000, RunID: runID})
		}
	}
	st.SetJob(j)
	finish(doc)
}

type planCase struct {
	name  string
	build func(t *testing.T) reconcile.Input
	check func(t *testing.T, p *reconcile.Plan)
}

// planNow is the time every plan case is made at: an hour after the
// jobs of the cases were launched.
var planNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func input(cfg *config.Config, st *state.State, doc *facts.Document) reconcile.Input {
	if st.Lineage == "" {
		st.Lineage = "6f1d1a8e-7c39-4d4f-9a51-3a0d2b7c9e10"
		st.Serial = 4
	}
	return reconcile.Input{Config: cfg, State: st, Facts: finish(doc),
		Refresh: reconcile.Refresh{Source: reconcile.RefreshFile, File: "facts.json"}, Version: "test", Now: planNow}
}

func action(t *testing.T, p *reconcile.Plan, job string, want reconcile.Action, codes ...reconcile.ReasonCode) *reconcile.JobChange {
	t.Helper()
	c := p.Job(job)
	if c == nil {
		t.Fatalf("no change for job %q", job)
	}
	if c.Action != want {
		t.Errorf("job %q: action %s, want %s (reasons %+v)", job, c.Action, want, c.Reasons)
	}
	var got []reconcile.ReasonCode
	for _, r := range c.Reasons {
		got = append(got, r.Code)
	}
	if !slices.Equal(got, codes) {
		t.Errorf("job %q: reasons %v, want %v", job, got, codes)
	}
	return c
}

var planCases = []planCase{
	{
		name: "launch",
		build: func(t *testing.T) reconcile.Input {
			return input(loadConfig(t, fleetHCL, trainHCL, evalHCL), state.New(), fleetFacts())
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			train := action(t, p, "train", reconcile.ActionCreate, reconcile.ReasonNewJob)
			action(t, p, "eval", reconcile.ActionCreate, reconcile.ReasonNewJob)
			if n := train.Placement.Nodes; len(n) != 2 || n[0].Location.NetworkGroup != "rack-3" || n[1].Location.NetworkGroup != "rack-3" {
				t.Errorf("train placed on %+v, want two rack-3 hosts", n)
			}
			if !p.HasChanges() || p.Summary.Launch != 2 {
				t.Errorf("summary %+v", p.Summary)
			}
		},
	},
	{
		name: "no-op",
		build: func(t *testing.T) reconcile.Input {
			cfg := loadConfig(t, fleetHCL, trainHCL, evalHCL)
			st, doc := state.New(), fleetFacts()
			running(t, st, doc, cfg, "train", "r-train1", map[string][]int{"a1": {0, 1, 2, 3}, "a2": {0, 1, 2, 3}}, "a1", "a2")
			running(t, st, doc, cfg, "eval", "r-eval1", map[string][]int{"b1": {5}}, "b1")
			return input(cfg, st, doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			action(t, p, "train", reconcile.ActionNoOp)
			action(t, p, "eval", reconcile.ActionNoOp)
			if p.HasChanges() {
				t.Errorf("a plan with nothing to do has changes: %+v", p.Summary)
			}
		},
	},
	{
		name: "no-op-better-group-exists",
		build: func(t *testing.T) reconcile.Input {
			// train runs across racks (placed when rack-3 was busy); rack-3
			// is free now, and the job stays where it is.
			cfg := loadConfig(t, fleetHCL, trainHCL)
			st, doc := state.New(), fleetFacts()
			running(t, st, doc, cfg, "train", "r-train1", map[string][]int{"a1": {0, 1, 2, 3}, "b1": {0, 1, 2, 3}}, "a1", "b1")
			return input(cfg, st, doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			c := action(t, p, "train", reconcile.ActionNoOp)
			if c.Placement.Nodes[1].Host != "b1" {
				t.Errorf("kept placement %+v", c.Placement.Nodes)
			}
		},
	},
	{
		name: "replace-config-changed",
		build: func(t *testing.T) reconcile.Input {
			old := loadConfig(t, fleetHCL, trainHCL)
			st, doc := state.New(), fleetFacts()
			running(t, st, doc, old, "train", "r-train1", map[string][]int{"a1": {0, 1, 2, 3}, "a2": {0, 1, 2, 3}}, "a1", "a2")
			changed := loadConfig(t, fleetHCL, `
job "train" {
  policy        = policy.rack
  nodes         = 2
  gpus_per_node = 4
  command       = ["python", "train.py", "--epochs", "5"]
  env           = { NCCL_DEBUG = "INFO" }
}`)
			return input(changed, st, doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			c := action(t, p, "train", reconcile.ActionReplace, reconcile.ReasonConfigChanged)
			if !slices.Equal(c.Reasons[0].Fields, []string{"command", "env"}) {
				t.Errorf("fields %v, want [command env]", c.Reasons[0].Fields)
			}
			// Its own GPUs are freed first, so it may land where it was.
			if !c.StopPrior || c.Placement == nil {
				t.Errorf("replace without stop or placement: %+v", c)
			}
		},
	},
	{
		name: "stop-node-failed",
		build: func(t *testing.T) reconcile.Input {
			cfg := loadConfig(t, fleetHCL, trainHCL)
			st, doc := state.New(), fleetFacts()
			running(t, st, doc, cfg, "train", "r-train1", map[string][]int{"a1": {0, 1, 2, 3}, "a2": {0, 1, 2, 3}}, "a1", "a2")
			a2 := doc.Find("a2")
			status := 137
			a2.PIDs[0] = facts.PID{PID: a2.PIDs[0].PID, Alive: false, ExitStatus: &status, LogTail: []string{"RuntimeError: CUDA out of memory", "\x1b[31mkilled\x1b[0m"}}
			for g := range 4 {
				a2.GPUs[g].Processes = nil
			}
			return input(cfg, st, doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			// A batch job with no restart left: node 0 is stopped with
			// it, and the job stays in state, failed.
			c := action(t, p, "train", reconcile.ActionStop, reconcile.ReasonRunEnded)
			r := c.Run
			if r == nil || r.State != state.JobFailed || r.EndReason != reconcile.EndFailed || !r.Record || len(r.Nodes) != 1 {
				t.Fatalf("run %+v", r)
			}
			if e := r.Nodes[0]; e.Rank != 1 || e.ExitStatus == nil || *e.ExitStatus != 137 || e.Signal != "KILL" || len(e.LogTail) != 2 {
				t.Errorf("node end %+v", e)
			}
			if !strings.Contains(c.Reasons[0].Message, "killed by SIGKILL") || !p.HasChanges() {
				t.Errorf("reason %q, changes %v", c.Reasons[0].Message, p.HasChanges())
			}
		},
	},
	{
		name: "replace-process-pid-reused",
		build: func(t *testing.T) reconcile.Input {
			cfg := loadConfig(t, fleetHCL, trainHCL)
			st, doc := state.New(), fleetFacts()
			running(t, st, doc, cfg, "train", "r-train1", map[string][]int{"a1": {0, 1, 2, 3}, "a2": {0, 1, 2, 3}}, "a1", "a2")
			doc.Find("a1").PIDs[0].StartTime = 9999 // same pid, another process
			doc.Find("a2").BootID = "boot-a2-after-reboot"
			return input(cfg, st, doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			// Both nodes vanished without an exit status: the gang is
			// lost, and restarted at once under on_lost (3 by default).
			c := action(t, p, "train", reconcile.ActionReplace, reconcile.ReasonRestart)
			if c.Run == nil || c.Run.State != state.JobLost || c.Run.Budget != "on_lost" || !c.Run.Restart {
				t.Errorf("run %+v", c.Run)
			}
		},
	},
	{
		name: "unknown-host-unreachable",
		build: func(t *testing.T) reconcile.Input {
			cfg := loadConfig(t, fleetHCL, trainHCL)
			st, doc := state.New(), fleetFacts()
			running(t, st, doc, cfg, "train", "r-train1", map[string][]int{"a1": {0, 1, 2, 3}, "a2": {0, 1, 2, 3}}, "a1", "a2")
			a2 := doc.Find("a2")
			*a2 = facts.Host{Name: "a2", Fleet: "lab", Address: "10.1.0.12", Status: facts.StatusUnreachable,
				Error: "dial tcp 10.1.0.12:22: i/o timeout", GPUs: []facts.GPU{}, FreeGPUs: []int{}}
			return input(cfg, st, doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			// Not answering once is not a failure: the job may still run
			// there, and is left alone; when a2 stopped answering is
			// recorded, for lost_after.
			c := action(t, p, "train", reconcile.ActionNoOp)
			if c.Run == nil || c.Run.State != reconcile.RunUnknown || !c.Run.Record || !c.Run.Unreachable[1].Equal(planNow) || p.HasChanges() {
				t.Errorf("run %+v", c.Run)
			}
			if len(p.Refresh.Problems) != 1 || p.Refresh.Usable != 3 {
				t.Errorf("refresh %+v", p.Refresh)
			}
		},
	},
	{
		name: "replace-host-lost",
		build: func(t *testing.T) reconcile.Input {
			cfg := loadConfig(t, fleetHCL, trainHCL)
			st, doc := state.New(), fleetFacts()
			running(t, st, doc, cfg, "train", "r-train1", map[string][]int{"a1": {0, 1, 2, 3}, "a2": {0, 1, 2, 3}}, "a1", "a2")
			since := planNow.Add(-6 * time.Minute)
			st.Jobs[0].Nodes[1].UnreachableSince = &since
			a2 := doc.Find("a2")
			*a2 = facts.Host{Name: "a2", Fleet: "lab", Address: "10.1.0.12", Status: facts.StatusUnreachable,
				Error: "dial tcp 10.1.0.12:22: i/o timeout", GPUs: []facts.GPU{}, FreeGPUs: []int{}}
			return input(cfg, st, doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			// Unreachable for longer than lost_after (5m): lost, and
			// placed again at once, away from a2: node 0 keeps a1 and
			// its GPUs, node 1 goes to a3 in the same rack (hot swap).
			c := action(t, p, "train", reconcile.ActionReplace, reconcile.ReasonRestart, reconcile.ReasonNodeReplaced)
			n := c.Placement.Nodes
			if len(n) != 2 || n[0].Host != "a1" || n[0].Rank != 0 || !sameSet(n[0].GPUs, []int{0, 1, 2, 3}) || n[1].Host != "a3" || n[1].Rank != 1 {
				t.Errorf("placed on %+v, want a1 GPUs 0-3 kept as node 0 and a3 as node 1", n)
			}
			if c.Swap == nil || len(c.Swap.Nodes) != 1 || c.Swap.Nodes[0] != (reconcile.SwappedNode{Rank: 1, Lost: "a2", Host: "a3"}) {
				t.Errorf("swap %+v", c.Swap)
			}
			if c.Run == nil || c.Run.State != state.JobLost || c.Run.Budget != "on_lost" || c.Run.LostRestarts != 0 {
				t.Errorf("run %+v", c.Run)
			}
		},
	},
	{
		name: "replace-gpus-taken",
		build: func(t *testing.T) reconcile.Input {
			cfg := loadConfig(t, fleetHCL, trainHCL)
			st, doc := state.New(), fleetFacts()
			running(t, st, doc, cfg, "train", "r-train1", map[string][]int{"a1": {0, 1, 2, 3}, "a2": {0, 1, 2, 3}}, "a1", "a2")
			g := &doc.Find("a1").GPUs[2]
			g.Processes = append(g.Processes, facts.Process{PID: 31337, UsedMemoryMiB: 20000})
			return input(cfg, st, doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			c := action(t, p, "train", reconcile.ActionReplace, reconcile.ReasonGPUsTaken)
			for _, n := range c.Placement.Nodes {
				if n.Host == "a1" && slices.Contains(n.GPUs, 2) {
					t.Errorf("placed on the taken GPU: %+v", n)
				}
			}
		},
	},
	{
		name: "replace-location-changed",
		build: func(t *testing.T) reconcile.Input {
			cfg := loadConfig(t, fleetHCL, trainHCL)
			st, doc := state.New(), fleetFacts()
			running(t, st, doc, cfg, "train", "r-train1", map[string][]int{"a1": {0, 1, 2, 3}, "a2": {0, 1, 2, 3}}, "a1", "a2")
			st.Jobs[0].Nodes[1].Location.NetworkGroup = "rack-2"
			return input(cfg, st, doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			action(t, p, "train", reconcile.ActionReplace, reconcile.ReasonLocationChanged)
		},
	},
	{
		name: "replace-host-removed",
		build: func(t *testing.T) reconcile.Input {
			cfg := loadConfig(t, fleetHCL, trainHCL)
			st, doc := state.New(), fleetFacts()
			running(t, st, doc, cfg, "train", "r-train1", map[string][]int{"a1": {0, 1, 2, 3}, "a2": {0, 1, 2, 3}}, "a1", "a2")
			st.Jobs[0].Nodes[1].Host = "a9"
			return input(cfg, st, doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			action(t, p, "train", reconcile.ActionReplace, reconcile.ReasonHostRemoved)
		},
	},
	{
		name: "replace-launch-incomplete",
		build: func(t *testing.T) reconcile.Input {
			cfg := loadConfig(t, fleetHCL, trainHCL)
			st, doc := state.New(), fleetFacts()
			running(t, st, doc, cfg, "train", "r-train1", map[string][]int{"a1": {0, 1, 2, 3}, "a2": {0, 1, 2, 3}}, "a1", "a2")
			st.Jobs[0].Status = state.JobFailed
			st.Jobs[0].Error = "node 1 on a2: workdir /srv/train: no such directory"
			st.Jobs[0].Nodes[1].Process = nil
			return input(cfg, st, doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			action(t, p, "train", reconcile.ActionReplace, reconcile.ReasonLaunchIncomplete)
		},
	},
	{
		name: "stop",
		build: func(t *testing.T) reconcile.Input {
			old := loadConfig(t, fleetHCL, trainHCL, evalHCL)
			st, doc := state.New(), fleetFacts()
			running(t, st, doc, old, "eval", "r-eval1", map[string][]int{"b1": {5}}, "b1")
			return input(loadConfig(t, fleetHCL), st, doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			c := action(t, p, "eval", reconcile.ActionDestroy, reconcile.ReasonRemovedFromConfig)
			if !c.StopPrior || c.Prior == nil || c.Prior.RunID != "r-eval1" {
				t.Errorf("destroy %+v", c)
			}
		},
	},
	{
		name: "leftovers",
		build: func(t *testing.T) reconcile.Input {
			cfg := loadConfig(t, fleetHCL)
			st, doc := state.New(), fleetFacts()
			leftover := func(run, host string) state.Job {
				return state.Job{Name: "train", RunID: run, Status: state.JobStopping, Nodes: []state.Node{
					{Rank: 1, Host: host, Address: "10.1.0.12", GPUs: []int{0, 1}, Process: &state.Process{PID: 5000, RunID: run}},
				}}
			}
			st.AddLeftover(leftover("r-reachable", "a2"))
			st.AddLeftover(leftover("r-down", "b1"))
			b1 := doc.Find("b1")
			*b1 = facts.Host{Name: "b1", Status: facts.StatusUnreachable, Error: "no route to host", GPUs: []facts.GPU{}}
			return input(cfg, st, doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			if len(p.Leftovers) != 2 || p.Summary.Leftovers != 1 || !p.HasChanges() {
				t.Errorf("leftovers %+v, summary %+v", p.Leftovers, p.Summary)
			}
			if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "r-down") {
				t.Errorf("warnings %q", p.Warnings)
			}
		},
	},
	{
		name: "waiting",
		build: func(t *testing.T) reconcile.Input {
			cfg := loadConfig(t, fleetHCL, `
job "big" {
  policy        = policy.rack
  nodes         = 4
  gpus_per_node = 8
  command       = ["python", "big.py"]
}`)
			return input(cfg, state.New(), fleetFacts())
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			c := action(t, p, "big", reconcile.ActionWaiting, reconcile.ReasonUnschedulableNow)
			if c.Decision == nil || c.Decision.Explanation == nil || c.Placement != nil {
				t.Errorf("waiting job without its explanation: %+v", c)
			}
			if p.HasChanges() {
				t.Error("a waiting job alone is not a change")
			}
		},
	},
	{
		name: "failed",
		build: func(t *testing.T) reconcile.Input {
			cfg := loadConfig(t, fleetHCL, `
policy "strict" {
  group_locality   = "network_group"
  on_unschedulable = "fail"
}
job "huge" {
  policy        = policy.strict
  nodes         = 2
  gpus_per_node = 16
  command       = ["python", "huge.py"]
}`)
			return input(cfg, state.New(), fleetFacts())
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			action(t, p, "huge", reconcile.ActionFailed, reconcile.ReasonUnschedulable)
		},
	},
	{
		name: "replace-torchrun-args-changed",
		build: func(t *testing.T) reconcile.Input {
			old := loadConfig(t, fleetHCL, trainHCL)
			st, doc := state.New(), fleetFacts()
			running(t, st, doc, old, "train", "r-train1", map[string][]int{"a1": {0, 1, 2, 3}, "a2": {0, 1, 2, 3}}, "a1", "a2")
			changed := loadConfig(t, fleetHCL, `
job "train" {
  policy        = policy.rack
  nodes         = 2
  gpus_per_node = 4
  command       = ["python", "train.py", "--epochs", "3"]
  env           = { NCCL_DEBUG = "WARN" }
  torchrun {
    args = ["--log_dir", "/srv/logs"]
  }
}`)
			return input(changed, st, doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			c := action(t, p, "train", reconcile.ActionReplace, reconcile.ReasonConfigChanged)
			if !slices.Equal(c.Reasons[0].Fields, []string{state.FieldTorchrunArgs}) {
				t.Errorf("fields %v, want [%s]", c.Reasons[0].Fields, state.FieldTorchrunArgs)
			}
		},
	},
	{
		// a1 and a2 have no torchrun: rack-3 holds one machine a torchrun
		// job can use, rack-4 another, and train waits, naming why and the
		// hosts; eval, plain, is placed all the same, on any machine.
		name: "waiting-no-torchrun",
		build: func(t *testing.T) reconcile.Input {
			doc := fleetFacts()
			found, none := "/usr/bin/torchrun", ""
			for i := range doc.Hosts {
				doc.Hosts[i].Torchrun = &found
				if h := doc.Hosts[i].Name; h == "a1" || h == "a2" {
					doc.Hosts[i].Torchrun = &none
				}
			}
			return input(loadConfig(t, fleetHCL, trainHCL, evalHCL), state.New(), doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			c := action(t, p, "train", reconcile.ActionWaiting, reconcile.ReasonUnschedulableNow)
			if c.Decision == nil || c.Decision.Explanation == nil ||
				!slices.Contains(c.Decision.Explanation.Excluded, placement.Exclusion{Reason: placement.ReasonNoTorchrun, Workers: 2}) {
				t.Errorf("decision %+v: want 2 workers excluded for no_torchrun", c.Decision)
			}
			action(t, p, "eval", reconcile.ActionCreate, reconcile.ReasonNewJob)
			want := []string{
				`host a1: no torchrun on the PATH; torchrun jobs are not placed on it (job "train")`,
				`host a2: no torchrun on the PATH; torchrun jobs are not placed on it (job "train")`,
			}
			if !slices.Equal(p.Warnings, want) {
				t.Errorf("warnings %q, want %q", p.Warnings, want)
			}
		},
	},
	{
		name: "changed-but-unplaceable-keeps-running",
		build: func(t *testing.T) reconcile.Input {
			old := loadConfig(t, fleetHCL, trainHCL)
			st, doc := state.New(), fleetFacts()
			running(t, st, doc, old, "train", "r-train1", map[string][]int{"a1": {0, 1, 2, 3}, "a2": {0, 1, 2, 3}}, "a1", "a2")
			bigger := loadConfig(t, fleetHCL, `
job "train" {
  policy        = policy.rack
  nodes         = 4
  gpus_per_node = 4
  command       = ["python", "train.py", "--epochs", "3"]
  env           = { NCCL_DEBUG = "WARN" }
}`+evalHCL)
			return input(bigger, st, doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			c := action(t, p, "train", reconcile.ActionWaiting, reconcile.ReasonConfigChanged, reconcile.ReasonUnschedulableNow)
			if c.StopPrior || c.Placement == nil || c.Placement.Nodes[0].Host != "a1" {
				t.Error("a healthy job is stopped for a configuration that cannot be placed")
			}
			eval := action(t, p, "eval", reconcile.ActionCreate, reconcile.ReasonNewJob)
			n := eval.Placement.Nodes[0]
			if (n.Host == "a1" || n.Host == "a2") && n.GPUs[0] < 4 {
				t.Errorf("eval placed on train's GPUs: %+v", n)
			}
		},
	},
	{
		name: "mix",
		build: func(t *testing.T) reconcile.Input {
			old := loadConfig(t, fleetHCL, trainHCL, evalHCL, `
job "old" {
  nodes   = 1
  command = ["sleep", "infinity"]
}`)
			st, doc := state.New(), fleetFacts()
			running(t, st, doc, old, "train", "r-train1", map[string][]int{"a1": {0, 1, 2, 3}, "a2": {0, 1, 2, 3}}, "a1", "a2")
			running(t, st, doc, old, "eval", "r-eval1", map[string][]int{"b1": {5}}, "b1")
			running(t, st, doc, old, "old", "r-old1", map[string][]int{"a3": {7}}, "a3")
			doc.Find("a2").PIDs[0].Alive = false
			cfg := loadConfig(t, fleetHCL, trainHCL, evalHCL, `
job "serve" {
  nodes         = 1
  gpus_per_node = 4
  command       = ["python", "serve.py"]
}
job "big" {
  policy        = policy.rack
  nodes         = 3
  gpus_per_node = 8
  command       = ["python", "big.py"]
}
policy "strict" {
  on_unschedulable = "fail"
}
job "huge" {
  policy        = policy.strict
  nodes         = 1
  gpus_per_node = 9
  command       = ["python", "huge.py"]
}`)
			return input(cfg, st, doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			action(t, p, "train", reconcile.ActionReplace, reconcile.ReasonRestart)
			action(t, p, "eval", reconcile.ActionNoOp)
			action(t, p, "old", reconcile.ActionDestroy, reconcile.ReasonRemovedFromConfig)
			action(t, p, "serve", reconcile.ActionCreate, reconcile.ReasonNewJob)
			action(t, p, "big", reconcile.ActionWaiting, reconcile.ReasonUnschedulableNow)
			action(t, p, "huge", reconcile.ActionFailed, reconcile.ReasonUnschedulable)
			noSharedGPU(t, p)
		},
	},
	{
		name: "cpu-only-gpus-busy",
		build: func(t *testing.T) reconcile.Input {
			// Every GPU of the fleet runs a process gpulayer did not start:
			// the GPU job waits, the CPU-only one is placed by its policy
			// (one network group) with no GPUs.
			doc := fleetFacts()
			for i := range doc.Hosts {
				occupy(&doc.Hosts[i], 7000+i)
			}
			return input(loadConfig(t, fleetHCL, evalHCL, prepHCL), state.New(), doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			action(t, p, "eval", reconcile.ActionWaiting, reconcile.ReasonUnschedulableNow)
			c := action(t, p, "prep", reconcile.ActionCreate, reconcile.ReasonNewJob)
			cpuOnlyPlacement(t, c, 2)
			if c.Placement.Level != placement.LevelNetworkGroup || c.Placement.Location.NetworkGroup != "rack-3" {
				t.Errorf("prep placed at %s %+v, want network group rack-3", c.Placement.Level, c.Placement.Location)
			}
		},
	},
	{
		name: "slices-in-topology-order",
		build: func(t *testing.T) reconcile.Input {
			// rack-2 (c1, c2) sorts before rack-3; a3 runs another CUDA
			// driver, which the policy keys on. Four nodes in pairs by
			// network group: one pair in each of rack-2 and rack-3, ranked
			// rack by rack; b1, alone in rack-4, holds no pair.
			doc := fleetFacts()
			doc.Hosts = append(doc.Hosts, machine("c1", "rack-2"), machine("c2", "rack-2"))
			for i := range doc.Hosts {
				doc.Hosts[i].CUDADriverVersion = "550.54.15"
			}
			doc.Find("a3").CUDADriverVersion = "535.104.05"
			cfg := loadConfig(t, fleetHCL, `
fleet "lab2" {
  region        = "paris"
  zone          = "paris-1"
  network_group = "rack-2"
  host "c1" { address = "10.1.0.31" }
  host "c2" { address = "10.1.0.32" }
}
policy "pairs" {
  group_locality = "zone"
  compatible     = ["torch", "cuda_driver"]
  slice {
    nodes    = 2
    locality = "network_group"
  }
}
job "ring" {
  policy        = policy.pairs
  nodes         = 4
  gpus_per_node = 8
  command       = ["python", "train.py"]
}`)
			return input(cfg, state.New(), doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			c := action(t, p, "ring", reconcile.ActionCreate, reconcile.ReasonNewJob)
			var hosts []string
			for _, n := range c.Placement.Nodes {
				hosts = append(hosts, n.Host)
			}
			if want := []string{"c1", "c2", "a1", "a2"}; !slices.Equal(hosts, want) {
				t.Errorf("node ranks on %v, want %v (pairs by rack, racks in order; a3 runs another driver)", hosts, want)
			}
			if want := "placed on worker group [c1 c2 a1 a2] (same zone paris-1 across 2 network groups, in slices of 2 per network group, torch 2.5.1, CUDA driver 550.54.15)"; c.Decision.Summary != want {
				t.Errorf("summary %q, want %q", c.Decision.Summary, want)
			}
			// A whole DGX-1 per node: its GPUs in local-rank order, every
			// neighbour over NV2.
			if got := c.Placement.Nodes[0].GPUs; !slices.Equal(got, []int{0, 3, 2, 1, 5, 6, 7, 4}) {
				t.Errorf("GPUs %v, want the NV2 path 0,3,2,1,5,6,7,4", got)
			}
		},
	},
	{
		name: "cpu-only-cpu-box",
		build: func(t *testing.T) reconcile.Input {
			// c1 has no nvidia-smi: no GPUs, no links. It takes the
			// CPU-only job, whose spread rank puts it before the idle GPU
			// machines, and never the GPU job.
			doc := fleetFacts()
			doc.Hosts = append(doc.Hosts, cpuBox("c1", "rack-5"))
			cfg := loadConfig(t, fleetHCL, evalHCL, `
fleet "batch" {
  region        = "paris"
  zone          = "paris-1"
  network_group = "rack-5"
  host "c1" { address = "10.1.0.31" }
}
job "index" {
  nodes         = 1
  gpus_per_node = 0
  command       = ["python3", "index.py"]
  launcher      = "plain"
}`)
			return input(cfg, state.New(), doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			eval := action(t, p, "eval", reconcile.ActionCreate, reconcile.ReasonNewJob)
			if eval.Placement.Nodes[0].Host == "c1" {
				t.Errorf("a GPU job placed on the CPU box: %+v", eval.Placement.Nodes)
			}
			c := action(t, p, "index", reconcile.ActionCreate, reconcile.ReasonNewJob)
			cpuOnlyPlacement(t, c, 1)
			if n := c.Placement.Nodes[0]; n.Host != "c1" || n.Fleet != "batch" {
				t.Errorf("index placed on %s of fleet %s, want c1 of batch", n.Host, n.Fleet)
			}
		},
	},
	{
		name: "cpu-only-locality-unmet",
		build: func(t *testing.T) reconcile.Input {
			// Four nodes in one network group: rack-3 has three machines,
			// rack-4 one. Idle or not makes no difference to a CPU-only
			// job, so it waits (policy rack) or fails (policy strict) as
			// unschedulable, saying which group came closest.
			cfg := loadConfig(t, fleetHCL, `
policy "strict" {
  group_locality   = "network_group"
  on_unschedulable = "fail"
}
job "prep" {
  policy        = policy.rack
  nodes         = 4
  gpus_per_node = 0
  command       = ["sh", "prep.sh"]
  launcher      = "plain"
}
job "shard" {
  policy        = policy.strict
  nodes         = 4
  gpus_per_node = 0
  command       = ["sh", "shard.sh"]
  launcher      = "plain"
}`)
			return input(cfg, state.New(), fleetFacts())
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			wait := action(t, p, "prep", reconcile.ActionWaiting, reconcile.ReasonUnschedulableNow)
			fail := action(t, p, "shard", reconcile.ActionFailed, reconcile.ReasonUnschedulable)
			for _, c := range []*reconcile.JobChange{wait, fail} {
				want := "no network group has 4 workers with torch 2.5.1, even with every worker idle (best: rack-3 with 3 of 4)"
				if !strings.Contains(c.Reasons[0].Message, want) || c.Placement != nil {
					t.Errorf("%s: %q, want it to say %q", c.Job, c.Reasons[0].Message, want)
				}
			}
		},
	},
	{
		name: "cpu-only-no-op",
		build: func(t *testing.T) reconcile.Input {
			// prep runs on a1 and a2 with no GPUs; every GPU there is now
			// used by another process. That takes nothing from prep.
			cfg := loadConfig(t, fleetHCL, prepHCL)
			st, doc := state.New(), fleetFacts()
			running(t, st, doc, cfg, "prep", "r-prep1", map[string][]int{"a1": {}, "a2": {}}, "a1", "a2")
			occupy(doc.Find("a1"), 7001)
			occupy(doc.Find("a2"), 7002)
			return input(cfg, st, doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			c := action(t, p, "prep", reconcile.ActionNoOp)
			if p.HasChanges() || len(c.Placement.Nodes) != 2 || len(c.Placement.Nodes[0].GPUs) != 0 {
				t.Errorf("plan of a running CPU-only job: %+v, %+v", p.Summary, c.Placement)
			}
		},
	},
}

const prepHCL = `
job "prep" {
  policy        = policy.rack
  nodes         = 2
  gpus_per_node = 0
  command       = ["sh", "-c", "echo CUDA_VISIBLE_DEVICES=[$CUDA_VISIBLE_DEVICES]"]
  launcher      = "plain"
}
`

// occupy puts one process of pid, started outside gpulayer, on every GPU
// of the host.
func occupy(h *facts.Host, pid int) {
	for g := range h.GPUs {
		h.GPUs[g].Processes = append(h.GPUs[g].Processes, facts.Process{PID: pid, UsedMemoryMiB: 30000})
	}
}

// cpuBox is a probed machine without nvidia-smi, as the probe reports it.
func cpuBox(name, ng string) facts.Host {
	return facts.Host{
		Name: name, Fleet: "batch", Address: "10.1.0.31", Status: facts.StatusOK,
		Location:     facts.Location{Region: "paris", Zone: "paris-1", NetworkGroup: ng, Source: facts.SourceFleet},
		TorchVersion: "2.5.1", BootID: "boot-" + name, GPUs: []facts.GPU{}, FreeGPUs: []int{},
		Warnings: []string{"nvidia-smi not found: no GPUs"},
		ProbedAt: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC),
	}
}

// cpuOnlyPlacement fails unless the job is placed on nodes distinct
// machines with no GPUs, and nothing that describes GPUs.
func cpuOnlyPlacement(t *testing.T, c *reconcile.JobChange, nodes int) {
	t.Helper()
	if c.Placement == nil || len(c.Placement.Nodes) != nodes {
		t.Fatalf("%s: placement %+v, want %d nodes", c.Job, c.Placement, nodes)
	}
	hosts := map[string]bool{}
	for _, n := range c.Placement.Nodes {
		if n.GPUs == nil || len(n.GPUs) != 0 || len(n.GPUUUIDs) != 0 || n.Bottleneck != "" || n.NUMA != "" || hosts[n.Host] {
			t.Errorf("%s: node %+v, want a machine of its own with no GPUs, links or NUMA", c.Job, n)
		}
		hosts[n.Host] = true
	}
}

// noSharedGPU fails when two jobs of the plan would hold one GPU.
func noSharedGPU(t *testing.T, p *reconcile.Plan) {
	t.Helper()
	owner := map[string]string{}
	for _, c := range p.Jobs {
		if c.Placement == nil {
			continue
		}
		for _, n := range c.Placement.Nodes {
			for _, g := range n.GPUs {
				key := fmt.Sprintf("%s/%d", n.Host, g)
				if o, ok := owner[key]; ok {
					t.Errorf("GPU %s given to %s and %s", key, o, c.Job)
				}
				owner[key] = c.Job
			}
		}
	}
}

func TestPlanCases(t *testing.T) {
	for _, tc := range planCases {
		t.Run(tc.name, func(t *testing.T) {
			p := reconcile.MakePlan(tc.build(t))
			tc.check(t, p)
			noSharedGPU(t, p)
			var text, js bytes.Buffer
			if err := planview.Text(&text, p, planview.Options{}); err != nil {
				t.Fatal(err)
			}
			enc := json.NewEncoder(&js)
			enc.SetIndent("", "  ")
			if err := enc.Encode(p); err != nil {
				t.Fatal(err)
			}
			var md bytes.Buffer
			if err := planview.Markdown(&md, p); err != nil {
				t.Fatal(err)
			}
			assertGolden(t, filepath.Join("testdata", "plan", tc.name+".txt"), text.Bytes())
			assertGolden(t, filepath.Join("testdata", "plan", tc.name+".md"), md.Bytes())
			assertGolden(t, filepath.Join("testdata", "plan", tc.name+".json"), js.Bytes())

			// The same inputs give the same bytes.
			again := reconcile.MakePlan(tc.build(t))
			b1, _ := json.Marshal(p)
			b2, _ := json.Marshal(again)
			if !bytes.Equal(b1, b2) {
				t.Error("two plans of the same inputs differ")
			}
		})
	}
}

// TestPlanIgnoresWorkerOrder: facts listing hosts in another order give
// the same plan.
func TestPlanIgnoresWorkerOrder(t *testing.T) {
	cfg := loadConfig(t, fleetHCL, trainHCL, evalHCL)
	a := reconcile.MakePlan(input(cfg, state.New(), fleetFacts()))
	doc := fleetFacts()
	slices.Reverse(doc.Hosts)
	b := reconcile.MakePlan(input(cfg, state.New(), doc))
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Errorf("plans differ with the hosts' order:\n%s\n%s", ja, jb)
	}
}

// TestPlanTargets: --target limits the plan to the named jobs; the others
// keep their GPUs.
func TestPlanTargets(t *testing.T) {
	cfg := loadConfig(t, fleetHCL, trainHCL, evalHCL)
	st, doc := state.New(), fleetFacts()
	running(t, st, doc, cfg, "train", "r-train1", map[string][]int{"a1": {0, 1, 2, 3}, "a2": {0, 1, 2, 3}}, "a1", "a2")
	doc.Find("a2").PIDs[0].Alive = false // would be replaced, but is not targeted
	in := input(cfg, st, doc)
	in.Targets = []string{"eval"}
	p := reconcile.MakePlan(in)
	if len(p.Jobs) != 1 || p.Jobs[0].Job != "eval" {
		t.Fatalf("jobs %+v, want only eval", p.Jobs)
	}
	n := p.Jobs[0].Placement.Nodes[0]
	if (n.Host == "a1" || n.Host == "a2") && n.GPUs[0] < 4 {
		t.Errorf("eval placed on the untargeted train's GPUs: %+v", n)
	}
}

// TestReasonCodesDocumented: docs/plan.md lists every reason code with its
// sentence.
func TestReasonCodesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/plan.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reconcile.ReasonCodes {
		row := fmt.Sprintf("| `%s` |", r.Code)
		if !bytes.Contains(doc, []byte(row)) {
			t.Errorf("docs/plan.md has no row %q", row)
		}
		if !bytes.Contains(doc, []byte(r.Sentence)) {
			t.Errorf("docs/plan.md does not say %q", r.Sentence)
		}
	}
}

// sameSet says a and b hold the same GPUs, whatever their order.
func sameSet(a, b []int) bool {
	return topology.DeviceSetOf(a...) == topology.DeviceSetOf(b...) && len(a) == len(b)
}

func assertGolden(t *testing.T, path string, got []byte) {
	t.Helper()
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
		t.Fatalf("%v (run go test ./reconcile -update)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestMarkdownKeepsMachineTextInert: what a machine reports (a host name
// of the configuration is safe, but errors and log lines are not) cannot
// add markup, links or HTML to a pull-request comment.
func TestMarkdownKeepsMachineTextInert(t *testing.T) {
	cfg := loadConfig(t, fleetHCL, trainHCL)
	st, doc := state.New(), fleetFacts()
	running(t, st, doc, cfg, "train", "r-train1", map[string][]int{"a1": {0, 1, 2, 3}, "a2": {0, 1, 2, 3}}, "a1", "a2")
	a2 := doc.Find("a2")
	*a2 = facts.Host{Name: "a2", Status: facts.StatusUnreachable, GPUs: []facts.GPU{},
		Error: "<img src=x onerror=alert(1)> [click](http://evil.example) | col | `code` **bold** \x1b[31m"}
	p := reconcile.MakePlan(input(cfg, st, doc))
	var md bytes.Buffer
	if err := planview.Markdown(&md, p); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	for _, bad := range []string{"<img", "](http", "**bold**", "`code`", "| col |", "\x1b"} {
		if strings.Contains(out, bad) {
			t.Errorf("markdown carries %q raw:\n%s", bad, out)
		}
	}
	if !strings.HasPrefix(out, planview.MarkdownMarker+"\n") {
		t.Error("no marker on the first line")
	}
}

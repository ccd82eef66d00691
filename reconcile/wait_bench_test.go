package reconcile_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/internal/threadcpu"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/planview"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// BenchmarkPlanWaits is BenchmarkPlan's whole offline plan (load the
// configuration and the facts from disk, plan, render) with waiting
// estimates: on its fleet (96 racks with whole free machines, most of 4),
// 20 running jobs of 5 whole machines, each in 5 racks, declare an
// expected_duration ending 2, 6, 10, ... 78 minutes after the plan, so
// that no rack has 4 free machines; 25 jobs of 4 whole machines under
// max_wait = "10m" can be placed now only by zone, and each plan
// estimates, for each of them, which rack frees first: 14 wait for the
// 14 racks of 4 the first 3 holders free, each for its own, and 11 are
// placed now.
func BenchmarkPlanWaits(b *testing.B) {
	const hosts = 500
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	// off is the same plan with max_wait left out: what the estimates add
	// is the difference. "whole" is the plan as BenchmarkPlan makes it
	// (configuration and facts read each time, text rendered);
	// "makeplan" MakePlan alone, on inputs read once, where the
	// difference stands out of less noise. proc-cpu-ns/op counts every
	// goroutine's CPU time (the facts read beside the configuration, the
	// configuration's parsers, the garbage collector), cpu-ns/op the
	// benchmark's own thread's.
	for _, part := range []string{"whole", "makeplan"} {
		for _, maxWait := range []string{"off", "10m"} {
			b.Run(fmt.Sprintf("hosts=%d/%s/max_wait=%s", hosts, part, maxWait), func(b *testing.B) {
				dir, factsPath := planBenchInputs(b, hosts, 0)
				st := waitBenchState(b, dir, factsPath, maxWait, now)
				wantWaits := map[string]int{"off": 0, "10m": 14}[maxWait]
				read := func() (*config.Config, *facts.Document) {
					// As BenchmarkPlan and `plan --facts` do: the facts
					// are read while the configuration loads.
					readFacts := facts.ReadFileAhead(factsPath)
					cfg, diags := config.Load(dir, config.LoadOptions{})
					if diags.HasErrors() {
						b.Fatal(diags.Error())
					}
					doc, err := readFacts()
					if err != nil {
						b.Fatal(err)
					}
					return cfg, doc
				}
				cfg, doc := read()
				b.ReportAllocs()
				threadcpu.ProcessLoop(b, func() {
					if part == "whole" {
						cfg, doc = read()
					}
					p := reconcile.MakePlan(reconcile.Input{Config: cfg, State: st, Facts: doc, Now: now,
						Refresh: reconcile.Refresh{Source: reconcile.RefreshFile, File: factsPath}})
					if part == "whole" {
						if err := planview.Text(io.Discard, p, planview.Options{}); err != nil {
							b.Fatal(err)
						}
					}
					// 3 holders free 15 racks within max_wait, 14 of
					// them of 4 machines or more.
					if p.Summary.Waiting != wantWaits || p.Summary.Launch != 25-wantWaits || p.Summary.NoOp != 20 {
						b.Fatalf("want %d waits, %d launches and 20 holders left running: %+v", wantWaits, 25-wantWaits, p.Summary)
					}
				})
			})
		}
	}
}

// waitBenchState writes the holders and the waiters into dir's
// configuration and returns the state that records the holders running.
func waitBenchState(b *testing.B, dir, factsPath, maxWait string, now time.Time) *state.State {
	b.Helper()
	doc, err := facts.ReadFile(factsPath)
	if err != nil {
		b.Fatal(err)
	}
	// Racks of whole free machines, by name, each machine once.
	racks := map[string][]*facts.Host{}
	var names []string
	for i := range doc.Hosts {
		h := &doc.Hosts[i]
		if len(h.FreeGPUs) != 8 {
			continue
		}
		g := h.Location.Region + "/" + h.Location.Zone + "/" + h.Location.NetworkGroup
		if racks[g] == nil {
			names = append(names, g)
		}
		racks[g] = append(racks[g], h)
	}
	slices.Sort(names)
	var src strings.Builder
	if maxWait == "off" {
		src.WriteString("policy \"close\" {\n}\n\n")
	} else {
		fmt.Fprintf(&src, "policy \"close\" {\n  max_wait = %q\n}\n\n", maxWait)
	}
	type node struct {
		h    *facts.Host
		rank int
	}
	held := map[string][]node{}
	var holders []string
	for k, g := range names {
		j := fmt.Sprintf("hold%02d", k/5%25)
		if !slices.Contains(holders, j) {
			holders = append(holders, j)
		}
		held[j] = append(held[j], node{racks[g][0], len(held[j])})
	}
	for k, j := range holders {
		// Launched an hour ago; expected ends 2 to 50 minutes from now.
		fmt.Fprintf(&src, "job %q {\n  nodes = %d\n  gpus_per_node = 8\n  command = [\"python\", \"hold.py\"]\n  expected_duration = %q\n}\n\n",
			j, len(held[j]), (time.Duration(62+4*k) * time.Minute).String())
	}
	for k := range 25 {
		fmt.Fprintf(&src, "job \"wait%02d\" {\n  policy = policy.close\n  nodes = 4\n  gpus_per_node = 8\n  command = [\"python\", \"train.py\"]\n}\n\n", k)
	}
	if err := os.WriteFile(filepath.Join(dir, "waits.hcl"), []byte(src.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	cfg, diags := config.Load(dir, config.LoadOptions{})
	if diags.HasErrors() {
		b.Fatal(diags.Error())
	}
	st := state.New()
	st.Lineage, st.Serial = "6f1d1a8e-7c39-4d4f-9a51-3a0d2b7c9e10", 4
	for _, cj := range cfg.Jobs {
		nodes, ok := held[cj.Name]
		if !ok {
			continue
		}
		spec := reconcile.JobSpec(cj, nil)
		j := state.Job{Name: cj.Name, Spec: spec, ConfigHash: spec.Hash(), Status: state.JobRunning, RunID: "r-" + cj.Name, LaunchedAt: now.Add(-time.Hour)}
		for _, n := range nodes {
			loc := n.h.Location
			j.Nodes = append(j.Nodes, state.Node{Rank: n.rank, Host: n.h.Name, Fleet: n.h.Fleet, Address: n.h.Address,
				GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, Location: state.Location{Region: loc.Region, Zone: loc.Zone, NetworkGroup: loc.NetworkGroup},
				Process: &state.Process{PID: 5000 + n.rank, RunID: j.RunID}})
		}
		st.SetJob(j)
	}
	return st
}

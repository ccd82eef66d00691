package reconcile_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/internal/threadcpu"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/plantest"
	"github.com/gpulayer/gpulayer/reconcile/planview"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// BenchmarkPlan is a whole offline plan, everything but the probe: load
// the configuration (N hosts in 4 regions of 2 zones, racks of 8, and 50
// jobs) while the facts document is read from disk (every host a DGX-1
// with 8 GPUs, a quarter of them half busy, its facts as full as a probe
// saves them), place, and render the human view (plantest.Write).
// proc-cpu-ns/op is the CPU time of the whole process per plan: the facts
// read and the configuration's parsers run on goroutines of their own.
func BenchmarkPlan(b *testing.B) {
	for _, hosts := range []int{500, 5000} {
		b.Run(fmt.Sprintf("hosts=%d", hosts), func(b *testing.B) {
			dir, factsPath := planBenchInputs(b, hosts, 50)
			b.ReportAllocs()
			threadcpu.ProcessLoop(b, func() {
				// As `plan --facts` does: the facts are read while the
				// configuration loads.
				readFacts := facts.ReadFileAhead(factsPath)
				cfg, diags := config.Load(dir, config.LoadOptions{})
				if diags.HasErrors() {
					b.Fatal(diags.Error())
				}
				doc, err := readFacts()
				if err != nil {
					b.Fatal(err)
				}
				p := reconcile.MakePlan(reconcile.Input{Config: cfg, State: state.New(), Facts: doc,
					Refresh: reconcile.Refresh{Source: reconcile.RefreshFile, File: factsPath}})
				if err := planview.Text(io.Discard, p, planview.Options{}); err != nil {
					b.Fatal(err)
				}
				if p.Summary.Launch == 0 {
					b.Fatalf("nothing placed: %+v", p.Summary)
				}
			})
		})
	}
}

// planBenchInputs writes a configuration of hosts and jobs and its facts
// document into a temporary directory.
func planBenchInputs(b testing.TB, hosts, jobs int) (dir, factsPath string) {
	b.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "topo", "dgx1-v100-8x-nv1-nv2-mlx5-driver440.txt"))
	if err != nil {
		b.Fatal(err)
	}
	in, err := plantest.Write(b.TempDir(), hosts, jobs, string(raw))
	if err != nil {
		b.Fatal(err)
	}
	return in.Dir, in.Facts
}

package reconcile_test

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/planview"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// BenchmarkPlan is a whole offline plan, everything but the probe: load
// the configuration (N hosts in 4 regions of 2 zones, racks of 8, and 50
// jobs), read the facts document from disk (every host a DGX-1 with 8
// GPUs, a quarter of them half busy), place, and render the human view.
func BenchmarkPlan(b *testing.B) {
	for _, hosts := range []int{500, 5000} {
		b.Run(fmt.Sprintf("hosts=%d", hosts), func(b *testing.B) {
			dir, factsPath := planBenchInputs(b, hosts, 50)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cfg, diags := config.Load(dir, config.LoadOptions{})
				if diags.HasErrors() {
					b.Fatal(diags.Error())
				}
				doc, err := facts.ReadFile(factsPath)
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
			}
		})
	}
}

// planBenchInputs writes a configuration of hosts and jobs and its facts
// document into a temporary directory.
func planBenchInputs(b *testing.B, hosts, jobs int) (dir, factsPath string) {
	b.Helper()
	dir = b.TempDir()
	var cfg strings.Builder
	doc := facts.Document{Version: facts.Version}
	regions := []string{"europe-west1", "europe-west4", "us-central1", "us-east1"}
	for r, region := range regions {
		fmt.Fprintf(&cfg, "fleet %q {\n  region = %q\n", region, region)
		for i := r; i < hosts; i += len(regions) {
			name := fmt.Sprintf("h%05d", i)
			zone := fmt.Sprintf("%s-%c", region, 'b'+rune(i/len(regions)%2))
			rack := fmt.Sprintf("%s-rack%d", zone, i/(8*len(regions)))
			fmt.Fprintf(&cfg, "  host %q {\n    address       = \"10.%d.%d.%d\"\n    zone          = %q\n    network_group = %q\n  }\n",
				name, r, i/250, i%250+1, zone, rack)
			h := machine(name, rack)
			h.Fleet, h.Location = region, facts.Location{Region: region, Zone: zone, NetworkGroup: rack, Source: facts.SourceHost}
			if i%4 == 0 {
				for g := 0; g < 4; g++ {
					h.GPUs[g].Processes = []facts.Process{{PID: 100 + g, UsedMemoryMiB: 1000}}
				}
			}
			doc.Hosts = append(doc.Hosts, h)
		}
		cfg.WriteString("}\n\n")
	}
	localities := []string{"prefer", "network_group", "zone", "region", "any"}
	for _, l := range localities {
		fmt.Fprintf(&cfg, "policy %q {\n  group_locality = %q\n}\n\n", l, l)
	}
	for j := 0; j < jobs; j++ {
		nodes, gpus := 1+j%8, []int{1, 2, 4, 8}[j%4]
		fmt.Fprintf(&cfg, "job \"job%02d\" {\n  policy        = policy.%s\n  nodes         = %d\n  gpus_per_node = %d\n  command       = [\"python\", \"train.py\"]\n}\n\n",
			j, localities[j%len(localities)], nodes, gpus)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(cfg.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	finish(&doc)
	data, err := json.Marshal(&doc)
	if err != nil {
		b.Fatal(err)
	}
	factsPath = filepath.Join(b.TempDir(), "facts.json")
	if err := os.WriteFile(factsPath, data, 0o644); err != nil {
		b.Fatal(err)
	}
	return dir, factsPath
}

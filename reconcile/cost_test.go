package reconcile_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/placement"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/planview"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/topology"
)

// wideHCL is a job of three whole DGX-1s under prefer: rack-3 has three
// machines, so it is the tighter option whenever all three are free.
const wideHCL = `
job "wide" {
  nodes         = 3
  gpus_per_node = 8
  launcher      = "plain"
  command       = ["python", "train.py"]
}
`

// The fleet with a link_bandwidth block: its zone measured slower than
// the default.
const fleetBandwidthHCL = `
fleet "lab" {
  region        = "paris"
  zone          = "paris-1"
  network_group = "rack-3"
  link_bandwidth {
    zone          = "25Gbps"
    nvlink_domain = "1.8TB/s"
  }
  host "a1" { address = "10.1.0.11" }
  host "a2" { address = "10.1.0.12" }
  host "a3" { address = "10.1.0.13:2222" }
  host "b1" {
    address       = "10.1.0.21"
    network_group = "rack-4"
  }
}
`

// nvlFabric registers every GPU of h with clique of the cluster.
func nvlFabric(h *facts.Host, clique uint32, state string) {
	for i := range h.GPUs {
		h.GPUs[i].Fabric = &topology.GPUFabric{Index: i, State: state, Status: topology.FabricSuccess, CliqueID: clique,
			ClusterUUID: "9f3c21ab-5e0d-4c1b-8a7e-2f6d0c9b1e44"}
	}
	if state == topology.FabricCompleted {
		h.NVLinkDomain, _ = topology.NVLinkDomain(fabricsOf(h))
	}
}

func fabricsOf(h *facts.Host) []topology.GPUFabric {
	var out []topology.GPUFabric
	for _, g := range h.GPUs {
		out = append(out, *g.Fabric)
	}
	return out
}

var costCases = []planCase{
	{
		// eval, running on a1, keeps rack-3 from holding wide: the plan
		// says so, and that its zone link is the fleet's 25 Gb/s.
		name: "cost-passed-over",
		build: func(t *testing.T) reconcile.Input {
			cfg := loadConfig(t, fleetBandwidthHCL, wideHCL, evalHCL)
			st, doc := state.New(), fleetFacts()
			running(t, st, doc, cfg, "eval", "run-eval", map[string][]int{"a1": {0}}, "a1")
			return input(cfg, st, doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			c := action(t, p, "wide", reconcile.ActionCreate, reconcile.ReasonNewJob)
			cost := c.Placement.Cost
			if cost == nil || cost.Between == nil || cost.Between.Level != placement.LevelZone || cost.Between.Fleet != "lab" ||
				cost.Between.Bandwidth.BitsPerSecond != 25e9 || cost.Slowest != "between_nodes" {
				t.Fatalf("cost %+v, want between nodes inside one zone at lab's 25 Gb/s, the slowest", cost)
			}
			// rack-3 first, the closer; then rack-4, which is too small.
			if len(cost.Rejected) != 2 || cost.Rejected[1].Eligible != 1 || cost.Rejected[0].Location.NetworkGroup != "rack-3" || cost.Rejected[0].Free != 2 ||
				len(cost.Rejected[0].HeldBy) != 1 || cost.Rejected[0].HeldBy[0].Job != "eval" || cost.Rejected[0].HeldBy[0].Hosts[0] != "a1" {
				t.Errorf("rejected %+v, want rack-3 with 2 of 3 free, eval holding a1, then rack-4", cost.Rejected)
			}
		},
	},
	{
		// a1 and a2 have completed their registration with clique 7,
		// a3 is still registering and b1 claims the domain in its facts
		// with no GPU registered: only a1 and a2 are in it.
		name: "cost-nvlink-domain",
		build: func(t *testing.T) reconcile.Input {
			cfg := loadConfig(t, fleetBandwidthHCL, `
job "pair" {
  nodes         = 2
  gpus_per_node = 8
  launcher      = "plain"
  command       = ["python", "train.py"]
}
job "trio" {
  nodes         = 3
  gpus_per_node = 8
  launcher      = "plain"
  command       = ["python", "train.py"]
}`)
			doc := fleetFacts()
			nvlFabric(&doc.Hosts[0], 7, topology.FabricCompleted)
			nvlFabric(&doc.Hosts[1], 7, topology.FabricCompleted)
			nvlFabric(&doc.Hosts[2], 7, topology.FabricInProgress)
			doc.Hosts[3].NVLinkDomain = doc.Hosts[0].NVLinkDomain
			return input(cfg, state.New(), doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			pair := action(t, p, "pair", reconcile.ActionCreate, reconcile.ReasonNewJob)
			if pair.Placement.Level != placement.LevelNVLinkDomain || pair.Placement.Nodes[0].Host != "a1" || pair.Placement.Nodes[1].Host != "a2" {
				t.Errorf("pair: %+v, want a1 a2 in their NVLink domain", pair.Placement)
			}
			if b := pair.Placement.Cost.Between; b == nil || b.Level != placement.LevelNVLinkDomain || b.Bandwidth.String() != "1.8 TB/s" {
				t.Errorf("pair: between %+v, want the fleet's 1.8 TB/s inside the domain", b)
			}
			// trio cannot have the domain, so it passes it over; pair
			// was placed before it.
			trio := p.Job("trio")
			if trio.Action != reconcile.ActionWaiting {
				t.Fatalf("trio: %s, want waiting (pair holds a1, a2)", trio.Action)
			}
		},
	},
	{
		// a3 runs another torch version: rack-3 has 2 of the 3 machines
		// wide needs with one version, and the plan says why not a3.
		name: "cost-incompatible",
		build: func(t *testing.T) reconcile.Input {
			cfg := loadConfig(t, fleetHCL, wideHCL)
			doc := fleetFacts()
			doc.Hosts[2].TorchVersion = "2.4.0"
			return input(cfg, state.New(), doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			c := action(t, p, "wide", reconcile.ActionCreate, reconcile.ReasonNewJob)
			r := c.Placement.Cost.Rejected
			if len(r) != 2 || r[0].Location.NetworkGroup != "rack-3" || r[0].Free != 2 ||
				len(r[0].Incompatible) != 1 || r[0].Incompatible[0] != (placement.Exclusion{Reason: placement.ReasonTorchVersion, Workers: 1}) {
				t.Errorf("rejected %+v, want rack-3 once, 2 free and 1 more with another torch version", r)
			}
		},
	},
	{
		// A machine whose GPU model names no known generation: the
		// estimate says so rather than guess.
		name: "cost-unknown-generation",
		build: func(t *testing.T) reconcile.Input {
			cfg := loadConfig(t, fleetHCL, trainHCL)
			doc := fleetFacts()
			for i := range doc.Hosts {
				for g := range doc.Hosts[i].GPUs {
					doc.Hosts[i].GPUs[g].Name = "Acme Tensor 9000"
				}
			}
			return input(cfg, state.New(), doc)
		},
		check: func(t *testing.T, p *reconcile.Plan) {
			c := action(t, p, "train", reconcile.ActionCreate, reconcile.ReasonNewJob)
			if in := c.Placement.Cost.Inside; in == nil || in.Bandwidth != nil || in.Over != "" || in.Link == "" || c.Placement.Cost.Slowest != "" {
				t.Errorf("inside %+v, slowest %q: want a link with no bandwidth and no slowest", in, c.Placement.Cost.Slowest)
			}
		},
	},
}

// TestPlanCostCases: what a placement costs, and the tighter options it
// passed over, in the plan's three renderings (goldens under
// testdata/plan/cost-*).
func TestPlanCostCases(t *testing.T) {
	for _, tc := range costCases {
		t.Run(tc.name, func(t *testing.T) {
			p := reconcile.MakePlan(tc.build(t))
			tc.check(t, p)
			noSharedGPU(t, p)
			var text, js, md bytes.Buffer
			if err := planview.Text(&text, p, planview.Options{}); err != nil {
				t.Fatal(err)
			}
			enc := json.NewEncoder(&js)
			enc.SetIndent("", "  ")
			if err := enc.Encode(p); err != nil {
				t.Fatal(err)
			}
			if err := planview.Markdown(&md, p); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(text.String(), "9f3c21ab-5e0d") {
				t.Error("the plan's text prints a whole NVLink domain id")
			}
			assertGolden(t, filepath.Join("testdata", "plan", tc.name+".txt"), text.Bytes())
			assertGolden(t, filepath.Join("testdata", "plan", tc.name+".md"), md.Bytes())
			assertGolden(t, filepath.Join("testdata", "plan", tc.name+".json"), js.Bytes())
		})
	}
}

// TestPassedOverNamesWhatHoldsItsMachines: of rack-3's four machines, a1
// runs processes gpulayer did not start, another configuration claims a
// GPU of a2, and alpha, placed earlier in this plan, takes one more; wide
// passes rack-3 over for the zone, and the plan names each holder, and not
// the machine that stays free.
func TestPassedOverNamesWhatHoldsItsMachines(t *testing.T) {
	cfg := loadConfig(t, `
fleet "lab" {
  region        = "paris"
  zone          = "paris-1"
  network_group = "rack-3"
  host "a1" { address = "10.1.0.11" }
  host "a2" { address = "10.1.0.12" }
  host "a3" { address = "10.1.0.13" }
  host "a4" { address = "10.1.0.14" }
  host "b1" {
    address       = "10.1.0.21"
    network_group = "rack-4"
  }
  host "b2" {
    address       = "10.1.0.22"
    network_group = "rack-4"
  }
}
job "alpha" {
  nodes         = 1
  gpus_per_node = 8
  launcher      = "plain"
  command       = ["python", "train.py"]
}`, wideHCL)
	doc := &facts.Document{Version: facts.Version, Hosts: []facts.Host{
		machine("a1", "rack-3"), machine("a2", "rack-3"), machine("a3", "rack-3"), machine("a4", "rack-3"),
		machine("b1", "rack-4"), machine("b2", "rack-4"),
	}}
	occupy(&doc.Hosts[0], 777)
	doc.Hosts[1].GPUs[0].Claim = &facts.Claim{Lineage: "0bf1c6a2-0000-4000-8000-000000000001", Job: "other", RunID: "r1", PID: 99}
	p := reconcile.MakePlan(input(cfg, state.New(), doc))
	alpha := action(t, p, "alpha", reconcile.ActionCreate, reconcile.ReasonNewJob)
	wide := action(t, p, "wide", reconcile.ActionCreate, reconcile.ReasonNewJob)
	took := alpha.Placement.Nodes[0].Host
	var rack3 *reconcile.RejectedOption
	for i, r := range wide.Placement.Cost.Rejected {
		if r.Location.NetworkGroup == "rack-3" {
			rack3 = &wide.Placement.Cost.Rejected[i]
		}
	}
	if wide.Placement.Level != placement.LevelZone || rack3 == nil || rack3.Free != 1 || rack3.Eligible != 4 {
		t.Fatalf("wide at %s, rejected %+v; want zone, passing over rack-3 with 1 of 4 free", wide.Placement.Level, wide.Placement.Cost.Rejected)
	}
	want := []reconcile.Holder{
		{Kind: reconcile.HolderProcesses, Hosts: []string{"a1"}},
		{Kind: reconcile.HolderOtherState, Hosts: []string{"a2"}},
		{Kind: reconcile.HolderJob, Job: "alpha", Hosts: []string{took}},
	}
	if fmt.Sprint(rack3.HeldBy) != fmt.Sprint(want) {
		t.Errorf("held by %+v, want %+v", rack3.HeldBy, want)
	}
	var text bytes.Buffer
	if err := planview.Text(&text, p, planview.Options{}); err != nil {
		t.Fatal(err)
	}
	line := `passed over network group rack-3: 1 of 3 machines free; processes gpulayer did not start use GPUs of a1; another configuration's job holds GPUs of a2; job "alpha" holds ` + took
	if !strings.Contains(text.String(), line) {
		t.Errorf("the plan does not say\n%s\n%s", line, text.String())
	}
}

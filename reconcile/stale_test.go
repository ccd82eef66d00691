package reconcile_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/placement"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/topology"
)

// TestStaleReasonsIgnoreTheGPUsOfCPUOnlyNodes: a saved plan that puts the
// CPU-only job prep on a1 and a2 and the GPU job eval on b1 is stale when
// b1's GPU or links change, or a CPU-only node's host is gone or moved,
// and not when a1's and a2's GPUs are taken or their links change: prep
// uses neither.
func TestStaleReasonsIgnoreTheGPUsOfCPUOnlyNodes(t *testing.T) {
	cfg := loadConfig(t, fleetHCL, evalHCL, prepHCL)
	planned := finish(fleetFacts())
	p := reconcile.MakePlan(input(cfg, state.New(), planned))
	hostsOf := func(job string) []string {
		var hs []string
		for _, n := range p.Job(job).Placement.Nodes {
			hs = append(hs, n.Host)
		}
		return hs
	}
	if got := hostsOf("prep"); !slices.Equal(got, []string{"a1", "a2"}) {
		t.Fatalf("prep planned on %v, want [a1 a2]", got)
	}
	if got := hostsOf("eval"); !slices.Equal(got, []string{"b1"}) {
		t.Fatalf("eval planned on %v, want [b1]", got)
	}
	for _, tt := range []struct {
		name   string
		change func(doc *facts.Document)
		want   []string // each a part of one reason, in order
	}{
		{"nothing changed", func(*facts.Document) {}, nil},
		{"CPU-only hosts' GPUs taken, links changed", func(doc *facts.Document) {
			occupy(doc.Find("a1"), 7001)
			occupy(doc.Find("a2"), 7002)
			doc.Find("a1").Topology = nil
		}, nil},
		{"the GPU job's GPU taken, its links changed", func(doc *facts.Document) {
			occupy(doc.Find("b1"), 7003)
			doc.Find("b1").Topology = nil
		}, []string{"host b1 now reports other GPU links", `GPU 0 of host b1, planned for job "eval", is now used by pid 7003`}},
		{"a CPU-only node's host unreachable", func(doc *facts.Document) {
			*doc.Find("a2") = facts.Host{Name: "a2", Status: facts.StatusUnreachable, Error: "no route to host", GPUs: []facts.GPU{}}
		}, []string{"host a2 could not be probed: no route to host"}},
		{"a CPU-only node's host moved", func(doc *facts.Document) {
			doc.Find("a1").Location.NetworkGroup = "rack-9"
		}, []string{`host a1 now reports location "paris/paris-1/rack-9", not "paris/paris-1/rack-3"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now := fleetFacts()
			tt.change(now)
			got := p.StaleReasons(planned, finish(now))
			ok := len(got) == len(tt.want)
			for i := 0; ok && i < len(got); i++ {
				ok = strings.Contains(got[i], tt.want[i])
			}
			if !ok {
				t.Errorf("stale reasons %q, want %q", got, tt.want)
			}
		})
	}
}

// TestStaleReasonsSeeANodesNVLinkDomainChange: a saved plan that put the
// two-node job pair in a1's and a2's NVLink domain is stale when either
// host left the domain (its fabric registration no longer completed) or
// joined another clique, since the plan's level and link cost rest on
// it; a host the plan does not launch on changing its domain leaves the
// plan as it is.
func TestStaleReasonsSeeANodesNVLinkDomainChange(t *testing.T) {
	cfg := loadConfig(t, fleetHCL, `
job "pair" {
  nodes         = 2
  gpus_per_node = 8
  launcher      = "plain"
  command       = ["python", "train.py"]
}`)
	inDomain := func() *facts.Document {
		doc := fleetFacts()
		nvlFabric(&doc.Hosts[0], 7, topology.FabricCompleted)
		nvlFabric(&doc.Hosts[1], 7, topology.FabricCompleted)
		nvlFabric(&doc.Hosts[2], 8, topology.FabricCompleted)
		return finish(doc)
	}
	planned := inDomain()
	p := reconcile.MakePlan(input(cfg, state.New(), planned))
	pair := p.Job("pair")
	if pair.Placement == nil || pair.Placement.Level != placement.LevelNVLinkDomain {
		t.Fatalf("pair placed %+v, want both nodes in one NVLink domain", pair.Placement)
	}
	for _, tt := range []struct {
		name   string
		change func(doc *facts.Document)
		want   []string
	}{
		{"nothing changed", func(*facts.Document) {}, nil},
		{"a host outside the plan changed clique", func(doc *facts.Document) {
			nvlFabric(&doc.Hosts[2], 9, topology.FabricCompleted)
		}, nil},
		{"a node's host left the domain", func(doc *facts.Document) {
			nvlFabric(&doc.Hosts[1], 7, topology.FabricInProgress)
		}, []string{"host a2 now reports no NVLink domain, not"}},
		{"a node's host joined another clique", func(doc *facts.Document) {
			nvlFabric(&doc.Hosts[0], 8, topology.FabricCompleted)
		}, []string{"host a1 now reports NVLink domain"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now := inDomain()
			tt.change(now)
			got := p.StaleReasons(planned, now)
			ok := len(got) == len(tt.want)
			for i := 0; ok && i < len(got); i++ {
				ok = strings.Contains(got[i], tt.want[i])
			}
			if !ok {
				t.Errorf("stale reasons %q, want %q", got, tt.want)
			}
		})
	}
}

package gcp_test

import (
	"reflect"
	"testing"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/providers/gcp"
	"github.com/gpulayer/gpulayer/providers/gcp/gcptest"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// topologyOf is where the fake says machine name runs, when it says.
func topologyOf(i int, name string) *gcptest.PhysicalTopology {
	return &gcptest.PhysicalTopology{Cluster: "cl-a", Block: "blk-7", SubBlock: "sb-2", Host: "h-" + name}
}

// TestCreateRecordsPhysicalTopologyOnlyWhereComputeReportsIt: Compute
// Engine reports where a machine runs for A3 High (8 GPUs), A3 Mega and
// Ultra, A4, A4X and H4D machines, and for machines in a compact placement
// policy; for others the record has none.
func TestCreateRecordsPhysicalTopologyOnlyWhereComputeReportsIt(t *testing.T) {
	for _, tc := range []struct {
		machineType, placement string
		reported               bool
	}{
		{"a2-highgpu-1g", "", false},
		{"a3-highgpu-4g", "", false},
		{"g2-standard-48", config.GCPPlacementSpread, false},
		{"a3-highgpu-8g", "", true},
		{"a3-megagpu-8g", "", true},
		{"a3-ultragpu-8g", "", true},
		{"a4-highgpu-8g", "", true},
		{"a4x-highgpu-4g", "", true},
		{"h4d-highmem-192-lssd", "", true},
		{"a2-highgpu-1g", config.GCPPlacementCompact, true},
	} {
		t.Run(tc.machineType+"/"+tc.placement, func(t *testing.T) {
			srv := gcptest.Start(t)
			srv.Physical = topologyOf
			p := newProvider(t, gcp.Options{})
			fleet := fleetAt(srv.URL)
			fleet.GCP.MachineType, fleet.GCP.Placement = tc.machineType, tc.placement

			m, err := p.Create(bounded(t), fleet, "trainers-0", lineage)
			if err != nil {
				t.Fatal(err)
			}

			var want *state.PhysicalHost
			if tc.reported {
				want = &state.PhysicalHost{Cluster: "cl-a", Block: "blk-7", SubBlock: "sb-2", Host: "h-trainers-0"}
			}
			if !reflect.DeepEqual(m.Physical, want) {
				t.Errorf("physical = %+v, want %+v", m.Physical, want)
			}
		})
	}
}

// TestListRecordsATopologyThatAppearsAfterCreate: a machine Compute Engine
// did not place at insert is listed with its topology once it reports one,
// so the refresh that lists it records it; with physicalHost alone (older
// API versions), the documented block/sub-block/host is read.
func TestListRecordsATopologyThatAppearsAfterCreate(t *testing.T) {
	srv := gcptest.Start(t)
	p := newProvider(t, gcp.Options{})
	ctx := bounded(t)
	fleet := fleetAt(srv.URL)
	for _, name := range []string{"trainers-0", "trainers-1"} {
		m, err := p.Create(ctx, fleet, name, lineage)
		if err != nil {
			t.Fatal(err)
		}
		if m.Physical != nil {
			t.Fatalf("%s: created with topology %+v, want none yet", name, m.Physical)
		}
	}

	srv.SetPhysical("trainers-0", topologyOf(0, "trainers-0"))
	srv.SetPhysical("trainers-1", &gcptest.PhysicalTopology{Block: "blk-7", SubBlock: "sb-3", Host: "h-9", OnlyPhysicalHost: true})
	got, err := p.List(ctx, fleet, lineage)
	if err != nil {
		t.Fatal(err)
	}

	want := map[string]*state.PhysicalHost{
		"trainers-0": {Cluster: "cl-a", Block: "blk-7", SubBlock: "sb-2", Host: "h-trainers-0"},
		"trainers-1": {Block: "blk-7", SubBlock: "sb-3", Host: "h-9"},
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d machines, want %d", len(got), len(want))
	}
	for _, m := range got {
		if !reflect.DeepEqual(m.Physical, want[m.Name]) {
			t.Errorf("%s: physical = %+v, want %+v", m.Name, m.Physical, want[m.Name])
		}
	}
	m, _, err := p.Describe(ctx, fleet, "trainers-0")
	if err != nil || !reflect.DeepEqual(m.Physical, want["trainers-0"]) {
		t.Errorf("Describe: physical = %+v (%v), want %+v", m.Physical, err, want["trainers-0"])
	}
}

// TestATopologyReportedAfterTheInsertIsDescribedThen: an A3 machine whose
// topology Compute Engine reports only after its first read is created
// without one, and described with it the next time.
func TestATopologyReportedAfterTheInsertIsDescribedThen(t *testing.T) {
	srv := gcptest.Start(t)
	srv.Physical, srv.PhysicalReads = topologyOf, 1
	p := newProvider(t, gcp.Options{})
	ctx := bounded(t)
	fleet := fleetAt(srv.URL)
	fleet.GCP.MachineType = "a3-highgpu-8g"

	m, err := p.Create(ctx, fleet, "trainers-0", lineage)
	if err != nil || m.Physical != nil {
		t.Fatalf("Create = %+v, %v; want no topology yet", m.Physical, err)
	}
	m, _, err = p.Describe(ctx, fleet, "trainers-0")
	if want := (&state.PhysicalHost{Cluster: "cl-a", Block: "blk-7", SubBlock: "sb-2", Host: "h-trainers-0"}); err != nil || !reflect.DeepEqual(m.Physical, want) {
		t.Errorf("Describe: physical = %+v (%v), want %+v", m.Physical, err, want)
	}
}

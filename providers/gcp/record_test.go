package gcp

import (
	"reflect"
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"

	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

func TestPhysicalPrefersTopologyAndFallsBackToPhysicalHost(t *testing.T) {
	for _, tc := range []struct {
		name string
		rs   *computepb.ResourceStatus
		want *state.PhysicalHost
	}{
		{"none", nil, nil},
		{"topology", &computepb.ResourceStatus{
			PhysicalHost: proto.String("/b0/s0/h0"),
			PhysicalHostTopology: &computepb.ResourceStatusPhysicalHostTopology{
				Cluster: proto.String("c1"), Block: proto.String("b1"), Subblock: proto.String("s1"), Host: proto.String("h1"),
			},
		}, &state.PhysicalHost{Cluster: "c1", Block: "b1", SubBlock: "s1", Host: "h1"}},
		{"physical host", &computepb.ResourceStatus{PhysicalHost: proto.String("/b0/s0/h0")}, &state.PhysicalHost{Block: "b0", SubBlock: "s0", Host: "h0"}},
		{"empty topology", &computepb.ResourceStatus{
			PhysicalHost:         proto.String("/b0/s0/h0"),
			PhysicalHostTopology: &computepb.ResourceStatusPhysicalHostTopology{},
		}, &state.PhysicalHost{Block: "b0", SubBlock: "s0", Host: "h0"}},
		{"malformed", &computepb.ResourceStatus{PhysicalHost: proto.String("/b0//h0")}, nil},
		{"topology from the network", &computepb.ResourceStatus{PhysicalHostTopology: &computepb.ResourceStatusPhysicalHostTopology{
			Cluster: proto.String("c1\x1b[2J"), Block: proto.String("b1\n"), Host: proto.String("h1"),
		}}, &state.PhysicalHost{Cluster: "c1[2J", Block: "b1", Host: "h1"}},
	} {
		if got := physical(tc.rs); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: physical = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestPhysicalHostReadsTheDocumentedBlockSubBlockHost: the API documents
// physicalHost as "blockId/subBlockId/hostId", and gcloud prints it with a
// leading slash ("/CCCCCCC/BBBBBB/AAAA" in Google's examples); the host is
// the last segment whatever their number, and a form that is not one of
// those is not guessed at.
func TestPhysicalHostReadsTheDocumentedBlockSubBlockHost(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want *state.PhysicalHost
	}{
		{"blockId/subBlockId/hostId", &state.PhysicalHost{Block: "blockId", SubBlock: "subBlockId", Host: "hostId"}},
		{"/CCCCCCC/BBBBBB/AAAA", &state.PhysicalHost{Block: "CCCCCCC", SubBlock: "BBBBBB", Host: "AAAA"}},
		{"/7f3c1b2a9e/4d0a/1b9e2c7d/", &state.PhysicalHost{Block: "7f3c1b2a9e", SubBlock: "4d0a", Host: "1b9e2c7d"}},
		{"/cluster-a/blk-7/sb-2/h-9", &state.PhysicalHost{Cluster: "cluster-a", Block: "blk-7", SubBlock: "sb-2", Host: "h-9"}},
		{"/blk-7/h-9", &state.PhysicalHost{Block: "blk-7", Host: "h-9"}},
		{"a1b2c3d4e5f6", &state.PhysicalHost{Host: "a1b2c3d4e5f6"}},
		{"", nil},
		{"/", nil},
		{"/a/b/c/d/e", nil},
		{"/a//c", nil},
		{"/a/\x00\x1b/c", nil},
		{"/blk\x1b[31m/sb/h", &state.PhysicalHost{Block: "blk[31m", SubBlock: "sb", Host: "h"}},
	} {
		if got := physicalHost(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("physicalHost(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// TestPhysicalHostKeepsTheNetworkGroupOfEarlierRecords: records made when
// physicalHost was read as /CLUSTER/BLOCK/HOST hold the same two IDs
// above the host, so a machine's network group does not change (and its
// jobs do not move) when the listing records it by the documented form.
func TestPhysicalHostKeepsTheNetworkGroupOfEarlierRecords(t *testing.T) {
	earlier := &state.PhysicalHost{Cluster: "CCCCCCC", Block: "BBBBBB", Host: "AAAA"}
	now := physical(&computepb.ResourceStatus{PhysicalHost: proto.String("/CCCCCCC/BBBBBB/AAAA")})
	if a, b := reconcile.PhysicalGroup(earlier), reconcile.PhysicalGroup(now); a != b || a != "CCCCCCC/BBBBBB" {
		t.Errorf("network group of the earlier record %q, of the documented reading %q; want both CCCCCCC/BBBBBB", a, b)
	}
}

func TestRegionIsZoneWithoutItsLetter(t *testing.T) {
	for zone, want := range map[string]string{
		"us-central1-a":             "us-central1",
		"northamerica-northeast2-c": "northamerica-northeast2",
		"europe-west4-b":            "europe-west4",
	} {
		if got := region(zone); got != want {
			t.Errorf("region(%q) = %q, want %q", zone, got, want)
		}
	}
}

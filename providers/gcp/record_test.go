package gcp

import (
	"reflect"
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"

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
			PhysicalHost: proto.String("/c0/b0/h0"),
			PhysicalHostTopology: &computepb.ResourceStatusPhysicalHostTopology{
				Cluster: proto.String("c1"), Block: proto.String("b1"), Subblock: proto.String("s1"), Host: proto.String("h1"),
			},
		}, &state.PhysicalHost{Cluster: "c1", Block: "b1", SubBlock: "s1", Host: "h1"}},
		{"physical host", &computepb.ResourceStatus{PhysicalHost: proto.String("/c0/b0/h0")}, &state.PhysicalHost{Cluster: "c0", Block: "b0", Host: "h0"}},
		{"empty topology", &computepb.ResourceStatus{
			PhysicalHost:         proto.String("/c0/b0/h0"),
			PhysicalHostTopology: &computepb.ResourceStatusPhysicalHostTopology{},
		}, &state.PhysicalHost{Cluster: "c0", Block: "b0", Host: "h0"}},
		{"malformed", &computepb.ResourceStatus{PhysicalHost: proto.String("/c0//h0")}, nil},
	} {
		if got := physical(tc.rs); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: physical = %+v, want %+v", tc.name, got, tc.want)
		}
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

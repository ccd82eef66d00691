package gcp

import (
	"fmt"
	"sort"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"

	"github.com/gpulayer/gpulayer/config"
)

// cloudPlatformScope lets a machine's service account call any API its IAM
// roles allow: roles, not scopes, are what GCP recommends to restrict.
const cloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform"

// guestAttributesKey makes the guest agent publish the machine's SSH host
// keys as guest attributes (hostkeys/), which gpulayer pins.
const guestAttributesKey = "enable-guest-attributes"

// instance is the resource that creates machine name of fleet; policy is
// the resource policy's URL, or "".
func instance(fleet *config.Fleet, name, lineage, policy string) *computepb.Instance {
	g := fleet.GCP
	boot := &computepb.AttachedDiskInitializeParams{SourceImage: proto.String(g.Image)}
	if g.DiskSizeGB > 0 {
		boot.DiskSizeGb = proto.Int64(int64(g.DiskSizeGB))
	}
	// GPUs cannot move with a live migration: the machine stops for host
	// maintenance instead.
	sched := &computepb.Scheduling{OnHostMaintenance: proto.String("TERMINATE")}
	if g.Spot {
		// STOP, not DELETE: a preempted machine stays in state as
		// TERMINATED and can be started or replaced by the next apply.
		sched.ProvisioningModel = proto.String("SPOT")
		sched.InstanceTerminationAction = proto.String("STOP")
	}
	nic := &computepb.NetworkInterface{
		AccessConfigs: []*computepb.AccessConfig{{
			Name: proto.String("External NAT"),
			Type: proto.String("ONE_TO_ONE_NAT"),
		}},
	}
	if g.Network != "" {
		nic.Network = proto.String(g.Network)
	}
	if g.Subnetwork != "" {
		nic.Subnetwork = proto.String(g.Subnetwork)
	}
	inst := &computepb.Instance{
		Name:        proto.String(name),
		MachineType: proto.String(fmt.Sprintf("zones/%s/machineTypes/%s", g.Zone, g.MachineType)),
		Disks: []*computepb.AttachedDisk{{
			Boot:             proto.Bool(true),
			AutoDelete:       proto.Bool(true),
			InitializeParams: boot,
		}},
		Scheduling:        sched,
		NetworkInterfaces: []*computepb.NetworkInterface{nic},
		Metadata:          &computepb.Metadata{Items: metadata(g.Metadata)},
		Labels:            labels(g.Labels, fleet.Name, lineage),
	}
	if g.AcceleratorType != "" && g.AcceleratorCount > 0 {
		inst.GuestAccelerators = []*computepb.AcceleratorConfig{{
			AcceleratorType:  proto.String(fmt.Sprintf("zones/%s/acceleratorTypes/%s", g.Zone, g.AcceleratorType)),
			AcceleratorCount: proto.Int32(int32(g.AcceleratorCount)),
		}}
	}
	if g.ServiceAccount != "" {
		inst.ServiceAccounts = []*computepb.ServiceAccount{{
			Email:  proto.String(g.ServiceAccount),
			Scopes: []string{cloudPlatformScope},
		}}
	}
	if len(g.Tags) > 0 {
		inst.Tags = &computepb.Tags{Items: append([]string(nil), g.Tags...)}
	}
	if policy != "" {
		inst.ResourcePolicies = []string{policy}
	}
	return inst
}

// metadata is the block's metadata plus the key that publishes host keys,
// sorted so that the same block sends the same request.
func metadata(m map[string]string) []*computepb.Items {
	keys := make([]string, 0, len(m)+1)
	for k := range m {
		if k != guestAttributesKey {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	items := make([]*computepb.Items, 0, len(keys)+1)
	for _, k := range keys {
		items = append(items, &computepb.Items{Key: proto.String(k), Value: proto.String(m[k])})
	}
	return append(items, &computepb.Items{Key: proto.String(guestAttributesKey), Value: proto.String("TRUE")})
}

// labels is the block's labels plus the two that List finds machines by.
func labels(block map[string]string, fleet, lineage string) map[string]string {
	out := make(map[string]string, len(block)+2)
	for k, v := range block {
		out[k] = v
	}
	out[config.GCPLabelFleet] = fleet
	out[config.GCPLabelLineage] = lineage
	return out
}

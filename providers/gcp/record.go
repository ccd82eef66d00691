package gcp

import (
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"

	"github.com/gpulayer/gpulayer/reconcile/state"
)

// ProviderName is the Provider field of the machines this package records.
const ProviderName = "gcp"

// record is state's account of an instance. Zone comes from the instance
// (a URL) when it says, else from the fleet.
func record(fleet, zone string, inst *computepb.Instance) state.Machine {
	if z := lastSegment(inst.GetZone()); z != "" {
		zone = z
	}
	m := state.Machine{
		Fleet:    fleet,
		Name:     inst.GetName(),
		Provider: ProviderName,
		Zone:     zone,
		Region:   region(zone),
		Status:   inst.GetStatus(),
		Physical: physical(inst.GetResourceStatus()),
	}
	if inst.Id != nil {
		m.ID = strconv.FormatUint(inst.GetId(), 10)
	}
	if nics := inst.GetNetworkInterfaces(); len(nics) > 0 {
		m.InternalIP = nics[0].GetNetworkIP()
		if acs := nics[0].GetAccessConfigs(); len(acs) > 0 {
			m.ExternalIP = acs[0].GetNatIP()
		}
	}
	if t, err := time.Parse(time.RFC3339, inst.GetCreationTimestamp()); err == nil {
		m.CreatedAt = t.UTC()
	}
	s := inst.GetScheduling()
	m.Spot = s.GetProvisioningModel() == "SPOT" || s.GetPreemptible()
	return m
}

// physical is where the instance runs, or nil when Compute Engine does not
// say: it reports it only for some machine types (A3 High, Mega and Ultra,
// A4, A4X, H4D) and for machines in a compact placement policy, and not
// always as soon as the machine exists. resourceStatus.physicalHostTopology
// (cluster, block, sub-block, host) is used when present; physicalHost, the
// older field, is the fallback (physicalHost). The IDs come from the
// network and become a network group and state: they are sanitized like
// any text of the API.
func physical(rs *computepb.ResourceStatus) *state.PhysicalHost {
	if t := rs.GetPhysicalHostTopology(); t != nil {
		h := &state.PhysicalHost{Cluster: sanitize(t.GetCluster()), Block: sanitize(t.GetBlock()), SubBlock: sanitize(t.GetSubblock()), Host: sanitize(t.GetHost())}
		if *h != (state.PhysicalHost{}) {
			return h
		}
	}
	return physicalHost(rs.GetPhysicalHost())
}

// physicalHost reads resourceStatus.physicalHost, which the API documents
// as "blockId/subBlockId/hostId" (gcloud shows it with a leading slash:
// "/BLOCK/SUBBLOCK/HOST"). Its segments go from the coarsest level to the
// host, which is always the last: three are block, sub-block and host;
// four, a cluster before them; two, a block and a host; one, the host
// alone (the opaque ID older API versions gave), which groups nothing. Any
// other form, or an empty segment, is not guessed at: nil, and the
// machine is placed by zone.
//
// Records made before this reading took three segments for cluster, block
// and host; PhysicalGroup joins the levels present, so the network group
// of such a machine ("A/B") is the same either way.
func physicalHost(s string) *state.PhysicalHost {
	s = strings.Trim(s, "/")
	if s == "" {
		return nil
	}
	parts := strings.Split(s, "/")
	for i, p := range parts {
		if parts[i] = sanitize(p); parts[i] == "" {
			return nil
		}
	}
	switch len(parts) {
	case 1:
		return &state.PhysicalHost{Host: parts[0]}
	case 2:
		return &state.PhysicalHost{Block: parts[0], Host: parts[1]}
	case 3:
		return &state.PhysicalHost{Block: parts[0], SubBlock: parts[1], Host: parts[2]}
	case 4:
		return &state.PhysicalHost{Cluster: parts[0], Block: parts[1], SubBlock: parts[2], Host: parts[3]}
	}
	return nil
}

// lastSegment is the name at the end of a resource URL.
func lastSegment(url string) string {
	return url[strings.LastIndexByte(url, '/')+1:]
}

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

// physical is where the instance runs. The library (compute v1.75) offers
// resourceStatus.physicalHostTopology (cluster, block, subblock, host),
// which is used when present; physicalHost, a "/CLUSTER/BLOCK/HOST" string
// older instances and API versions report, is the fallback.
func physical(rs *computepb.ResourceStatus) *state.PhysicalHost {
	if t := rs.GetPhysicalHostTopology(); t != nil {
		h := &state.PhysicalHost{Cluster: t.GetCluster(), Block: t.GetBlock(), SubBlock: t.GetSubblock(), Host: t.GetHost()}
		if *h != (state.PhysicalHost{}) {
			return h
		}
	}
	parts := strings.Split(strings.Trim(rs.GetPhysicalHost(), "/"), "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return nil
	}
	return &state.PhysicalHost{Cluster: parts[0], Block: parts[1], Host: parts[2]}
}

// lastSegment is the name at the end of a resource URL.
func lastSegment(url string) string {
	return url[strings.LastIndexByte(url, '/')+1:]
}

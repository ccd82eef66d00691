package reconcile

import (
	"slices"
	"strings"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// WithMachines returns cfg with the machines state records for each fleet
// of created machines as that fleet's hosts, so that probe, plan, apply,
// status and logs reach and place created machines as they do declared
// hosts. cfg itself is not changed. A created machine's location is its
// provider's record (trusted, ADR-0021): region and zone, and for network
// group the physical topology the provider reported (cluster/block, and
// sub-block where present), so that placement keeps a job inside one block
// of GPUs.
func WithMachines(cfg *config.Config, machines []state.Machine) *config.Config {
	out := *cfg
	out.Fleets = make([]*config.Fleet, len(cfg.Fleets))
	for i, f := range cfg.Fleets {
		out.Fleets[i] = f
		if f.GCP == nil {
			continue
		}
		fc := *f
		fc.Hosts = nil
		for _, m := range machines {
			if m.Fleet == f.Name {
				fc.Hosts = append(fc.Hosts, CreatedHost(&fc, m))
			}
		}
		slices.SortFunc(fc.Hosts, func(a, b *config.Host) int { return state.CompareMachineNames(a.Name, b.Name) })
		out.Fleets[i] = &fc
	}
	return &out
}

// CreatedHost is machine m of fleet f as a host of the configuration.
// Through a bastion it is reached at its internal address; otherwise at its
// external one when it has one.
func CreatedHost(f *config.Fleet, m state.Machine) *config.Host {
	addr := m.ExternalIP
	if addr == "" || (f.SSH != nil && f.SSH.Bastion != "") {
		addr = m.InternalIP
	}
	loc := config.Location{Region: m.Region, Zone: m.Zone, NetworkGroup: PhysicalGroup(m.Physical)}
	if loc.NetworkGroup == "" {
		loc.NetworkGroup = f.Location.NetworkGroup
	}
	return &config.Host{
		Name: m.Name, Fleet: f.Name, Address: addr,
		Location: loc, OwnLocation: loc, Labels: f.Labels,
		Created: true, HostKeys: slices.Clone(m.HostKeys),
		DeclRange: f.DeclRange,
	}
}

// PhysicalGroup is the network group of a machine the provider placed:
// the levels it named above the host, joined by "/" ("cluster/block",
// "cluster/block/sub-block", or "block/sub-block" from GCP's physicalHost,
// which names no cluster); "" when it named no block. The host is left
// out: two GPUs of one host are one machine.
func PhysicalGroup(p *state.PhysicalHost) string {
	if p == nil || p.Block == "" {
		return ""
	}
	var parts []string
	for _, level := range []string{p.Cluster, p.Block, p.SubBlock} {
		if level != "" {
			parts = append(parts, level)
		}
	}
	return strings.Join(parts, "/")
}

// ListedMachines is machines with each one's physical record as its
// fleet's provider listed it at this refresh, and whether any changed.
// Compute Engine reports where a machine runs only for some machine types
// or placements, and not always as soon as it exists: a machine recorded
// without it is placed by zone until a listing reports it, and by it from
// then on. A listing that reports none (a stopped machine reports none)
// leaves the record as it is, as does a fleet that was not listed.
// machines itself is not changed.
func ListedMachines(machines []state.Machine, listed map[string]Listing) ([]state.Machine, bool) {
	out := slices.Clone(machines)
	changed := false
	for i, m := range out {
		listing, ok := listed[m.Fleet]
		if !ok || listing.Error != "" {
			continue
		}
		j := slices.IndexFunc(listing.Machines, func(l state.Machine) bool { return l.Name == m.Name })
		if j < 0 || listing.Machines[j].Physical == nil {
			continue
		}
		if p := *listing.Machines[j].Physical; m.Physical == nil || *m.Physical != p {
			out[i].Physical = &p
			changed = true
		}
	}
	return out, changed
}

// locatedSince says that a node recorded at loc on created machine h has
// not moved although h is now placed by a physical topology: loc is where
// h was placed before its provider reported one (its zone, and its fleet's
// network group). gpulayer learnt where the machine is; the machine, and
// the processes on it, stayed where they were, so its jobs are not
// replaced for it.
func locatedSince(h *host, loc state.Location) bool {
	if !h.cfg.Created || h.loc.NetworkGroup == h.fleet.Location.NetworkGroup {
		return false
	}
	byZone := state.Location{Region: h.loc.Region, Zone: h.loc.Zone, NetworkGroup: h.fleet.Location.NetworkGroup}
	return loc == byZone
}

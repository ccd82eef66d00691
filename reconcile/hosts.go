package reconcile

import (
	"fmt"
	"slices"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/placement"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/topology"
)

// host is one declared machine as a plan sees it: the configuration's
// word, the refresh's facts and where it is.
type host struct {
	cfg   *config.Host
	fleet *config.Fleet
	// facts is nil when the facts do not name the host.
	facts *facts.Host
	// problem is why the facts cannot be used ("" when they can).
	problem *HostProblem
	loc     placement.Location
	trusted bool
	// matrix is the facts' GPU link matrix, one pointer for every host
	// whose matrix is the same (see matrices).
	matrix *topology.Matrix
}

// usable says the host's facts can be placed on.
func (h *host) usable() bool { return h.problem == nil }

// hosts indexes the declared hosts by name, with their facts.
func hostsOf(cfg *config.Config, doc *facts.Document) (map[string]*host, []string) {
	byName := map[string]*host{}
	ms := matrices{byKey: map[string]*topology.Matrix{}, byPointer: map[*topology.Matrix]*topology.Matrix{}}
	var names []string
	index := doc.Index()
	for _, f := range cfg.Fleets {
		for _, ch := range f.Hosts {
			h := &host{cfg: ch, fleet: f, facts: index[ch.Name]}
			switch {
			case h.facts == nil:
				h.problem = &HostProblem{Host: ch.Name, Status: StatusNoFacts, Error: "the facts do not name this host"}
			case h.facts.Status != facts.StatusOK:
				h.problem = &HostProblem{Host: ch.Name, Status: h.facts.Status, Error: h.facts.Error}
			}
			h.loc, h.trusted = hostLocation(f, ch, h.facts)
			if h.facts != nil {
				h.matrix = ms.interned(h.facts.Topology)
			}
			byName[ch.Name] = h
			names = append(names, ch.Name)
		}
	}
	slices.Sort(names)
	return byName, names
}

// hostLocation is where a declared host is, by ADR-0021's precedence: the
// machine's metadata service, GCE, EC2 or Azure (as the probe found it;
// docs/facts.md), then the host block, then
// the fleet's defaults. It is worked out again from the configuration on
// every plan, so a facts document made before the configuration changed
// still places hosts where the configuration now says. Declared hosts are
// never trusted: only a provider's record is (ADR-0021, security note), and
// a created machine's location is that record alone.
func hostLocation(f *config.Fleet, h *config.Host, fh *facts.Host) (placement.Location, bool) {
	if h.Created {
		// A provider's record: trusted, whatever the machine claims.
		l := h.OwnLocation
		return placement.Location{Region: l.Region, Zone: l.Zone, NetworkGroup: l.NetworkGroup}, true
	}
	var md facts.LocationClaim
	if fh != nil {
		md = facts.MetadataClaim(fh.Location)
	}
	own, fleet := h.OwnLocation, f.Location
	hostClaim, fleetClaim := facts.BesideMetadata(md,
		facts.LocationClaim{Source: facts.SourceHost, Region: own.Region, Zone: own.Zone, NetworkGroup: own.NetworkGroup},
		facts.LocationClaim{Source: facts.SourceFleet, Region: fleet.Region, Zone: fleet.Zone, NetworkGroup: fleet.NetworkGroup})
	loc := facts.ResolveLocation(md, hostClaim, fleetClaim)
	return placement.Location{Region: loc.Region, Zone: loc.Zone, NetworkGroup: loc.NetworkGroup}, false
}

// stateLocation is a topology location as state records it.
func stateLocation(l placement.Location) state.Location {
	return state.Location{Region: l.Region, Zone: l.Zone, NetworkGroup: l.NetworkGroup}
}

// gpuUUIDs are the UUIDs of the given GPUs of a host, or nil when the
// facts do not have every one.
func gpuUUIDs(fh *facts.Host, gpus []int) []string {
	if fh == nil {
		return nil
	}
	out := make([]string, 0, len(gpus))
	for _, i := range gpus {
		g := gpuAt(fh, i)
		if g == nil || g.UUID == "" {
			return nil
		}
		out = append(out, g.UUID)
	}
	return out
}

// gpuAt is the host's GPU of index i, or nil.
func gpuAt(fh *facts.Host, i int) *facts.GPU {
	for k := range fh.GPUs {
		if fh.GPUs[k].Index == i {
			return &fh.GPUs[k]
		}
	}
	return nil
}

// numaOf is the NUMA nodes the GPUs are attached to ("1", "0,1"), "" when
// the matrix does not say for every one.
func numaOf(m *topology.Matrix, gpus []int) string {
	if m == nil || len(gpus) == 0 {
		return ""
	}
	var nodes []int
	for _, g := range gpus {
		if g >= len(m.NUMAAffinity) || m.NUMAAffinity[g] == nil {
			return ""
		}
		for _, n := range m.NUMAAffinity[g] {
			if !slices.Contains(nodes, n) {
				nodes = append(nodes, n)
			}
		}
	}
	slices.Sort(nodes)
	return topology.FormatList(nodes)
}

// bottleneckOf is the slowest link between the GPUs, "" for one GPU or no
// matrix.
func bottleneckOf(m *topology.Matrix, gpus []int) string {
	if m == nil || len(gpus) < 2 {
		return ""
	}
	var worst topology.Link
	first := true
	for a, i := range gpus {
		for _, j := range gpus[a+1:] {
			if i >= len(m.Links) || j >= len(m.Links[i]) {
				return ""
			}
			l := m.Links[i][j]
			if first || l.Score() < worst.Score() {
				worst, first = l, false
			}
		}
	}
	return worst.String()
}

// describeNode names a node in messages: "a2 (node 1)".
func describeNode(host string, rank int) string {
	return fmt.Sprintf("%s (node %d)", host, rank)
}

// matrices are the distinct matrices of a plan's hosts. Fleets are made
// of few machine models, and the placement core keeps the tables it
// builds for a GPU pick per matrix pointer: one pointer per model builds
// them once per model, not once per host.
type matrices struct {
	byKey map[string]*topology.Matrix
	// byPointer maps a matrix already seen to the one kept: a document
	// facts.ReadFile read shares one matrix among the hosts of a model,
	// so most hosts are found here without building their key.
	byPointer map[*topology.Matrix]*topology.Matrix
}

// interned returns the matrix seen before with the same content as m, or
// m.
func (ms matrices) interned(m *topology.Matrix) *topology.Matrix {
	if m == nil {
		return nil
	}
	if prev, ok := ms.byPointer[m]; ok {
		return prev
	}
	k := matrixKey(m)
	prev, ok := ms.byKey[k]
	if !ok {
		ms.byKey[k], prev = m, m
	}
	ms.byPointer[m] = prev
	return prev
}

// matrixKey writes everything a matrix holds into one string.
func matrixKey(m *topology.Matrix) string {
	var b []byte
	links := func(rows [][]topology.Link) {
		b = append(b, byte(len(rows)))
		for _, r := range rows {
			b = append(b, byte(len(r)))
			for _, l := range r {
				b = append(b, byte(l.Kind), l.NVLinks)
			}
		}
	}
	links(m.Links)
	links(m.NICLinks)
	for _, n := range m.NICs {
		b = append(b, n...)
		b = append(b, 0)
	}
	b = append(b, 1)
	for _, c := range m.CPUAffinity {
		b = append(b, c...)
		b = append(b, 0)
	}
	b = append(b, 1)
	for _, set := range m.NUMAAffinity {
		b = append(b, byte(len(set)))
		for _, n := range set {
			b = append(b, byte(n), byte(n>>8))
		}
	}
	b = append(b, 1)
	for _, n := range m.GPUNUMAID {
		b = append(b, byte(n), byte(n>>8))
	}
	return string(b)
}

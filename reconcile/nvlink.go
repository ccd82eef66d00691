package reconcile

import (
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/topology"
)

// nvlinkDomain is the multi-node NVLink domain a host's facts put it in,
// checked against its GPUs' own fabric records: the facts may come from
// a file (--facts) rather than the probe, so the domain counts only where
// every GPU reports a completed, successful registration with that one
// fabric clique (topology.NVLinkDomain), and the id is the shape
// topology writes ("CLUSTER_UUID:CLIQUE_ID"). "" otherwise: the host is
// then in no domain, as one without a fabric is.
func nvlinkDomain(fh *facts.Host) string {
	if fh == nil || fh.NVLinkDomain == "" || len(fh.NVLinkDomain) > maxDomainID || len(fh.GPUs) == 0 {
		return ""
	}
	fabrics := make([]topology.GPUFabric, len(fh.GPUs))
	for i, g := range fh.GPUs {
		fabrics[i].Index = g.Index
		if g.Fabric != nil {
			fabrics[i] = *g.Fabric
			fabrics[i].Index = g.Index
		}
	}
	d, err := topology.NVLinkDomain(fabrics)
	if err != nil || d != fh.NVLinkDomain || !domainShaped(d) {
		return ""
	}
	return d
}

// maxDomainID is the longest domain id: a 36-byte UUID, a colon and a
// clique id of at most 10 digits (a uint32).
const maxDomainID = 36 + 1 + 10

// domainShaped reports whether id is a lower-case hex UUID, a colon and
// decimal digits.
func domainShaped(id string) bool {
	if len(id) < 38 || len(id) > maxDomainID || id[36] != ':' {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case i == 36:
		case i > 36:
			if c < '0' || c > '9' {
				return false
			}
		case !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f'):
			return false
		}
	}
	return true
}

// domainNames interns NVLink domain ids: each host's facts hold their own
// copy of the 47-byte id, and the scheduler compares a worker's against
// its group's for every worker; one string per domain makes that a
// pointer compare.
type domainNames map[string]string

func (d domainNames) intern(id string) string {
	if id == "" {
		return ""
	}
	if s, ok := d[id]; ok {
		return s
	}
	d[id] = id
	return id
}

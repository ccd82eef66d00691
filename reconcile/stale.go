package reconcile

import (
	"fmt"
	"slices"

	"github.com/gpulayer/gpulayer/placement"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/topology"
)

// TouchedHosts are the hosts a plan launches on: the ones whose facts a
// saved plan's placements depend on.
func (p *Plan) TouchedHosts() []string {
	var hosts []string
	for _, c := range p.Jobs {
		if (c.Action != ActionCreate && c.Action != ActionReplace) || c.Placement == nil {
			continue
		}
		for _, n := range c.Placement.Nodes {
			if !slices.Contains(hosts, n.Host) {
				hosts = append(hosts, n.Host)
			}
		}
	}
	slices.Sort(hosts)
	return hosts
}

// StaleReasons compares what the hosts a saved plan launches on report now
// with what they reported when the plan was made, and says what the plan's
// placements depend on that changed: a host that cannot be probed, a
// chosen GPU now used by a process the plan does not stop, other GPU
// links, another location or NVLink domain (a placement's level and its
// link cost rest on it). A CPU-only node depends on no GPU, so GPUs
// busy now or other links on a host that only CPU-only nodes are planned
// on leave the plan as it is. An empty result means the plan still holds.
func (p *Plan) StaleReasons(planned, now *facts.Document) []string {
	stopped := map[string]bool{}
	for _, c := range p.Jobs {
		if c.StopPrior && c.Prior != nil {
			stopped[c.Prior.RunID] = true
		}
	}
	for _, l := range p.Leftovers {
		stopped[l.RunID] = true
	}
	wasByName, isByName := planned.Index(), now.Index()
	var out []string
	checked := map[string]bool{}
	linksChecked := map[string]bool{}
	for _, c := range p.Jobs {
		if (c.Action != ActionCreate && c.Action != ActionReplace) || c.Placement == nil {
			continue
		}
		for _, n := range c.Placement.Nodes {
			was, is := wasByName[n.Host], isByName[n.Host]
			switch {
			case is == nil || is.Status != facts.StatusOK:
				if !checked[n.Host] {
					msg := "could not be probed"
					if is != nil && is.Error != "" {
						msg += ": " + is.Error
					}
					out = append(out, fmt.Sprintf("host %s %s", n.Host, msg))
				}
			case was == nil:
				if !checked[n.Host] {
					out = append(out, fmt.Sprintf("host %s was not in the plan's facts", n.Host))
				}
			default:
				if !checked[n.Host] {
					if was.Location.Region != is.Location.Region || was.Location.Zone != is.Location.Zone || was.Location.NetworkGroup != is.Location.NetworkGroup {
						out = append(out, fmt.Sprintf("host %s now reports location %q, not %q", n.Host, locationOf(is), locationOf(was)))
					}
					if d := domainChange(was, is); d != "" {
						out = append(out, fmt.Sprintf("host %s now reports %s", n.Host, d))
					}
				}
				if len(n.GPUs) > 0 && !linksChecked[n.Host] {
					if !sameLinks(was.Topology, is.Topology) {
						out = append(out, fmt.Sprintf("host %s now reports other GPU links", n.Host))
					}
					linksChecked[n.Host] = true
				}
				for _, g := range n.GPUs {
					if gpu := gpuAt(is, g); gpu == nil {
						out = append(out, fmt.Sprintf("host %s has no GPU %d now (job %q)", n.Host, g, c.Job))
					} else if cl := gpu.Claim; cl != nil && (p.State.Lineage == "" || cl.Lineage != p.State.Lineage) {
						out = append(out, fmt.Sprintf("GPU %d of host %s, planned for job %q, is now claimed by job %q of another configuration (state %s)", g, n.Host, c.Job, cl.Job, cl.Lineage))
					} else if pids := busyWith(gpu, stopped); len(pids) > 0 {
						out = append(out, fmt.Sprintf("GPU %d of host %s, planned for job %q, is now used by pid %s", g, n.Host, c.Job, topology.FormatList(pids)))
					}
				}
			}
			checked[n.Host] = true
		}
	}
	return out
}

// domainChange says how the NVLink domain of a host (as placement reads
// it: nvlinkDomain) differs between two probes, "" when it does not.
func domainChange(was, is *facts.Host) string {
	a, b := nvlinkDomain(was), nvlinkDomain(is)
	if a == b {
		return ""
	}
	name := func(id string) string {
		if id == "" {
			return "no NVLink domain"
		}
		return fmt.Sprintf("NVLink domain %q", placement.DomainName(id))
	}
	return name(b) + ", not " + name(a)
}

func locationOf(h *facts.Host) string {
	return placement.Location{Region: h.Location.Region, Zone: h.Location.Zone, NetworkGroup: h.Location.NetworkGroup}.String()
}

// busyWith are the pids on a GPU that the plan does not stop.
func busyWith(g *facts.GPU, stopped map[string]bool) []int {
	var pids []int
	for _, pr := range g.Processes {
		if pr.RunID == "" || !stopped[pr.RunID] {
			pids = append(pids, pr.PID)
		}
	}
	slices.Sort(pids)
	return slices.Compact(pids)
}

func sameLinks(a, b *topology.Matrix) bool {
	if a.GPUs() != b.GPUs() {
		return false
	}
	if a == nil {
		return true
	}
	for i := range a.Links {
		if !slices.Equal(a.Links[i], b.Links[i]) {
			return false
		}
	}
	return true
}

// StaleCode says why a saved plan of job is stale when its code directory
// now hashes to hash, not to what the plan read (code): it would send code
// the plan did not show.
func StaleCode(job string, code *state.CodeSpec, hash string) []string {
	if code == nil || code.Hash == hash {
		return nil
	}
	return []string{fmt.Sprintf("the code of job %q (%s) changed since the plan was made", job, code.Source)}
}

package placement

import (
	"slices"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/topology"
)

// Release is one node of a running job that is expected to give its GPUs
// back: its machine, its GPUs, and when the job's expected_duration ends
// (its launch plus that duration).
type Release struct {
	Job    string
	Worker string
	GPUs   []int
	At     time.Time
}

// Holder is a running job whose expected end frees machines of the group
// a job waits for.
type Holder struct {
	Job string `json:"job"`
	// Machines counts the group's machines it frees for the waiting job.
	Machines int       `json:"machines"`
	At       time.Time `json:"at"`
}

// WaitEstimate is EstimateWait's answer: whether a tighter group than the
// one a job can have now frees before the deadline, which, and when.
type WaitEstimate struct {
	// Wait says a tighter group frees by the deadline; Level, Location, At
	// and Holders say which, when, and whose ends free it. Without Wait
	// they are empty.
	Wait     bool      `json:"wait"`
	Level    Level     `json:"level"`
	Location Location  `json:"location"`
	At       time.Time `json:"at"`
	Holders  []Holder  `json:"holders,omitempty"`
	// Takes are the machines and GPUs the job would take then: a caller
	// estimating several jobs promises them to this one, so that no
	// other job counts on them or is placed on those free now.
	Takes []Placement `json:"takes,omitempty"`
	// Overdue are the jobs past their expected end that hold machines: a
	// job overdue may end any moment or run for hours, so it is counted
	// as holding its machines, never as freeing them now. Name order.
	Overdue []string `json:"overdue,omitempty"`
}

// EstimateWait says whether job, which can be placed now at level now
// (Schedule's Decision.Level under prefer), would fit a tighter group
// once running jobs end as expected, by deadline. workers are the
// machines as they are now (free GPUs net of the other jobs of this
// plan); releases, the nodes of running jobs with an expected end.
//
// The estimate is Schedule itself, run on the machines as they would be
// at each expected end in turn (GPUs given back, one task fewer), with
// the group's level required: the first end at which a tighter level
// holds the job is the wait, at the tightest such level. Only the
// groups around machines that free are scheduled, so a fleet of
// hundreds costs a few schedules of a few machines each. Releases at or
// before now are overdue (see WaitEstimate.Overdue). Pure and
// deterministic.
func EstimateWait(job Job, policy Policy, workers []Worker, releases []Release, now Level, at, deadline time.Time) WaitEstimate {
	var est WaitEstimate
	pol := policy.withDefaults()
	if pol.GroupLocality != LocalityPrefer || now == LevelNetworkGroup {
		return est
	}
	byID := make(map[string]int, len(workers))
	for i := range workers {
		byID[workers[i].ID] = i
	}
	var future []Release
	for _, r := range releases {
		if _, ok := byID[r.Worker]; !ok {
			continue
		}
		if !r.At.After(at) {
			if !slices.Contains(est.Overdue, r.Job) {
				est.Overdue = append(est.Overdue, r.Job)
			}
			continue
		}
		if !r.At.After(deadline) {
			future = append(future, r)
		}
	}
	slices.Sort(est.Overdue)
	slices.SortStableFunc(future, func(a, b Release) int { return a.At.Compare(b.At) })
	if len(future) == 0 {
		return est
	}
	// hyp is the fleet at the expected end being tried: the releases up to
	// it applied, in order, to a copy made once.
	hyp := slices.Clone(workers)
	freed := map[string]bool{} // workers a release has given GPUs back on
	var scratch []Worker
	for i := 0; i < len(future); {
		t := future[i].At
		for ; i < len(future) && future[i].At.Equal(t); i++ {
			r := future[i]
			w := &hyp[byID[r.Worker]]
			w.Free |= topology.DeviceSetOf(r.GPUs...)
			w.RunningTasks = max(0, w.RunningTasks-1)
			freed[r.Worker] = true
		}
		for l := LevelNetworkGroup; l < now; l++ {
			if pol.Slice != nil && !sliceFits(pol, l) {
				continue
			}
			scratch = aroundFreed(scratch[:0], hyp, freed, l)
			if len(scratch) < job.Nodes {
				continue
			}
			p := pol
			p.GroupLocality = l.String()
			d := Schedule(job, scratch, p)
			if d.Status != StatusPlaced {
				continue
			}
			est.Wait, est.Level, est.Location, est.At = true, l, d.Location.Upto(l), t
			est.Holders = holders(d, future[:i])
			est.Takes = d.Workers
			return est
		}
	}
	return est
}

// sliceFits says a policy's slices fit inside a group at level l: a slice
// is part of its group, so it is never looser.
func sliceFits(p Policy, l Level) bool {
	sl, err := ParseLevel(p.Slice.Locality)
	return err == nil && sl <= l
}

// aroundFreed appends the workers of hyp in a group at level l with a
// worker a release freed: only those groups can hold the job at l when
// they could not before.
func aroundFreed(out []Worker, hyp []Worker, freed map[string]bool, l Level) []Worker {
	var groups []Location
	for i := range hyp {
		if freed[hyp[i].ID] && hyp[i].Location.At(l) != "" {
			if g := hyp[i].Location.Upto(l); !slices.Contains(groups, g) {
				groups = append(groups, g)
			}
		}
	}
	for i := range hyp {
		if hyp[i].Location.At(l) != "" && slices.Contains(groups, hyp[i].Location.Upto(l)) {
			out = append(out, hyp[i])
		}
	}
	return out
}

// holders are the jobs whose releases free machines the decision uses, with
// how many and when the last of them frees; by time, then name.
func holders(d Decision, applied []Release) []Holder {
	var out []Holder
	for _, p := range d.Workers {
		var counted []string // jobs already counted on this machine
		for _, r := range applied {
			if r.Worker != p.Worker {
				continue
			}
			k := slices.IndexFunc(out, func(h Holder) bool { return h.Job == r.Job })
			if k < 0 {
				out = append(out, Holder{Job: r.Job})
				k = len(out) - 1
			}
			if r.At.After(out[k].At) {
				out[k].At = r.At
			}
			if !slices.Contains(counted, r.Job) {
				out[k].Machines++
				counted = append(counted, r.Job)
			}
		}
	}
	slices.SortFunc(out, func(a, b Holder) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.Job, b.Job)
	})
	return out
}

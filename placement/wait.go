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
// holds the job is the wait, at the tightest such level. At each end
// only the groups around the machines that free then are scheduled (the
// others did not hold the job at the end before and are as they were),
// so a fleet of hundreds costs a few schedules of a few machines each. Releases at or
// before now are overdue (see WaitEstimate.Overdue). Pure and
// deterministic.
func EstimateWait(job Job, policy Policy, workers []Worker, releases []Release, now Level, at, deadline time.Time) WaitEstimate {
	var est WaitEstimate
	pol := policy.withDefaults()
	if pol.GroupLocality != LocalityPrefer || now == tightest {
		return est
	}
	// The machines releases name, found in one pass over the fleet.
	idx := map[string]int{}
	for _, r := range releases {
		idx[r.Worker] = -1
	}
	for i := range workers {
		if _, ok := idx[workers[i].ID]; ok {
			idx[workers[i].ID] = i
		}
	}
	var future []Release
	for _, r := range releases {
		if idx[r.Worker] < 0 {
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
	// The fleet at the expected end being tried is workers with what the
	// releases up to it give back (an overlay, not a copy of the fleet).
	ov := overlay{gain: map[int]topology.DeviceSet{}, done: map[int]int{}}
	var scratch []Worker
	var fresh []int // the workers the releases at t free
	for i := 0; i < len(future); {
		t := future[i].At
		fresh = fresh[:0]
		for ; i < len(future) && future[i].At.Equal(t); i++ {
			r := future[i]
			k := idx[r.Worker]
			ov.gain[k] |= topology.DeviceSetOf(r.GPUs...)
			ov.done[k]++
			fresh = append(fresh, k)
		}
		for l := tightest; l < now; l++ {
			if pol.Slice != nil && !sliceFits(pol, l) {
				continue
			}
			scratch = ov.around(scratch[:0], workers, fresh, l)
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

// tightest is the tightest level, where every loop over levels starts.
const tightest Level = 0

// Words is the level's name in a sentence: "network group", "zone",
// "region", "location".
func (l Level) Words() string { return l.words() }

// sliceFits says a policy's slices fit inside a group at level l: a slice
// is part of its group, so it is never looser.
func sliceFits(p Policy, l Level) bool {
	sl, err := ParseLevel(p.Slice.Locality)
	return err == nil && sl <= l
}

// overlay is what releases give back, by worker index: GPUs, and tasks
// that end.
type overlay struct {
	gain map[int]topology.DeviceSet
	done map[int]int
}

// around appends copies of the workers in a group at level l with a
// worker of fresh (those the last releases freed), the overlay applied. A
// group none of them is in is as it was at the last expected end, when it
// did not hold the job: only the groups around the machines that free
// now can hold it when they could not before.
func (ov overlay) around(out []Worker, workers []Worker, fresh []int, l Level) []Worker {
	var groups []Location
	for _, k := range fresh {
		if loc := workers[k].Location; loc.At(l) != "" && !slices.Contains(groups, loc.Upto(l)) {
			groups = append(groups, loc.Upto(l))
		}
	}
	if len(groups) == 0 {
		return out
	}
	for i := range workers {
		loc := workers[i].Location
		if loc.At(l) == "" || !slices.Contains(groups, loc.Upto(l)) {
			continue
		}
		w := workers[i]
		if g, ok := ov.gain[i]; ok {
			w.Free |= g
			w.RunningTasks = max(0, w.RunningTasks-ov.done[i])
		}
		out = append(out, w)
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

package reconcile

import (
	"fmt"
	"slices"
	"strings"
)

// LeftOut is a change Plan.LifecycleOnly left out: one only apply carries
// out, since it is the configuration's and not the lifecycle's.
type LeftOut struct {
	// Job names the job whose change it is; "" for a machine's.
	Job string `json:"job,omitempty"`
	// Words say what it is: `job "train": replace (config_changed)`,
	// `fleet "cloud": create machine cloud-3 (count_raised)`.
	Words string `json:"words"`
}

// LifecycleOnly is the plan with only the changes of the lifecycle pass
// (docs/lifecycle.md), what gpulayer watch carries out, and the changes it
// left out. Kept are:
//
//   - every no-op, with what it records of its run (an end, a host that
//     stopped answering);
//   - stops of the nodes that may still run of a run that ended (the gang
//     ends together);
//   - restarts by the job's policy: a replace whose Run says Restart, and
//     one that waits (or can never be placed) with its survivors stopped;
//   - leftover runs: stopping what an earlier stop could not finish;
//   - machines created again because they are gone from their provider
//     (machine_missing) or were preempted (machine_stopped, with
//     Input.RecreatePreempted).
//
// Left out are the configuration's changes: a job to launch, a replace
// for any other reason (config_changed, launch_incomplete, host_removed,
// ...), a destroy, a changed job's wait, and machines a fleet's count or
// gcp block adds, deletes or replaces. A job left out holds its GPUs only
// in a plan made with Input.Hold naming it: plan again with Hold before
// carrying out what is kept, or a restart may be placed on GPUs that only
// a left-out change frees. p itself is not changed.
func (p *Plan) LifecycleOnly() (*Plan, []LeftOut) {
	out := *p
	var left []LeftOut
	out.Jobs = []JobChange{}
	for _, c := range p.Jobs {
		if lifecycleChange(c) {
			out.Jobs = append(out.Jobs, c)
			continue
		}
		if c.Prior == nil && (c.Action == ActionWaiting || c.Action == ActionFailed) {
			// Not a change (HasChanges agrees): a new job that waits, or
			// one that can never be placed. It is not the lifecycle's
			// either: apply launches it once it fits.
			continue
		}
		left = append(left, LeftOut{Job: c.Job, Words: fmt.Sprintf("job %q: %s (%s)", c.Job, c.Action, reasonCodes(c.Reasons))})
	}
	// A wait record ends with the change that ends it: only those of the
	// jobs kept.
	out.EndedWaits = slices.DeleteFunc(slices.Clone(p.EndedWaits), func(job string) bool { return out.Job(job) == nil })
	if len(out.EndedWaits) == 0 {
		out.EndedWaits = nil
	}
	out.Fleets = []FleetChange{}
	for _, f := range p.Fleets {
		fc := f
		fc.Machines = []MachineChange{}
		for _, m := range f.Machines {
			if recreated(m) {
				fc.Machines = append(fc.Machines, m)
				continue
			}
			left = append(left, LeftOut{Words: fmt.Sprintf("fleet %q: %s machine %s (%s)", f.Fleet, m.Action, m.Name, reasonCodes(m.Reasons))})
		}
		out.Fleets = append(out.Fleets, fc)
	}
	out.Summary = summaryOf(&out)
	return &out, left
}

// lifecycleChange says a job's change is the lifecycle pass's.
func lifecycleChange(c JobChange) bool {
	switch c.Action {
	case ActionNoOp, ActionStop:
		return true
	case ActionReplace, ActionWaiting, ActionFailed:
		return c.Run != nil && c.Run.Restart
	}
	return false
}

// recreated says a machine change puts back a machine the configuration
// still asks for and its provider lost.
func recreated(m MachineChange) bool {
	has := func(code ReasonCode) bool {
		return slices.ContainsFunc(m.Reasons, func(r Reason) bool { return r.Code == code })
	}
	return (m.Action == ActionCreate && has(ReasonMachineMissing)) || (m.Action == ActionReplace && has(ReasonMachineStopped))
}

func reasonCodes(rs []Reason) string {
	var codes []string
	for _, r := range rs {
		if !slices.Contains(codes, string(r.Code)) {
			codes = append(codes, string(r.Code))
		}
	}
	if len(codes) == 0 {
		return "no reason given"
	}
	return strings.Join(codes, ", ")
}

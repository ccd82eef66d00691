package reconcile

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// Listing is what a fleet's provider reported at refresh: the machines
// labelled with the fleet and the state's lineage, or why it could not
// say.
type Listing struct {
	Machines []state.Machine
	Error    string
}

// Provider names of FleetChange.Provider.
const ProviderGCP = "gcp"

// planFleets decides, for every fleet of created machines, which machines
// to create, delete or replace, and notes the recorded machines that can
// no longer hold jobs (pl.machineGone), so that classify moves their jobs
// and schedule places nothing on them.
//
// A recorded machine numbered at or above count is deleted (highest
// numbers first); one created from another gcp block than the current one
// is replaced; one the provider no longer lists is created again. A
// stopped or preempted machine is reported and left alone: its jobs are
// placed elsewhere (with RecreatePreempted, a preempted Spot VM is
// replaced, and its jobs wait for it when nothing else can hold them). A
// machine the provider lists with this state's labels
// but that state does not record is reported and never touched: gpulayer
// deletes only what it recorded.
func (pl *planner) planFleets() {
	pl.machineGone = map[string]Reason{}
	declared := map[string]bool{}
	for _, f := range pl.in.Config.Fleets {
		if f.GCP == nil {
			continue
		}
		declared[f.Name] = true
		count := f.Count
		countWords := fmt.Sprintf("count is %d", count)
		if pl.in.Destroy {
			count, countWords = 0, "gpulayer destroy deletes every machine it created"
		}
		spec := f.GCP.SpecHash()
		listing, listed := pl.in.Listed[f.Name]
		if listed && listing.Error != "" {
			listed = false
			pl.plan.Warnings = append(pl.plan.Warnings, fmt.Sprintf("fleet %q: its machines could not be listed (%s); state's record of them is used as it is", f.Name, listing.Error))
		}
		live := map[string]state.Machine{}
		for _, m := range listing.Machines {
			live[m.Name] = m
		}
		fc := FleetChange{Fleet: f.Name, Provider: ProviderGCP, Count: f.Count, Listed: listed, Machines: []MachineChange{}}
		detail := f.GCP.MachineType + " in " + f.GCP.Zone
		if f.GCP.AcceleratorCount > 0 {
			detail = fmt.Sprintf("%s with %d × %s in %s", f.GCP.MachineType, f.GCP.AcceleratorCount, f.GCP.AcceleratorType, f.GCP.Zone)
		}
		recorded := map[string]bool{}
		var deletes, others []MachineChange
		for _, m := range pl.machines {
			if m.Fleet != f.Name {
				continue
			}
			fc.Existing++
			recorded[m.Name] = true
			_, n := state.MachineNumber(m.Name)
			now, isListed := live[m.Name]
			switch {
			case n < 0 || n >= count:
				r := Reason{Code: ReasonCountLowered, Message: countWords}
				deletes = append(deletes, MachineChange{Name: m.Name, Action: ActionDestroy, Reasons: []Reason{r}})
				pl.machineGone[m.Name] = Reason{Code: ReasonMachineDeleted, Message: "machine " + m.Name + " is deleted: " + countWords}
			case m.SpecHash != spec:
				r := Reason{Code: ReasonMachineSpecChanged, Message: "the gcp block changed in a way that needs a new machine"}
				others = append(others, MachineChange{Name: m.Name, Action: ActionReplace, Detail: detail, Reasons: []Reason{r}})
				pl.machineGone[m.Name] = Reason{Code: ReasonMachineDeleted, Message: "machine " + m.Name + " is replaced: its gcp block changed"}
			case listed && !isListed:
				r := Reason{Code: ReasonMachineMissing, Message: "machine " + m.Name + " no longer exists (deleted outside gpulayer)"}
				others = append(others, MachineChange{Name: m.Name, Action: ActionCreate, Detail: detail, Reasons: []Reason{r}})
				pl.machineGone[m.Name] = r
			case isListed && now.Status != "" && now.Status != "RUNNING":
				what := "is " + now.Status
				preempted := now.Status == "TERMINATED" && m.Spot
				if preempted {
					what = "was preempted (Spot VM, TERMINATED)"
				}
				pl.machineGone[m.Name] = Reason{Code: ReasonMachineStopped, Message: "machine " + m.Name + " " + what}
				if preempted && pl.in.RecreatePreempted {
					// gpulayer has no start call: a new machine of the
					// same name takes its place.
					r := Reason{Code: ReasonMachineStopped, Message: "machine " + m.Name + " " + what + "; it is deleted and created again"}
					others = append(others, MachineChange{Name: m.Name, Action: ActionReplace, Detail: detail, Reasons: []Reason{r}})
					continue
				}
				pl.plan.Warnings = append(pl.plan.Warnings, fmt.Sprintf("machine %s of fleet %q %s; its jobs are placed elsewhere, and the machine is left as it is (start it, or lower count to delete it)", m.Name, f.Name, what))
			}
		}
		for i := 0; i < count; i++ {
			name := f.Name + "-" + fmt.Sprint(i)
			if !recorded[name] {
				r := Reason{Code: ReasonCountRaised, Message: countWords}
				others = append(others, MachineChange{Name: name, Action: ActionCreate, Detail: detail, Reasons: []Reason{r}})
			}
		}
		slices.SortFunc(deletes, func(a, b MachineChange) int { return state.CompareMachineNames(b.Name, a.Name) })
		slices.SortFunc(others, func(a, b MachineChange) int { return state.CompareMachineNames(a.Name, b.Name) })
		fc.Machines = append(deletes, others...)
		for _, name := range slices.Sorted(maps.Keys(live)) {
			if !recorded[name] {
				pl.plan.Warnings = append(pl.plan.Warnings, fmt.Sprintf("machine %s carries fleet %q's labels and this state's lineage, and state does not record it; gpulayer leaves it alone (delete it by hand if it is a leftover)", name, f.Name))
			}
		}
		if len(pl.in.Targets) > 0 && len(fc.Machines) > 0 {
			// --target names jobs: machines are left as they are, and
			// the jobs on them with them.
			for _, m := range fc.Machines {
				if r, ok := pl.machineGone[m.Name]; ok && r.Code == ReasonMachineDeleted {
					delete(pl.machineGone, m.Name)
				}
			}
			fc.Machines = []MachineChange{}
			fc.Note = "--target: machines are left as they are; a plan without --target creates or deletes them"
		}
		for _, m := range fc.Machines {
			if m.Action != ActionDestroy {
				pl.creating = append(pl.creating, creation{fleet: f, name: m.Name})
			}
		}
		fc.PlacedByZone = pl.placedByZone(f.Name)
		if len(fc.Machines) > 0 || fc.Existing > 0 || f.Count > 0 {
			pl.plan.Fleets = append(pl.plan.Fleets, fc)
		}
	}
	pl.removedFleets(declared)
}

// placedByZone names the recorded machines of fleet that can hold jobs
// after this plan and whose provider reported no physical topology for
// them (PhysicalGroup is ""), in number order, or nil: they are placed by
// zone and the fleet's network group, not by block, which a reviewer of a
// job that needs one block should know.
func (pl *planner) placedByZone(fleet string) []string {
	var out []string
	for _, m := range pl.machines {
		if _, gone := pl.machineGone[m.Name]; m.Fleet == fleet && !gone && PhysicalGroup(m.Physical) == "" {
			out = append(out, m.Name)
		}
	}
	slices.SortFunc(out, state.CompareMachineNames)
	return out
}

// removedFleets deletes the recorded machines of fleets no longer declared
// (or no longer created by a provider): gpulayer deletes what it created
// once the configuration stops asking for it, as Terraform does.
func (pl *planner) removedFleets(declared map[string]bool) {
	byFleet := map[string][]state.Machine{}
	for _, m := range pl.st.Machines {
		if !declared[m.Fleet] {
			byFleet[m.Fleet] = append(byFleet[m.Fleet], m)
		}
	}
	if len(pl.in.Targets) > 0 {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(byFleet)) {
		ms := byFleet[name]
		fc := FleetChange{Fleet: name, Provider: ms[0].Provider, Existing: len(ms), Machines: []MachineChange{}}
		for _, m := range ms {
			r := Reason{Code: ReasonFleetRemoved, Message: fmt.Sprintf("fleet %q is no longer declared", name)}
			fc.Machines = append(fc.Machines, MachineChange{Name: m.Name, Action: ActionDestroy, Reasons: []Reason{r}})
			pl.machineGone[m.Name] = Reason{Code: ReasonMachineDeleted, Message: "machine " + m.Name + " is deleted: its fleet is no longer declared"}
		}
		slices.SortFunc(fc.Machines, func(a, b MachineChange) int { return state.CompareMachineNames(b.Name, a.Name) })
		pl.plan.Fleets = append(pl.plan.Fleets, fc)
	}
}

// creation is a machine the plan creates.
type creation struct {
	fleet *config.Fleet
	name  string
}

// awaitMachines turns the jobs that cannot be placed now into jobs that
// wait for the machines this plan creates, where a machine is created in a
// region the job's policy allows: apply places them once those machines
// answer, by the same rules as any placement.
func (pl *planner) awaitMachines() {
	if len(pl.creating) == 0 {
		return
	}
	for i := range pl.plan.Jobs {
		c := &pl.plan.Jobs[i]
		if c.Action != ActionWaiting && c.Action != ActionFailed {
			continue
		}
		if c.Prior != nil && !c.StopPrior && (c.Run == nil || !c.Run.Restart) {
			continue // keeps running its old configuration
		}
		var names []string
		for _, cr := range pl.creating {
			if allowsRegion(pl.policyOf(c.Job), cr.fleet) {
				names = append(names, cr.name)
			}
		}
		if len(names) == 0 {
			continue
		}
		c.Action = ActionWaiting
		c.Reasons = append(c.Reasons, Reason{Code: ReasonMachinesPending,
			Message: "waits for " + strings.Join(names, ", ") + ", which this apply creates; it is placed once they answer"})
	}
}

// policyOf is the regions a job's policy allows (nil: any).
func (pl *planner) policyOf(job string) []string {
	for _, v := range pl.verdicts {
		if v.name == job {
			return v.spec.Policy.Regions
		}
	}
	return nil
}

func allowsRegion(regions []string, f *config.Fleet) bool {
	return len(regions) == 0 || slices.Contains(regions, f.Location.Region) || slices.Contains(regions, f.Location.Zone)
}

package apply

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/providers"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// Fleet is what apply needs to create and delete a fleet's machines.
type Fleet struct {
	Config   *config.Fleet
	Provider providers.Provider
}

// MachineSteps of an Event (Job is "" and Host the machine).
const (
	StepDeleting = "deleting"
	StepDeleted  = "deleted"
	StepCreating = "creating"
	StepCreated  = "created"
)

// machines deletes, then creates, the machines the plan's fleets change:
// deletions first (a replaced machine keeps its name), all of a kind at
// once. Each machine is saved to state as soon as its provider has made it
// (or forgotten once deleted), so an interrupted or partial apply leaks
// nothing: the next plan creates the rest, or deletes what is recorded.
// It returns the names of the machines created.
func (r *run) machines(ctx context.Context, p *reconcile.Plan) []string {
	type step struct {
		fleet string
		m     reconcile.MachineChange
	}
	var deletes, creates []step
	for _, f := range p.Fleets {
		for _, m := range f.Machines {
			if m.Action == reconcile.ActionDestroy || m.Action == reconcile.ActionReplace {
				deletes = append(deletes, step{f.Fleet, m})
			}
			if m.Action == reconcile.ActionCreate || m.Action == reconcile.ActionReplace {
				creates = append(creates, step{f.Fleet, m})
			}
		}
	}
	if len(deletes)+len(creates) == 0 {
		return nil
	}
	// Machines are labelled with the state's lineage, which the first
	// save makes: save before creating any.
	r.sv.update(func(*state.State) {})
	if err := r.sv.flush(); err != nil {
		return nil
	}
	failedDelete := map[string]bool{}
	var mu sync.Mutex
	each(ctx, deletes, func(ctx context.Context, s step) {
		if err := r.deleteMachine(ctx, s.fleet, s.m.Name); err != nil {
			mu.Lock()
			failedDelete[s.m.Name] = true
			mu.Unlock()
		}
	})
	var created []string
	each(ctx, creates, func(ctx context.Context, s step) {
		if failedDelete[s.m.Name] {
			return // the old machine still holds the name
		}
		if r.createMachine(ctx, s.fleet, s.m.Name) {
			mu.Lock()
			created = append(created, s.m.Name)
			mu.Unlock()
		}
	})
	slices.Sort(created)
	return created
}

// DefaultMachineTimeout bounds one machine's create or delete, operation
// included. Once started, a create or delete runs to its end (or this
// bound) even when the apply is interrupted, so that what it did is known
// and saved.
const DefaultMachineTimeout = 10 * time.Minute

func (e *Executor) machineTimeout() time.Duration {
	if e.Opts.MachineTimeout > 0 {
		return e.Opts.MachineTimeout
	}
	return DefaultMachineTimeout
}

func (r *run) fleet(name string) (Fleet, error) {
	f, ok := r.e.Fleets[name]
	if !ok || f.Provider == nil || f.Config == nil || f.Config.GCP == nil {
		return Fleet{}, fmt.Errorf("fleet %q: no provider to create or delete its machines", name)
	}
	return f, nil
}

// deleteMachine deletes a recorded machine and forgets it.
func (r *run) deleteMachine(ctx context.Context, fleet, name string) error {
	f, err := r.fleet(fleet)
	if err == nil {
		r.progress(Event{Host: name, Step: StepDeleting})
		// A delete that started finishes (bounded): Ctrl-C must not leave
		// a machine half deleted and unrecorded.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.e.machineTimeout())
		defer cancel()
		err = f.Provider.Delete(pctx, f.Config, name)
	}
	if err != nil {
		r.machineFailed(name, fmt.Errorf("delete machine %s: %w", name, err))
		return err
	}
	r.sv.update(func(st *state.State) { st.RemoveMachine(name) })
	flushErr := r.sv.flush()
	r.progress(Event{Host: name, Step: StepDeleted})
	r.mu.Lock()
	r.res.DeletedMachines++
	r.mu.Unlock()
	return flushErr
}

// createMachine creates a machine and records it at once.
func (r *run) createMachine(ctx context.Context, fleet, name string) bool {
	f, err := r.fleet(fleet)
	var m state.Machine
	if err == nil {
		var lineage string
		r.sv.view(func(st *state.State) { lineage = st.Lineage })
		r.progress(Event{Host: name, Step: StepCreating, Detail: f.Config.GCP.MachineType + " in " + f.Config.GCP.Zone})
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.e.machineTimeout())
		defer cancel()
		m, err = f.Provider.Create(pctx, f.Config, name, lineage)
	}
	if err != nil {
		r.machineFailed(name, fmt.Errorf("create machine %s: %w", name, err))
		// An insert the provider accepted may have made a machine even
		// though the create failed (its operation failed or timed out),
		// and a machine an earlier, killed apply made may hold the name:
		// record it if it carries this state's labels, so that nothing
		// leaks. A machine of that name without them is not gpulayer's,
		// and is never recorded (nor, so, ever deleted).
		if f.Provider != nil {
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.e.machineTimeout()/10)
			defer cancel()
			var lineage string
			r.sv.view(func(st *state.State) { lineage = st.Lineage })
			if ours, lerr := f.Provider.List(lctx, f.Config, lineage); lerr == nil {
				for _, found := range ours {
					if found.Name == name {
						found.Fleet, found.Project, found.SpecHash = fleet, f.Config.GCP.Project, f.Config.GCP.SpecHash()
						r.sv.update(func(st *state.State) { st.SetMachine(found) })
						_ = r.sv.flush()
					}
				}
			}
		}
		return false
	}
	m.Fleet, m.Name, m.Project = fleet, name, f.Config.GCP.Project
	if m.SpecHash == "" {
		m.SpecHash = f.Config.GCP.SpecHash()
	}
	r.sv.update(func(st *state.State) { st.SetMachine(m) })
	flushErr := r.sv.flush()
	r.progress(Event{Host: name, Step: StepCreated, Detail: reconcile.CreatedHost(f.Config, m).Address})
	r.mu.Lock()
	r.res.CreatedMachines++
	r.mu.Unlock()
	return flushErr == nil
}

func (r *run) machineFailed(name string, err error) {
	r.progress(Event{Host: name, Step: StepFailed, Detail: err.Error()})
	r.mu.Lock()
	r.res.MachineErrors = append(r.res.MachineErrors, err)
	r.mu.Unlock()
}

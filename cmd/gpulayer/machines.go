package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/providers"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/apply"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/planview"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/ssh"
)

// listTimeout bounds the listing of one fleet's machines at refresh.
const listTimeout = 60 * time.Second

// DefaultMachineWait bounds how long apply waits for the machines it
// created to answer SSH before it gives up placing the jobs that wait for
// them (the next plan places them).
const DefaultMachineWait = 10 * time.Minute

// machineRetry is the pause between two probes of a machine that does not
// answer yet.
var machineRetry = 5 * time.Second

// needsProvider says the configuration or state has created machines.
func needsProvider(cfg *config.Config, st *state.State) bool {
	for _, f := range cfg.Fleets {
		if f.GCP != nil {
			return true
		}
	}
	return len(st.Machines) > 0
}

// listMachines asks each fleet's provider which machines carry its labels
// and the state's lineage. A fleet whose listing fails is planned from
// state's record, with a warning.
func listMachines(ctx context.Context, prov providers.Provider, cfg *config.Config, st *state.State) map[string]reconcile.Listing {
	out := map[string]reconcile.Listing{}
	if st.Lineage == "" {
		// Nothing was ever saved, so nothing was created.
		return out
	}
	for _, f := range cfg.Fleets {
		if f.GCP == nil {
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, listTimeout)
		ms, err := prov.List(lctx, f, st.Lineage)
		cancel()
		if err != nil {
			out[f.Name] = reconcile.Listing{Error: err.Error()}
			continue
		}
		out[f.Name] = reconcile.Listing{Machines: ms}
	}
	return out
}

// executorFleets are the fleets apply creates and deletes machines of: the
// configured ones, and, for machines whose fleet is no longer declared, a
// fleet made from their record (enough to delete them).
func executorFleets(prov providers.Provider, cfg *config.Config, st *state.State) map[string]apply.Fleet {
	out := map[string]apply.Fleet{}
	for _, f := range cfg.Fleets {
		if f.GCP != nil {
			out[f.Name] = apply.Fleet{Config: f, Provider: prov}
		}
	}
	for _, m := range st.Machines {
		if _, ok := out[m.Fleet]; !ok {
			out[m.Fleet] = apply.Fleet{Provider: prov, Config: &config.Fleet{Name: m.Fleet,
				GCP: &config.GCP{Project: m.Project, Zone: m.Zone}}}
		}
	}
	return out
}

// awaitMachines waits, until the deadline or ctx ends, for the named
// created machines to answer a probe. Each round asks the provider again
// for the machine's record first: its host keys are published once it has
// booted, and are pinned from then on; a physical topology reported since
// the insert places it from then on. It returns the facts of those that
// answered, and the state with the records it refreshed (saved). waiting
// is told, once per machine, why one does not answer yet.
func awaitMachines(ctx context.Context, waiting func(host, why string), in *planInputs, backend state.Backend, prov providers.Provider,
	cfg *config.Config, st *state.State, names []string, wait time.Duration) ([]facts.Host, *state.State, error) {
	// Every call of a round (describe, probe) ends by the deadline too.
	bounded, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	deadline, _ := bounded.Deadline()
	left := slices.Clone(names)
	var ready []facts.Host
	pool := ssh.NewPool(ssh.Options{Parallelism: in.parallelism, MaxOutputBytes: facts.MaxOutputBytes})
	defer pool.Close()
	fleets := map[string]*config.Fleet{}
	for _, f := range cfg.Fleets {
		fleets[f.Name] = f
	}
	for round := 0; len(left) > 0; round++ {
		if round > 0 {
			if time.Now().Add(machineRetry).After(deadline) {
				break
			}
			select {
			case <-ctx.Done():
				return ready, st, ctx.Err()
			case <-time.After(machineRetry):
			}
		}
		changed := false
		for _, name := range left {
			i := slices.IndexFunc(st.Machines, func(m state.Machine) bool { return m.Name == name })
			if i < 0 || fleets[st.Machines[i].Fleet] == nil {
				continue
			}
			f := fleets[st.Machines[i].Fleet]
			dctx, cancelDescribe := context.WithTimeout(bounded, listTimeout)
			now, found, err := prov.Describe(dctx, f, name)
			cancelDescribe()
			if err != nil || !found {
				continue
			}
			if !slices.Equal(now.HostKeys, st.Machines[i].HostKeys) {
				st.Machines[i].HostKeys = now.HostKeys
				changed = true
			}
			if ms, gained := reconcile.ListedMachines(st.Machines, map[string]reconcile.Listing{f.Name: {Machines: []state.Machine{now}}}); gained {
				st.Machines = ms
				changed = true
			}
		}
		if changed {
			next := st.Clone()
			if err := backend.Save(ctx, next, st.Serial); err != nil {
				return ready, st, err
			}
			st = next
		}
		withMachines := reconcile.WithMachines(cfg, st.Machines)
		all, err := probe.Machines(withMachines)
		if err != nil {
			return ready, st, err
		}
		var targets []probe.Machine
		for _, m := range all {
			if slices.Contains(left, m.Name) {
				targets = append(targets, m)
			}
		}
		doc := probe.Fleet(bounded, pool, targets, probe.Options{Parallelism: in.parallelism, Timeout: in.timeout})
		for _, h := range doc.Hosts {
			if h.Status == facts.StatusOK {
				ready = append(ready, h)
				left = slices.DeleteFunc(left, func(n string) bool { return n == h.Name })
			} else if round == 0 {
				waiting(h.Name, h.Error)
			}
		}
		if ctx.Err() != nil {
			return ready, st, ctx.Err()
		}
	}
	if len(left) > 0 {
		return ready, st, fmt.Errorf("machines %v did not answer SSH within %s; the jobs waiting for them are placed by the next plan", left, wait)
	}
	return ready, st, nil
}

// pendingJobs are the jobs a plan says wait for the machines it creates.
func pendingJobs(p *reconcile.Plan) []string {
	var out []string
	for _, c := range p.Jobs {
		for _, r := range c.Reasons {
			if r.Code == reconcile.ReasonMachinesPending {
				out = append(out, c.Job)
				break
			}
		}
	}
	return out
}

// mergeFacts is doc with the hosts of fresh replacing or joining its own.
func mergeFacts(doc *facts.Document, fresh []facts.Host) *facts.Document {
	out := &facts.Document{Version: facts.Version}
	if doc != nil {
		*out = *doc
		out.Hosts = slices.Clone(doc.Hosts)
	}
	for _, h := range fresh {
		if i := slices.IndexFunc(out.Hosts, func(x facts.Host) bool { return x.Name == h.Name }); i >= 0 {
			out.Hosts[i] = h
		} else {
			out.Hosts = append(out.Hosts, h)
		}
	}
	return out
}

func closeProvider(p providers.Provider) {
	if p != nil {
		p.Close()
	}
}

// newMachines is how the second half of an apply that created machines
// is bounded and reported: apply prints lines and the plan; watch prints
// events and carries out only the lifecycle's part of that plan.
type newMachines struct {
	in           *planInputs
	wait         time.Duration
	nodeParallel int
	// say prints a line of progress, warn a warning; show, the plan of
	// the jobs placed.
	say, warn func(string)
	show      func(*reconcile.Plan) error
	progress  func(apply.Event)
	// lifecycleOnly keeps only the lifecycle pass's changes of the plan
	// (gpulayer watch).
	lifecycleOnly bool
}

// applyNewMachines is how apply reports the second half.
func applyNewMachines(io *iostreams.IOStreams, opts *applyOptions) newMachines {
	return newMachines{
		in: &opts.in, wait: opts.machineWait, nodeParallel: opts.nodeParallel,
		say:  func(line string) { fmt.Fprintln(io.Out, line) },
		warn: func(line string) { fmt.Fprintln(io.ErrOut, "Warning: "+line) },
		show: func(p *reconcile.Plan) error {
			fmt.Fprintln(io.Out)
			return planview.Text(io.Out, p, planview.Options{Color: io.ColorEnabled()})
		},
		progress: func(ev apply.Event) { writeEvent(io, ev) },
	}
}

// placeOnNewMachines is the second half of an apply that created machines:
// it waits for them to answer, probes them, plans the jobs that waited for
// them (those jobs only, by the same rules as any plan), and carries that
// plan out.
func placeOnNewMachines(ctx context.Context, nm newMachines, x execution, first *apply.Result,
	pending []string, pool *ssh.Pool) (*apply.Result, error) {
	nm.say(fmt.Sprintf("\nWaiting for %s to answer SSH, to place %s.",
		iostreams.Sanitize(strings.Join(first.Created, ", "), false), iostreams.Sanitize(strings.Join(pending, ", "), false)))
	waiting := func(host, why string) {
		nm.say(fmt.Sprintf("%s: waiting for SSH (%s)", iostreams.Sanitize(host, false), iostreams.Sanitize(why, false)))
	}
	ready, st, err := awaitMachines(ctx, waiting, nm.in, x.backend, x.provider, x.cfg, first.State, first.Created, nm.wait)
	if err != nil && ctx.Err() != nil {
		return nil, apply.ErrInterrupted
	}
	if err != nil && len(ready) == 0 {
		return nil, err
	}
	if err != nil {
		nm.warn(iostreams.Sanitize(err.Error(), false))
	}
	cfg := reconcile.WithMachines(x.cfg, st.Machines)
	doc := mergeFacts(x.facts, ready)
	p := reconcile.MakePlan(reconcile.Input{
		Config: cfg, State: st, Facts: doc, Targets: pending, Version: buildVersion(),
		Refresh: reconcile.Refresh{Source: reconcile.RefreshProbe}, Code: x.code,
	}).WithoutMachines()
	if nm.lifecycleOnly {
		p, _ = p.LifecycleOnly()
	}
	if err := nm.show(p); err != nil {
		return nil, err
	}
	if !p.HasChanges() {
		return &apply.Result{State: st}, nil
	}
	targets, err := configTargets(cfg)
	if err != nil {
		return nil, err
	}
	ex := &apply.Executor{
		Runner: pool, Backend: x.backend, Targets: targets, Specs: x.specs, Code: x.trees,
		Opts: apply.Options{Parallelism: nm.nodeParallel, Progress: nm.progress},
	}
	nm.say("")
	return ex.Apply(ctx, st, p, doc)
}

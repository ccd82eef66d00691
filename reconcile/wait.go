package reconcile

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/placement"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/topology"
)

// WaitReport is a plan's max_wait decision for a job (docs/placement.md,
// "Waiting for a tighter group"): whether it waits for a tighter group
// than it can have now, for which, until when, and because of whose
// expected ends; or why it is placed now.
type WaitReport struct {
	// Waiting says the job waits this plan; false, that it is placed now
	// at the looser level.
	Waiting bool `json:"waiting"`
	// Since is when the job started waiting (state's record, or this
	// plan's time for a new wait) and Until when max_wait ends; after it
	// the job is placed now whatever frees.
	Since   time.Time      `json:"since"`
	Until   time.Time      `json:"until"`
	MaxWait state.Duration `json:"max_wait"`
	// Level and Location are the group waited for, ExpectedAt when
	// enough of it is expected to free, Holders the running jobs whose
	// expected ends free it; set only when Waiting.
	Level      placement.Level    `json:"level"`
	Location   placement.Location `json:"location"`
	ExpectedAt *time.Time         `json:"expected_at,omitempty"`
	Holders    []placement.Holder `json:"holders,omitempty"`
	// Overdue are running jobs past their expected_duration: counted as
	// holding their machines, not as freeing them.
	Overdue []string `json:"overdue,omitempty"`
	// Record says apply writes Since into state: the wait is new.
	Record bool `json:"record"`
	// takes are the machines and GPUs the estimate counts on, promised
	// to this job.
	takes []placement.Placement
}

// waits makes the max_wait decision of every job placed in this pass at a
// looser level than a network group whose policy has max_wait; a job that
// waits leaves the pass. It reports whether one did, so that the pass is
// made again without it (the GPUs it would have taken go to others).
func (pl *planner) waits(decisions map[string]placement.Decision) bool {
	// open are the releases of running jobs on machines no waiting job
	// is promised: what an estimate may count on.
	var open []placement.Release
	releasesMade := false
	again := false
	// promised are the machines and GPUs the jobs that wait count on: a
	// job estimated after them does not count on the same ones, and the
	// next pass places no job on those free now (a wait for a group whose
	// free machines go to others would wait for nothing).
	pl.promised = map[string]topology.DeviceSet{}
	var view *fleetView // built once, for the first estimate
	promise := func(takes []placement.Placement) {
		for _, p := range takes {
			pl.promised[p.Worker] |= topology.DeviceSetOf(p.GPUs...)
			if view != nil {
				view.take(p.Worker, p.GPUs, false)
			}
		}
		open = slices.DeleteFunc(open, func(r placement.Release) bool { _, ok := pl.promised[r.Worker]; return ok })
	}
	for _, v := range pl.verdicts {
		if v.wait != nil && v.wait.Waiting {
			promise(v.wait.takes)
		}
	}
	for _, v := range pl.verdicts {
		if v.wait != nil && v.wait.Waiting {
			continue // decided by an earlier pass: it left the pass
		}
		d, ok := decisions[v.name]
		if !v.place || !ok || d.Status != placement.StatusPlaced || v.spec.Policy.MaxWait <= 0 ||
			v.spec.Policy.GroupLocality != config.LocalityPrefer || d.Level == tightestLevel || v.swap != nil {
			v.wait = nil
			continue
		}
		if !releasesMade {
			open, releasesMade = pl.releases(), true
			open = slices.DeleteFunc(open, func(r placement.Release) bool { _, ok := pl.promised[r.Worker]; return ok })
		}
		now := pl.in.Now
		maxWait := time.Duration(v.spec.Policy.MaxWait)
		rep := &WaitReport{Since: now, MaxWait: v.spec.Policy.MaxWait, Record: true}
		if w := pl.st.Wait(v.name); w != nil && w.ConfigHash == v.spec.Hash() {
			rep.Since, rep.Record = w.Since, false
		}
		rep.Until = rep.Since.Add(maxWait)
		v.wait = rep
		if !now.Before(rep.Until) {
			rep.Record = false
			continue // max_wait is over: placed now
		}
		if view == nil {
			view = pl.newFleetView(decisions)
		}
		view.without(d, pl.promised)
		job := placement.Job{Name: v.name, Nodes: v.spec.Nodes, GPUsPerNode: v.spec.GPUsPerNode, Torchrun: v.spec.Launcher == config.LauncherTorchrun}
		est := placement.EstimateWait(job, Policy(v.spec.Policy), view.ws, open, d.Level, now, rep.Until)
		view.with(d)
		rep.Overdue = est.Overdue
		if !est.Wait {
			rep.Record = false
			continue
		}
		at := est.At
		rep.Waiting, rep.Level, rep.Location, rep.ExpectedAt, rep.Holders = true, est.Level, est.Location, &at, est.Holders
		rep.takes = est.Takes
		promise(est.Takes)
		v.place, again = false, true
		if v.prior != nil && v.healthy && onlyConfigChanged(v.reasons) {
			// As when its new shape cannot be placed at all: a healthy
			// job replaced only for its configuration keeps running, and
			// holding its GPUs, while its new one waits.
			v.keep = true
		}
	}
	return again
}

// mayWait says a job to place has max_wait: only then does a pass keep
// its workers for the estimates.
func (pl *planner) mayWait() bool {
	for _, v := range pl.verdicts {
		if v.place && v.spec.Policy.MaxWait > 0 {
			return true
		}
	}
	return false
}

// releases are the nodes of the jobs that keep running and declare an
// expected_duration, each freeing its GPUs at its launch plus that
// duration (the configured value: it is not part of the hash, so a person
// may correct it for a running job).
func (pl *planner) releases() []placement.Release {
	var out []placement.Release
	for _, v := range pl.verdicts {
		ed := time.Duration(v.spec.Lifecycle.ExpectedDuration)
		if !v.keep || v.ended || v.prior == nil || ed <= 0 || v.prior.LaunchedAt.IsZero() {
			continue
		}
		at := v.prior.LaunchedAt.Add(ed)
		for _, n := range v.prior.Nodes {
			out = append(out, placement.Release{Job: v.name, Worker: n.Host, GPUs: n.GPUs, At: at})
		}
	}
	return out
}

// fleetView is the fleet a wait estimate starts from: the workers of the
// last pass with the GPUs every placed job of this plan takes taken, and
// those promised to the jobs that wait; without gives one job's own back
// for its estimate, with takes them again. One copy per plan, not one per
// estimate.
type fleetView struct {
	ws []placement.Worker
	at map[string]int
}

func (pl *planner) newFleetView(decisions map[string]placement.Decision) *fleetView {
	v := &fleetView{ws: slices.Clone(pl.workers), at: make(map[string]int, len(pl.workers))}
	for i := range v.ws {
		v.at[v.ws[i].ID] = i
		v.ws[i].Free &^= pl.promised[v.ws[i].ID]
	}
	for _, d := range decisions {
		if d.Status == placement.StatusPlaced {
			for _, p := range d.Workers {
				v.take(p.Worker, p.GPUs, true)
			}
		}
	}
	return v
}

// take takes GPUs of a worker, with a task when task is set.
func (v *fleetView) take(worker string, gpus []int, task bool) {
	if i, ok := v.at[worker]; ok {
		v.ws[i].Free &^= topology.DeviceSetOf(gpus...)
		if task {
			v.ws[i].RunningTasks++
		}
	}
}

// without gives the GPUs and tasks of d back, but those promised.
func (v *fleetView) without(d placement.Decision, promised map[string]topology.DeviceSet) {
	for _, p := range d.Workers {
		if i, ok := v.at[p.Worker]; ok {
			v.ws[i].Free = (v.ws[i].Free | topology.DeviceSetOf(p.GPUs...)) &^ promised[p.Worker]
			v.ws[i].RunningTasks = max(0, v.ws[i].RunningTasks-1)
		}
	}
}

// with takes d's GPUs and tasks again.
func (v *fleetView) with(d placement.Decision) {
	for _, p := range d.Workers {
		v.take(p.Worker, p.GPUs, true)
	}
}

// waitingChange is the change of a job that waits for a tighter group: it
// launches nothing, and what is left of an earlier run is stopped, as for
// any waiting job; a healthy one replaced only for its configuration
// keeps running (kept) until its new one is placed.
func (pl *planner) waitingChange(c *JobChange, v *verdict) {
	c.Action, c.StopPrior = ActionWaiting, v.prior != nil && !v.prior.Ended() && !v.keep
	msg := waitWords(v.wait, pl.in.Now)
	if v.keep {
		c.Placement = pl.recordedPlacement(v)
		msg += "; the job keeps running as it was launched"
	}
	c.Decision = &Decision{Status: placement.StatusWaiting, Summary: "waiting: " + msg}
	if v.prior == nil {
		c.Reasons = nil // "not running yet" says nothing the wait does not
	}
	c.Reasons = append(c.Reasons, Reason{Code: ReasonWaitingForGroup, Message: msg})
}

// placedNowReason is the reason a job under max_wait is placed now at the
// level it got.
func placedNowReason(w *WaitReport, level placement.Level, now time.Time) Reason {
	msg := fmt.Sprintf("placed now at %s level: no tighter group frees within max_wait (%s)", levelName(level), time.Duration(w.MaxWait))
	if !now.Before(w.Until) {
		msg = fmt.Sprintf("placed now at %s level: it waited max_wait (%s, since %s) for a tighter group", levelName(level),
			time.Duration(w.MaxWait), w.Since.UTC().Format(time.RFC3339))
	}
	if len(w.Overdue) > 0 {
		msg += fmt.Sprintf("; %s past %s expected_duration, counted as holding %s machines", quotedJobs(w.Overdue),
			plural(len(w.Overdue), "its", "their"), plural(len(w.Overdue), "its", "their"))
	}
	return Reason{Code: ReasonNoTighterGroup, Message: msg}
}

// waitWords says what a job waits for: `waiting for network group rack-3:
// job "pretrain" is expected to free 2 machines in ~6m (max_wait 15m0s
// until 2026-12-02T12:15:00Z)`.
func waitWords(w *WaitReport, now time.Time) string {
	machines := 0
	var jobs []string
	for _, h := range w.Holders {
		machines += h.Machines
		jobs = append(jobs, h.Job)
	}
	in := time.Minute
	if w.ExpectedAt != nil {
		in = max(time.Minute, w.ExpectedAt.Sub(now).Round(time.Minute))
	}
	verb := "is"
	if len(jobs) > 1 {
		verb = "are"
	}
	return fmt.Sprintf("waiting for %s %s: %s %s expected to free %d %s in ~%s (max_wait %s until %s)",
		levelWords(w.Level), w.Location.At(w.Level), quotedJobs(jobs), verb, machines, plural(machines, "machine", "machines"),
		shortDuration(in), time.Duration(w.MaxWait), w.Until.UTC().Format(time.RFC3339))
}

// quotedJobs is `job "a"` or `jobs "a", "b"`.
func quotedJobs(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return plural(len(names), "job ", "jobs ") + strings.Join(q, ", ")
}

// shortDuration is "6m", "1h30m": minutes and hours without the zero
// seconds Go writes.
func shortDuration(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	return strings.TrimSuffix(s, "h0m")
}

func levelWords(l placement.Level) string { return l.Words() }

// tightestLevel is the tightest locality level: a job placed there has
// no tighter group to wait for.
const tightestLevel placement.Level = 0

// levelName is the level as "placed now at zone level" says it.
func levelName(l placement.Level) string {
	if l == placement.LevelAny {
		return "any"
	}
	return levelWords(l)
}

// endedWaits lists the wait records apply removes: those of jobs this
// plan decides for that no longer wait (placed, changed, removed, no
// longer under max_wait). A job that cannot be placed at all now keeps
// its record. Jobs the plan leaves alone (--target, held)
// keep theirs.
func (pl *planner) endedWaits() {
	for _, w := range pl.st.Waits {
		if pl.leftAlone(w.Job) && !pl.in.Destroy {
			continue
		}
		c := pl.plan.Job(w.Job)
		if c != nil && c.Wait != nil && c.Wait.Waiting && !c.Wait.Record {
			continue
		}
		if c != nil && c.Action == ActionWaiting && c.Wait == nil && c.ConfigHash == w.ConfigHash {
			// Waiting for machines at any level now: still waiting, and
			// max_wait still counts from when it began.
			continue
		}
		pl.plan.EndedWaits = append(pl.plan.EndedWaits, w.Job)
	}
}

// HasWaitRecords says the plan starts or ends a wait record.
func (p *Plan) HasWaitRecords() bool {
	if len(p.EndedWaits) > 0 {
		return true
	}
	for _, c := range p.Jobs {
		if c.Wait != nil && c.Wait.Waiting && c.Wait.Record {
			return true
		}
	}
	return false
}

// RecordWaits writes a plan's wait decisions into state: the start of
// each new wait, and the end of those that ended (EndedWaits). Apply
// calls it once, before it launches anything: a launch that then fails
// leaves no wait record, and the next plan that places the job late
// starts a new wait.
func RecordWaits(st *state.State, p *Plan) {
	for _, name := range p.EndedWaits {
		st.RemoveWait(name)
	}
	for _, c := range p.Jobs {
		if w := c.Wait; w != nil && w.Waiting && w.Record {
			st.SetWait(state.Wait{Job: c.Job, ConfigHash: c.ConfigHash, Since: w.Since.UTC(), Level: w.Level.String(),
				Location: state.Location{Region: w.Location.Region, Zone: w.Location.Zone, NetworkGroup: w.Location.NetworkGroup}})
		}
	}
}

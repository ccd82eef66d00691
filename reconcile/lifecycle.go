package reconcile

import (
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// RunReport is what a plan found of a job's recorded run and decided
// about its end (docs/lifecycle.md): the lifecycle pass every plan and
// apply make. Apply writes it into state when Record is set, whether or
// not the plan changes anything else, so that an end is recorded once and
// a finished batch job is never launched again.
type RunReport struct {
	// State is the run's state: running, unknown (a host did not answer),
	// succeeded, failed, lost or restarting.
	State string `json:"state"`
	// EndReason is why it ended (an end reason code); Message says it for
	// people ("node 1 on a2 exited with status 3").
	EndReason string `json:"end_reason,omitempty"`
	Message   string `json:"message,omitempty"`
	// Nodes are how the nodes that ended ended, in rank order.
	Nodes      []state.NodeEnd `json:"nodes,omitempty"`
	LaunchedAt time.Time       `json:"launched_at"`
	EndedAt    *time.Time      `json:"ended_at,omitempty"`
	RestartAt  *time.Time      `json:"restart_at,omitempty"`
	// FirstExitAt is when a node was first seen to exit 0 while others
	// ran; Unreachable, per rank, when a node's host first did not answer.
	FirstExitAt *time.Time        `json:"first_exit_at,omitempty"`
	Unreachable map[int]time.Time `json:"unreachable,omitempty"`
	// Restarts and LostRestarts are the restarts used so far, of
	// Attempts and OnLost allowed (-1: unlimited).
	Restarts     int `json:"restarts"`
	Attempts     int `json:"attempts"`
	LostRestarts int `json:"lost_restarts"`
	OnLost       int `json:"on_lost"`
	// Restart says this plan launches the job again (Action replace);
	// Budget which budget the restart uses: "attempts", "on_lost" or ""
	// (a retried exit code, not counted).
	Restart bool   `json:"restart,omitempty"`
	Budget  string `json:"budget,omitempty"`
	// Record says apply writes this report into state.
	Record bool `json:"record"`
}

// Run states, beyond the statuses state records.
const (
	RunRunning = "running"
	RunUnknown = "unknown"
)

// End reason codes (state.Job.EndReason, RunReport.EndReason).
const (
	EndSucceeded = "succeeded"         // every node exited 0
	EndExited    = "exited"            // a service's node exited (it is restarted)
	EndFailed    = "node_failed"       // a node exited non-zero or was killed
	EndLost      = "node_lost"         // a node vanished without an exit status
	EndStraggler = "straggler"         // nodes still ran completion_grace after one exited 0
	EndDeadline  = "deadline_exceeded" // the run lasted longer than its deadline
	EndStalled   = "stalled"           // no node logged or touched its heartbeat for stall_timeout
)

// nodeSeen is what the refresh says of one node of a running job.
type nodeSeen struct {
	alive   bool
	unknown bool // its host did not answer, or was not asked
	end     *state.NodeEnd
	lostWhy string
}

// lifecycle is the lifecycle pass for a job whose configuration did not
// change (docs/lifecycle.md): it reads how its run is doing, decides its
// end and its restart by the job's policy, and sets the verdict. It
// returns false when the job is not its to decide (launching, a launch
// that failed before anything ran, a host removed): checkPrior decides.
func (pl *planner) lifecycle(v *verdict) bool {
	j := v.prior
	lc := v.spec.Lifecycle
	now := pl.in.Now
	rep := &RunReport{State: j.Status, EndReason: j.EndReason, LaunchedAt: j.LaunchedAt, Restarts: j.Restarts, Attempts: lc.Attempts,
		LostRestarts: j.LostRestarts, OnLost: lc.OnLost, EndedAt: j.EndedAt, RestartAt: j.RestartAt, FirstExitAt: j.FirstExitAt}
	for _, n := range j.Nodes {
		if n.End != nil {
			rep.Nodes = append(rep.Nodes, *n.End)
		}
	}
	if j.Ended() {
		rep.Message = j.Error
		if j.Status == state.JobSucceeded {
			rep.Message = fmt.Sprintf("%d/%d nodes exited 0", len(rep.Nodes), len(j.Nodes))
		}
		v.run = rep
		pl.decideEnded(v, rep, false)
		return true
	}
	if j.Status != state.JobRunning {
		return false
	}
	// A running job: what each node is doing.
	seen := make([]nodeSeen, len(j.Nodes))
	rep.Unreachable = map[int]time.Time{}
	var goneReasons []Reason
	for i, n := range j.Nodes {
		h := pl.hosts[n.Host]
		at := describeNode(n.Host, n.Rank)
		if gone, ok := pl.machineGone[n.Host]; ok {
			if gone.Code == ReasonMachineDeleted {
				return false // this plan deletes it: checkPrior replaces the job
			}
			// Deleted outside gpulayer, stopped or preempted: lost.
			rank := n.Rank
			gone.Node, gone.Host = &rank, n.Host
			goneReasons = append(goneReasons, gone)
			seen[i] = nodeSeen{lostWhy: fmt.Sprintf("node %d: %s", n.Rank, gone.Message)}
			v.lostRanks = append(v.lostRanks, n.Rank) // its machine is lost: a hot swap may replace it
			continue
		}
		if h == nil || movedFrom(h, n) {
			return false // the configuration moved it: checkPrior replaces it
		}
		if h.problem != nil {
			since := now
			if n.UnreachableSince != nil {
				since = *n.UnreachableSince
			}
			if h.problem.Status != StatusNoFacts {
				rep.Unreachable[n.Rank] = since
			}
			if after := time.Duration(lc.LostAfter); h.problem.Status != StatusNoFacts && after > 0 && !now.Before(since.Add(after)) {
				seen[i] = nodeSeen{lostWhy: fmt.Sprintf("host %s has not answered since %s (lost_after %s)", at, since.UTC().Format(time.RFC3339), after)}
				v.lostRanks = append(v.lostRanks, n.Rank)
			} else {
				seen[i] = nodeSeen{unknown: true}
			}
			continue
		}
		if n.End != nil {
			seen[i] = nodeSeen{end: n.End}
			continue
		}
		r, alive, known := processState(h.facts, n, at)
		if known {
			v.alive[i] = &alive
		}
		switch {
		case !known:
			seen[i] = nodeSeen{alive: n.Process != nil, unknown: n.Process == nil}
		case alive:
			seen[i] = nodeSeen{alive: true}
		case r.ExitStatus != nil:
			status := *r.ExitStatus
			seen[i] = nodeSeen{end: &state.NodeEnd{Rank: n.Rank, ExitStatus: &status, Signal: signalOf(status), EndedAt: endedAt(h.facts, n.Process.PID, now), LogTail: r.LogTail}}
		default:
			seen[i] = nodeSeen{lostWhy: r.Message + ", with no exit status recorded", end: &state.NodeEnd{Rank: n.Rank, Lost: true, EndedAt: now, LogTail: r.LogTail}}
		}
	}
	if len(rep.Unreachable) == 0 {
		rep.Unreachable = nil
	}
	if !sameUnreachable(j, rep.Unreachable) {
		rep.Record = true
	}
	v.run = rep
	rep.Nodes = nil
	var alive, succeeded, unknown int
	var failed, lost *state.NodeEnd
	var lostWhy string
	for i := range seen {
		s := seen[i]
		switch {
		case s.lostWhy != "":
			if lost == nil {
				lost, lostWhy = s.end, s.lostWhy
				if lost == nil {
					lost = &state.NodeEnd{Rank: j.Nodes[i].Rank, Lost: true, EndedAt: now}
				}
			}
			rep.Nodes = append(rep.Nodes, *lostOr(s.end, j.Nodes[i].Rank, now))
		case s.end != nil:
			rep.Nodes = append(rep.Nodes, *s.end)
			if s.end.ExitStatus != nil && *s.end.ExitStatus == 0 {
				succeeded++
			} else if failed == nil {
				failed = s.end
			}
		case s.unknown:
			unknown++
		case s.alive:
			alive++
		}
	}
	if len(rep.Nodes) > len(endsOf(j)) {
		rep.Record = true
	}
	ended := func(state, reason, msg string) {
		rep.State, rep.EndReason, rep.Message = state, reason, msg
		// The run ended when the last node seen to end did (what was
		// still running is stopped now).
		t := now
		if reason == EndSucceeded || reason == EndExited || reason == EndFailed {
			t = time.Time{}
			for _, e := range rep.Nodes {
				if e.EndedAt.After(t) {
					t = e.EndedAt
				}
			}
			if t.IsZero() {
				t = now
			}
		}
		rep.EndedAt, rep.Record = &t, true
		pl.decideEnded(v, rep, alive > 0 || unknown > 0)
	}
	stall := ""
	if unknown == 0 && alive == len(j.Nodes) {
		stall = pl.stalled(j, time.Duration(lc.StallTimeout))
	}
	switch {
	case lost != nil:
		ended(state.JobLost, EndLost, lostWhy)
		if rep.Restart && len(goneReasons) > 0 {
			// Its machines say best why it runs again.
			v.reasons = goneReasons
		}
	case failed != nil:
		ended(state.JobFailed, EndFailed, endWords(j, *failed))
	case succeeded == len(j.Nodes):
		if lc.Kind == config.KindService {
			ended(state.JobFailed, EndExited, "every node exited 0")
		} else {
			ended(state.JobSucceeded, EndSucceeded, fmt.Sprintf("%d/%d nodes exited 0", succeeded, len(j.Nodes)))
		}
	case succeeded > 0 && alive+unknown > 0:
		first := now
		if j.FirstExitAt != nil {
			first = *j.FirstExitAt
		} else {
			rep.FirstExitAt, rep.Record = &first, true
		}
		if grace := time.Duration(lc.CompletionGrace); grace > 0 && !now.Before(first.Add(grace)) {
			ended(state.JobFailed, EndStraggler, fmt.Sprintf("%d of %d nodes exited 0 at %s and the others still ran %s later (completion_grace)",
				succeeded, len(j.Nodes), first.UTC().Format(time.RFC3339), grace))
			return true
		}
		v.keep, v.healthy = true, true
	case time.Duration(lc.Deadline) > 0 && !now.Before(j.LaunchedAt.Add(time.Duration(lc.Deadline))):
		ended(state.JobFailed, EndDeadline, fmt.Sprintf("still running %s after its launch (deadline)", time.Duration(lc.Deadline)))
	case stall != "":
		ended(state.JobFailed, EndStalled, stall)
	default:
		// Still running: the checks of a running job (its GPUs taken by a
		// stranger, its host moved) still replace it; a host that did not
		// answer, or a node's end, are the lifecycle's to judge.
		pl.checkPrior(v)
		v.reasons = slices.DeleteFunc(v.reasons, func(r Reason) bool {
			return r.Code == ReasonHostUnreachable || r.Code == ReasonProcessExited
		})
		if len(v.reasons) > 0 {
			v.place = true
			if !rep.Record {
				v.run = nil
			}
			return true
		}
		v.keep, v.healthy = true, unknown == 0
		if unknown > 0 {
			rep.State = RunUnknown
			rep.Message = fmt.Sprintf("%d of %d nodes' hosts did not answer: the job is taken to run there until lost_after (%s) passes", unknown, len(j.Nodes), time.Duration(lc.LostAfter))
		} else {
			rep.State = RunRunning
		}
	}
	if rep.State == RunRunning || rep.State == RunUnknown {
		if !rep.Record {
			v.run = nil
		}
	}
	return true
}

// decideEnded decides what becomes of a run that ended: restarted now,
// restarted once its delay is past, or left as it ended; survivors says
// some of its nodes may still run, and are stopped in any case.
func (pl *planner) decideEnded(v *verdict, rep *RunReport, survivors bool) {
	j, lc := v.prior, v.spec.Lifecycle
	restart, budget := restartAllowed(lc, j, rep)
	if rep.State == state.JobRestarting && !restart {
		// The policy changed since it was decided; it ends as it ended.
		rep.State = state.JobFailed
		if rep.EndReason == EndLost {
			rep.State = state.JobLost
		}
		rep.Record = true
	}
	if !restart {
		if rep.State == state.JobRestarting {
			rep.State = state.JobFailed
		}
		v.ended, v.stopOnly = true, survivors
		if !survivors {
			v.keep = true
		}
		return
	}
	// The delay is for the job's own failures (a crash loop must not
	// spin); a gang that lost a machine is placed again at once.
	due := pl.in.Now
	if rep.EndedAt != nil && budget != "on_lost" {
		due = rep.EndedAt.Add(restartDelay(lc, j))
	}
	rep.Budget = budget
	if !pl.in.Now.Before(due) {
		rep.Restart = true
		v.place = true
		v.reasons = append(v.reasons, Reason{Code: ReasonRestart, Message: restartWords(rep, budget)})
		return
	}
	if rep.State != state.JobRestarting || rep.RestartAt == nil || !rep.RestartAt.Equal(due) {
		rep.State, rep.RestartAt, rep.Record = state.JobRestarting, &due, true
	}
	v.ended, v.stopOnly = true, survivors
	if !survivors {
		v.keep = true
	}
}

// restartAllowed says whether an ended run is restarted by its policy, and
// with which budget.
func restartAllowed(lc state.LifecycleSpec, j *state.Job, rep *RunReport) (bool, string) {
	within := func(used, allowed int) bool { return allowed < 0 || used < allowed }
	switch rep.EndReason {
	case EndSucceeded, EndDeadline, "":
		return false, ""
	case EndLost:
		return within(j.LostRestarts, lc.OnLost), "on_lost"
	}
	if code := failedCode(rep); code != nil {
		if slices.Contains(lc.FailExitCodes, *code) {
			return false, ""
		}
		if slices.Contains(lc.RetryExitCodes, *code) {
			return true, ""
		}
	}
	return within(j.Restarts, lc.Attempts), "attempts"
}

// failedCode is the exit status of the first failed node, when it
// recorded one.
func failedCode(rep *RunReport) *int {
	for _, n := range rep.Nodes {
		if n.ExitStatus != nil && *n.ExitStatus != 0 {
			return n.ExitStatus
		}
	}
	return nil
}

// restartDelay is the wait before the next restart: delay, doubled for
// each restart already made, at most max_delay, less up to a tenth by a
// jitter taken from the run id (so that gangs failing together do not
// restart together, and a plan is the same every time it is made).
func restartDelay(lc state.LifecycleSpec, j *state.Job) time.Duration {
	d := time.Duration(lc.Delay)
	if d <= 0 {
		return 0
	}
	maxD := max(time.Duration(lc.MaxDelay), d)
	for range j.Restarts + j.LostRestarts {
		d *= 2
		if d >= maxD {
			d = maxD
			break
		}
	}
	h := fnv.New32a()
	h.Write([]byte(j.RunID))
	return d - d/10*time.Duration(h.Sum32()%1000)/1000
}

func restartWords(rep *RunReport, budget string) string {
	msg := map[string]string{state.JobFailed: "the run failed", state.JobLost: "the run was lost", state.JobSucceeded: "the run ended",
		state.JobRestarting: "the run ended"}[rep.State]
	if rep.EndReason == EndExited {
		msg = "the service ended"
	}
	if msg == "" {
		msg = "the run ended"
	}
	if rep.Message != "" {
		msg += ": " + rep.Message
	}
	switch budget {
	case "attempts":
		msg += fmt.Sprintf("; restart %d of %s after failures", rep.Restarts+1, allowedWords(rep.Attempts))
	case "on_lost":
		msg += fmt.Sprintf("; restart %d of %s after lost nodes", rep.LostRestarts+1, allowedWords(rep.OnLost))
	default:
		msg += "; its exit code is in retry_exit_codes (not counted)"
	}
	return msg
}

func allowedWords(n int) string {
	if n < 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}

// endWords says how a node ended: "node 1 on a2 exited with status 3".
func endWords(j *state.Job, e state.NodeEnd) string {
	host := ""
	for _, n := range j.Nodes {
		if n.Rank == e.Rank {
			host = " on " + n.Host
		}
	}
	switch {
	case e.Lost:
		return fmt.Sprintf("node %d%s vanished without an exit status", e.Rank, host)
	case e.Signal != "":
		return fmt.Sprintf("node %d%s was killed by SIG%s (status %d)", e.Rank, host, e.Signal, *e.ExitStatus)
	case e.ExitStatus != nil:
		return fmt.Sprintf("node %d%s exited with status %d", e.Rank, host, *e.ExitStatus)
	}
	return fmt.Sprintf("node %d%s ended", e.Rank, host)
}

// signalOf names the signal a status of 128+N reports, as sh gives it.
func signalOf(status int) string {
	names := map[int]string{1: "HUP", 2: "INT", 3: "QUIT", 4: "ILL", 6: "ABRT", 7: "BUS", 8: "FPE", 9: "KILL", 10: "USR1", 11: "SEGV", 12: "USR2", 13: "PIPE", 14: "ALRM", 15: "TERM"}
	if status > 128 {
		return names[status-128]
	}
	return ""
}

func lostOr(e *state.NodeEnd, rank int, now time.Time) *state.NodeEnd {
	if e != nil {
		return e
	}
	return &state.NodeEnd{Rank: rank, Lost: true, EndedAt: now}
}

func endsOf(j *state.Job) []state.NodeEnd {
	var out []state.NodeEnd
	for _, n := range j.Nodes {
		if n.End != nil {
			out = append(out, *n.End)
		}
	}
	return out
}

func sameUnreachable(j *state.Job, now map[int]time.Time) bool {
	count := 0
	for _, n := range j.Nodes {
		t, ok := now[n.Rank]
		if ok != (n.UnreachableSince != nil) || (ok && !t.Equal(*n.UnreachableSince)) {
			return false
		}
		if ok {
			count++
		}
	}
	return count == len(now)
}

// runEndWords says how a run ended and what follows: "failed: node 1 on a2
// exited with status 3; no restart is left (attempts = 0)".
func runEndWords(rep *RunReport) string {
	msg := rep.State
	if rep.Message != "" {
		msg += ": " + rep.Message
	}
	switch {
	case rep.State == state.JobRestarting && rep.RestartAt != nil:
		msg = "the run ended (" + rep.Message + "); restarted after " + rep.RestartAt.UTC().Format(time.RFC3339)
	case rep.State == state.JobFailed && rep.EndReason != EndDeadline:
		msg += fmt.Sprintf("; no restart is left (attempts = %s, %d used)", allowedWords(rep.Attempts), rep.Restarts)
	case rep.State == state.JobLost:
		msg += fmt.Sprintf("; no restart is left (on_lost = %s, %d used)", allowedWords(rep.OnLost), rep.LostRestarts)
	}
	return msg
}

// stalled says how a running job stalled: every node's log and heartbeat
// file unchanged for at least timeout (a hung collective stops them all);
// "" when one changed since, when timeout is 0, or when the probe could
// not tell.
func (pl *planner) stalled(j *state.Job, timeout time.Duration) string {
	if timeout <= 0 {
		return ""
	}
	var quiet time.Duration = -1
	for _, n := range j.Nodes {
		h := pl.hosts[n.Host]
		if h == nil || h.facts == nil || n.Process == nil {
			return ""
		}
		var age *int64
		for _, p := range h.facts.PIDs {
			if p.PID == n.Process.PID && p.Alive {
				for _, a := range []*int64{p.LogAgeSeconds, p.HeartbeatAgeSeconds} {
					if a != nil && (age == nil || *a < *age) {
						age = a
					}
				}
			}
		}
		if age == nil {
			return ""
		}
		d := time.Duration(*age) * time.Second
		if d < timeout {
			return ""
		}
		if quiet < 0 || d < quiet {
			quiet = d
		}
	}
	if quiet < 0 {
		return ""
	}
	return fmt.Sprintf("no node wrote to its log or touched its heartbeat file (GPULAYER_HEARTBEAT_FILE) for %s (stall_timeout %s)", quiet.Round(time.Second), timeout)
}

// endedAt is when a node's process ended: its exit file's age as the probe
// read it on the machine's clock, counted back from when the probe ran;
// the plan's time where the probe could not say.
func endedAt(fh *facts.Host, pid int, now time.Time) time.Time {
	for _, p := range fh.PIDs {
		if p.PID == pid && p.EndedAgoSeconds != nil && !fh.ProbedAt.IsZero() {
			return fh.ProbedAt.Add(-time.Duration(*p.EndedAgoSeconds) * time.Second).UTC()
		}
	}
	return now
}

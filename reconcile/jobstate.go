package reconcile

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/reconcile/state"
)

// Job states that status and wait report besides the run states
// (docs/lifecycle.md, "status and wait").
const (
	// JobPending: the configured job has no run yet, or the next apply
	// launches it again for a reason of its own (its configuration
	// changed, its host was removed): no run of it counts yet.
	JobPending = "pending"
	// JobRemoved: the job is no longer declared; the next apply stops
	// what state records of it.
	JobRemoved = "removed"
)

// JobState is a job's lifecycle state as one plan judged it: the plan's
// lifecycle pass read from its JobChange, with the state record for what
// the pass leaves alone. status shows it; wait waits for Terminal.
type JobState struct {
	Job string `json:"job"`
	// State is pending, launching, running, unknown (a host did not
	// answer), succeeded, failed, lost, restarting, stopping or removed.
	State string `json:"state"`
	// Terminal says nothing changes the job any more without a person:
	// it succeeded, failed or was lost and no restart is due. A job
	// restarting is not terminal: apply restarts it.
	Terminal bool `json:"terminal"`
	// Message says why, for people; EndReason is the run's end reason
	// code once it ended.
	Message   string `json:"message,omitempty"`
	EndReason string `json:"end_reason,omitempty"`
	// RunID is the run judged ("" before the first launch).
	RunID string `json:"run_id,omitempty"`
	// Nodes, Running and Unknown count the run's nodes: all of them,
	// those the refresh saw running, and those whose hosts did not
	// answer.
	Nodes   int `json:"nodes"`
	Running int `json:"running"`
	Unknown int `json:"unknown"`
	// Run is the lifecycle pass's report, nil when it had nothing to say.
	Run *RunReport `json:"-"`
}

// JudgeJob is the state of job c of a plan, whose state record is j (nil
// when state has none). The lifecycle pass judges a run whose
// configuration is the one launched; where the plan replaces the job for
// another reason, or no longer knows it, the record and the refresh's
// liveness say the rest. Where the job would be placed is not judged:
// status and wait refresh only the hosts the job runs on, too few for a
// placement to mean anything.
func JudgeJob(c *JobChange, j *state.Job) JobState {
	js := JobState{Job: c.Job, Run: c.Run}
	if j != nil {
		js.RunID, js.Nodes = j.RunID, len(j.Nodes)
		js.Running, js.Unknown = liveness(c, j)
	}
	rep := c.Run
	again := replaceReasons(c.Reasons)
	switch {
	case rep != nil && (rep.Restart || rep.State == state.JobRestarting):
		js.State, js.EndReason = state.JobRestarting, rep.EndReason
		js.Message = restartingWords(rep, j)
	case rep != nil && (rep.State == state.JobSucceeded || rep.State == state.JobFailed || rep.State == state.JobLost):
		js.State, js.Terminal, js.EndReason, js.Message = rep.State, true, rep.EndReason, rep.Message
	case c.Action == ActionWaiting && hasReason(c.Reasons, ReasonWaitingForGroup) && (j == nil || j.Ended()):
		// Waiting for a tighter group (max_wait): say for which, and
		// until when, rather than a bare "not launched yet".
		js.State, js.Message = JobPending, waitingWords(c.Reasons)
	case j == nil:
		// Whether apply can place it is the plan's to say: status and
		// wait probe no host for a job that runs nowhere, and one that
		// waits for a group apply leaves waiting.
		js.State, js.Message = JobPending, "not launched yet; gpulayer plan says whether apply can place it"
	case j.Status == state.JobLaunching || j.Status == state.JobStopping:
		// An apply is at work on it (or was interrupted there).
		js.State = j.Status
	case j.Status == state.JobFailed && !j.Ended() && !hasReason(c.Reasons, ReasonConfigChanged):
		// A launch that failed before its processes ran: nothing of it
		// runs, no restart policy applies, and apply said so.
		js.State, js.Terminal, js.Message = state.JobFailed, true, "the launch failed: "+j.Error
	case j.Ended() && (c.Action == ActionDestroy || again == ""):
		// The lifecycle pass judges an ended run only under the
		// configuration it ran with; otherwise its record says.
		js.State, js.Terminal, js.EndReason, js.Message = j.Status, true, j.EndReason, j.Error
		if j.Status == state.JobRestarting {
			js.State = endedAs(j.Status, j.EndReason)
		}
	case c.Action == ActionDestroy:
		js.State, js.Message = JobRemoved, "no longer declared; the next apply stops it"
	case again != "":
		// Launched again by the next apply whatever became of this run:
		// its configuration changed, its host moved or was removed, a
		// stranger took its GPUs.
		js.State, js.Message = JobPending, "the next apply launches it again: "+again
	case js.Unknown > 0:
		js.State = RunUnknown
		js.Message = fmt.Sprintf("%d of %d nodes' hosts did not answer", js.Unknown, js.Nodes)
		if rep != nil && rep.State == RunUnknown && rep.Message != "" {
			js.Message = rep.Message
		}
	default:
		js.State = RunRunning
	}
	return js
}

// waitingWords is the waiting_for_group reason's message.
func waitingWords(rs []Reason) string {
	for _, r := range rs {
		if r.Code == ReasonWaitingForGroup {
			return r.Message
		}
	}
	return ""
}

func hasReason(rs []Reason, code ReasonCode) bool {
	return slices.ContainsFunc(rs, func(r Reason) bool { return r.Code == code })
}

// replaceReasons are the codes of the reasons the plan launches the job
// again for besides its lifecycle (a restart) and where it can be placed:
// "" when there are none.
func replaceReasons(rs []Reason) string {
	var codes []string
	for _, r := range rs {
		switch r.Code {
		case ReasonRestart, ReasonRunEnded, ReasonUnschedulableNow, ReasonUnschedulable, ReasonMachinesPending, ReasonRemovedFromConfig,
			ReasonNodeReplaced, ReasonWaitingForGroup, ReasonNoTighterGroup:
			continue
		}
		if c := string(r.Code); !slices.Contains(codes, c) {
			codes = append(codes, c)
		}
	}
	return strings.Join(codes, ", ")
}

// endedAs is how a run that is restarted ended: failed or lost.
func endedAs(runState, reason string) string {
	if runState == state.JobLost || reason == EndLost {
		return state.JobLost
	}
	return state.JobFailed
}

// liveness counts the nodes of j the refresh saw running, and those it
// could not see (not recorded as ended, no word from their host).
func liveness(c *JobChange, j *state.Job) (running, unknown int) {
	for i, n := range j.Nodes {
		var alive *bool
		if c.Prior != nil && c.Prior.RunID == j.RunID && i < len(c.Prior.Nodes) {
			alive = c.Prior.Nodes[i].Alive
		}
		switch {
		case n.End != nil:
		case alive == nil:
			if n.Process != nil {
				unknown++
			}
		case *alive:
			running++
		}
	}
	return running, unknown
}

// restartingWords says how the run ended and when it runs again. The
// time is said only once state records it: a plan that records nothing
// puts a restart's delay after the moment it was made.
func restartingWords(rep *RunReport, j *state.Job) string {
	if rep.Restart {
		return restartWords(rep, rep.Budget) + "; the next apply restarts it"
	}
	msg := "the run ended"
	if rep.Message != "" {
		msg += " (" + rep.Message + ")"
	}
	if j != nil && j.Status == state.JobRestarting && j.RestartAt != nil {
		return msg + "; the first apply after " + j.RestartAt.UTC().Format(time.RFC3339) + " restarts it"
	}
	return msg + "; an apply restarts it once its restart delay has passed"
}

package reconcile

import (
	"slices"
	"time"

	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// StatusReport is what `gpulayer status` shows: each recorded job's
// lifecycle state as a plan of this refresh judges it, its restart
// budgets, its nodes and what the refresh found of their processes.
type StatusReport struct {
	Lineage string `json:"lineage"`
	Serial  uint64 `json:"serial"`
	// Job names the one job the report is of (gpulayer status JOB), whose
	// runs it then lists; "" for every job.
	Job string `json:"job,omitempty"`
	// MadeAt is when the refresh was judged.
	MadeAt time.Time   `json:"made_at"`
	Jobs   []JobStatus `json:"jobs"`
	// Leftovers are runs an earlier stop could not finish.
	Leftovers []JobStatus `json:"leftovers"`
}

// StatusInput is what a status report is made from.
type StatusInput struct {
	State *state.State
	// Facts are a refresh of the hosts state names.
	Facts *facts.Document
	// Plan is a plan of the recorded jobs made from State and Facts: its
	// lifecycle pass says each job's state. Nil leaves each job as state
	// records it.
	Plan *Plan
	// Job, when set, limits the report to that job and lists its runs.
	Job string
	// Now gives uptimes.
	Now time.Time
}

// JobStatus is one job as recorded, with its lifecycle state and its
// nodes' processes as found.
type JobStatus struct {
	Job    string `json:"job"`
	Status string `json:"status"` // as state records it
	// State is the job's lifecycle state as this refresh judges it
	// (JudgeJob): a run whose nodes all exited 0 is succeeded before any
	// apply recorded it. Message says why; EndReason, EndedAt and
	// RestartAt are the run's end and its restart, when it ended.
	State      string       `json:"state,omitempty"`
	Message    string       `json:"message,omitempty"`
	EndReason  string       `json:"end_reason,omitempty"`
	EndedAt    *time.Time   `json:"ended_at,omitempty"`
	RestartAt  *time.Time   `json:"restart_at,omitempty"`
	RunID      string       `json:"run_id"`
	Error      string       `json:"error,omitempty"`
	LaunchedAt time.Time    `json:"launched_at"`
	MasterAddr string       `json:"master_addr,omitempty"`
	MasterPort int          `json:"master_port,omitempty"`
	Nodes      []NodeStatus `json:"nodes"`
	// Restarts are the restarts used of each budget; nil for a leftover.
	Restarts *RestartBudgets `json:"restarts,omitempty"`
	// LastFailure is the latest run of the job that failed or was lost,
	// the current one included.
	LastFailure *Failure `json:"last_failure,omitempty"`
	// Runs are the job's runs, oldest first: the last state.MaxHistory
	// earlier ones and the current one. Only in a report of one job.
	Runs []RunStatus `json:"runs,omitempty"`
}

// RestartBudgets are the restarts a job used and may use.
type RestartBudgets struct {
	AfterFailures Budget `json:"after_failures"`
	AfterLost     Budget `json:"after_lost"`
}

// Budget is one restart budget: Allowed is -1 when it is unlimited.
type Budget struct {
	Used    int `json:"used"`
	Allowed int `json:"allowed"`
}

// Failure is how a run failed, or was lost.
type Failure struct {
	RunID     string     `json:"run_id"`
	State     string     `json:"state"` // failed or lost
	EndReason string     `json:"end_reason,omitempty"`
	Message   string     `json:"message,omitempty"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
}

// RunStatus is one run of a job: an earlier one as its history keeps it,
// or the current one as this refresh judges it.
type RunStatus struct {
	RunID      string     `json:"run_id"`
	LaunchedAt time.Time  `json:"launched_at"`
	EndedAt    *time.Time `json:"ended_at,omitempty"`
	// State is how it ended (succeeded, failed, lost, replaced) or, for
	// the current run while it has not ended, the job's state.
	State     string          `json:"state"`
	EndReason string          `json:"end_reason,omitempty"`
	Message   string          `json:"message,omitempty"`
	Nodes     []state.NodeEnd `json:"nodes"`
	Current   bool            `json:"current,omitempty"`
}

// Process states a refresh finds.
const (
	ProcessRunning    = "running"
	ProcessExited     = "exited"
	ProcessNotStarted = "not_started"
	// ProcessUnknown: the host could not be probed, or is not declared.
	ProcessUnknown = "unknown"
)

// NodeStatus is one node and its process.
type NodeStatus struct {
	Rank    int    `json:"rank"`
	Host    string `json:"host"`
	Address string `json:"address"`
	GPUs    []int  `json:"gpus"`
	PID     int    `json:"pid,omitempty"`
	Process string `json:"process"`
	// Detail says why a process is unknown or how it ended.
	Detail     string   `json:"detail,omitempty"`
	ExitStatus *int     `json:"exit_status,omitempty"`
	LogTail    []string `json:"log_tail,omitempty"`
	// UptimeSeconds is how long a running process has run.
	UptimeSeconds int64 `json:"uptime_seconds,omitempty"`
	// End is how the node ended: as an apply recorded it, or as this
	// refresh found it.
	End *state.NodeEnd `json:"end,omitempty"`
}

// Status reads what a refresh of the hosts state names says of every
// recorded process, and what the plan's lifecycle pass says of each job.
func Status(in StatusInput) *StatusReport {
	st := in.State
	r := &StatusReport{Lineage: st.Lineage, Serial: st.Serial, Job: in.Job, MadeAt: in.Now.UTC(), Jobs: []JobStatus{}, Leftovers: []JobStatus{}}
	byName := in.Facts.Index()
	for _, j := range st.Jobs {
		if in.Job != "" && j.Name != in.Job {
			continue
		}
		js := jobStatus(j, byName, in.Now)
		judge(&js, j, in.Plan)
		if in.Job != "" {
			js.Runs = runsOf(j, js)
		}
		r.Jobs = append(r.Jobs, js)
	}
	for _, j := range st.Leftovers {
		if in.Job != "" && j.Name != in.Job {
			continue
		}
		r.Leftovers = append(r.Leftovers, jobStatus(j, byName, in.Now))
	}
	return r
}

// judge fills in a job's lifecycle state from the plan (its record's,
// without one), its restart budgets and its last failure.
func judge(js *JobStatus, j state.Job, p *Plan) {
	var c *JobChange
	if p != nil {
		c = p.Job(j.Name)
	}
	js.EndedAt, js.RestartAt = j.EndedAt, j.RestartAt
	lc := j.Spec.Lifecycle
	b := &RestartBudgets{AfterFailures: Budget{Used: j.Restarts, Allowed: lc.Attempts}, AfterLost: Budget{Used: j.LostRestarts, Allowed: lc.OnLost}}
	var s JobState
	if c != nil {
		s = JudgeJob(c, &j)
	} else {
		// No plan judged it: it is as state records it.
		s = JobState{Job: j.Name, State: j.Status, EndReason: j.EndReason, Message: j.Error}
	}
	js.State, js.Message, js.EndReason = s.State, s.Message, s.EndReason
	if rep := s.Run; rep != nil {
		// The plan's pass reads the configured policy, which may have
		// changed since the launch without a relaunch.
		b = &RestartBudgets{AfterFailures: Budget{Used: rep.Restarts, Allowed: rep.Attempts}, AfterLost: Budget{Used: rep.LostRestarts, Allowed: rep.OnLost}}
		if rep.EndedAt != nil {
			js.EndedAt = rep.EndedAt
		}
		if j.Status == state.JobRestarting {
			js.RestartAt = j.RestartAt
		}
	}
	js.Restarts = b
	switch {
	case s.State == state.JobFailed || s.State == state.JobLost:
		js.LastFailure = &Failure{RunID: j.RunID, State: s.State, EndReason: s.EndReason, Message: s.Message, EndedAt: js.EndedAt}
	case s.State == state.JobRestarting && s.Run != nil:
		js.LastFailure = &Failure{RunID: j.RunID, State: endedAs(s.Run.State, s.Run.EndReason), EndReason: s.Run.EndReason, Message: s.Run.Message, EndedAt: js.EndedAt}
	default:
		for i := len(j.History) - 1; i >= 0; i-- {
			if h := j.History[i]; h.Status == state.JobFailed || h.Status == state.JobLost {
				js.LastFailure = &Failure{RunID: h.RunID, State: h.Status, EndReason: h.EndReason, Message: h.Message, EndedAt: h.EndedAt}
				break
			}
		}
	}
}

// runsOf lists a job's earlier runs from its history and its current run
// as judged.
func runsOf(j state.Job, js JobStatus) []RunStatus {
	out := make([]RunStatus, 0, len(j.History)+1)
	for _, h := range j.History {
		out = append(out, RunStatus{RunID: h.RunID, LaunchedAt: h.LaunchedAt, EndedAt: h.EndedAt, State: h.Status, EndReason: h.EndReason,
			Message: h.Message, Nodes: slices.Clone(h.Nodes)})
	}
	cur := RunStatus{RunID: j.RunID, LaunchedAt: j.LaunchedAt, State: js.State, EndReason: js.EndReason, Message: js.Message, Current: true, Nodes: []state.NodeEnd{}}
	switch js.State {
	case state.JobSucceeded, state.JobFailed, state.JobLost:
		cur.EndedAt = js.EndedAt
	case state.JobRestarting:
		cur.EndedAt = js.EndedAt
		if js.LastFailure != nil && js.LastFailure.RunID == j.RunID {
			cur.State, cur.Message = js.LastFailure.State, js.LastFailure.Message
		}
	}
	for _, n := range js.Nodes {
		if n.End != nil {
			cur.Nodes = append(cur.Nodes, *n.End)
		}
	}
	return append(out, cur)
}

// jobStatus is a job's status from the facts of its hosts (by name, as
// facts.Document.Index gives them; nil when nothing is known).
func jobStatus(j state.Job, byName map[string]*facts.Host, now time.Time) JobStatus {
	js := JobStatus{Job: j.Name, Status: j.Status, RunID: j.RunID, Error: j.Error, LaunchedAt: j.LaunchedAt,
		MasterAddr: j.MasterAddr, MasterPort: j.MasterPort, Nodes: []NodeStatus{}}
	for _, n := range j.Nodes {
		ns := NodeStatus{Rank: n.Rank, Host: n.Host, Address: n.Address, GPUs: n.GPUs}
		fh := byName[n.Host]
		switch {
		case n.Process == nil:
			ns.Process = ProcessNotStarted
		case fh == nil:
			ns.PID, ns.Process, ns.Detail = n.Process.PID, ProcessUnknown, "host not probed (is it still declared?)"
		case fh.Status != facts.StatusOK:
			ns.PID, ns.Process, ns.Detail = n.Process.PID, ProcessUnknown, fh.Status+": "+fh.Error
		default:
			ns.PID = n.Process.PID
			r, alive, known := processState(fh, n, describeNode(n.Host, n.Rank))
			switch {
			case !known:
				ns.Process, ns.Detail = ProcessUnknown, "the probe was not asked about it"
			case alive:
				ns.Process = ProcessRunning
				if !n.Process.StartedAt.IsZero() {
					ns.UptimeSeconds = int64(now.Sub(n.Process.StartedAt).Seconds())
				}
			default:
				ns.Process, ns.Detail, ns.ExitStatus, ns.LogTail = ProcessExited, r.Message, r.ExitStatus, r.LogTail
				if r.ExitStatus != nil {
					status := *r.ExitStatus
					ns.End = &state.NodeEnd{Rank: n.Rank, ExitStatus: &status, Signal: signalOf(status), EndedAt: now, LogTail: r.LogTail}
				} else {
					ns.End = &state.NodeEnd{Rank: n.Rank, Lost: true, EndedAt: now, LogTail: r.LogTail}
				}
			}
		}
		if n.End != nil {
			// How the node ended, as an apply recorded it, is final:
			// the host may no longer answer, or keep the exit file.
			end := *n.End
			ns.End = &end
			if ns.Process != ProcessExited {
				ns.Process, ns.ExitStatus, ns.LogTail = ProcessExited, end.ExitStatus, end.LogTail
				ns.Detail = "recorded: " + endWords(&j, end)
			}
		}
		js.Nodes = append(js.Nodes, ns)
	}
	return js
}

package reconcile

import (
	"time"

	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// StatusReport is what `gpulayer status` shows: each recorded job's nodes
// and what a refresh of their hosts found of their processes.
type StatusReport struct {
	Lineage string      `json:"lineage"`
	Serial  uint64      `json:"serial"`
	Jobs    []JobStatus `json:"jobs"`
	// Leftovers are runs an earlier stop could not finish.
	Leftovers []JobStatus `json:"leftovers"`
}

// JobStatus is one job as recorded, with its nodes' processes as found.
type JobStatus struct {
	Job        string       `json:"job"`
	Status     string       `json:"status"` // as state records it
	RunID      string       `json:"run_id"`
	Error      string       `json:"error,omitempty"`
	LaunchedAt time.Time    `json:"launched_at"`
	MasterAddr string       `json:"master_addr,omitempty"`
	MasterPort int          `json:"master_port,omitempty"`
	Nodes      []NodeStatus `json:"nodes"`
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
}

// Status reads what doc (a refresh of the hosts state names) says of
// every recorded process; now gives uptimes.
func Status(st *state.State, doc *facts.Document, now time.Time) *StatusReport {
	r := &StatusReport{Lineage: st.Lineage, Serial: st.Serial, Jobs: []JobStatus{}, Leftovers: []JobStatus{}}
	for _, j := range st.Jobs {
		r.Jobs = append(r.Jobs, jobStatus(j, doc, now))
	}
	for _, j := range st.Leftovers {
		r.Leftovers = append(r.Leftovers, jobStatus(j, doc, now))
	}
	return r
}

func jobStatus(j state.Job, doc *facts.Document, now time.Time) JobStatus {
	js := JobStatus{Job: j.Name, Status: j.Status, RunID: j.RunID, Error: j.Error, LaunchedAt: j.LaunchedAt,
		MasterAddr: j.MasterAddr, MasterPort: j.MasterPort, Nodes: []NodeStatus{}}
	for _, n := range j.Nodes {
		ns := NodeStatus{Rank: n.Rank, Host: n.Host, Address: n.Address, GPUs: n.GPUs}
		var fh *facts.Host
		if doc != nil {
			fh = doc.Find(n.Host)
		}
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
			}
		}
		js.Nodes = append(js.Nodes, ns)
	}
	return js
}

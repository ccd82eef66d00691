package reconcile

// ReasonCode is why a job changes: a closed set, each documented in
// docs/plan.md with its sentence.
type ReasonCode string

// Reason codes, in the order a job's reasons are listed.
const (
	// ReasonNewJob: the job is configured and not in state (create).
	ReasonNewJob ReasonCode = "new_job"
	// ReasonConfigChanged: fields of the job's effective configuration
	// differ from what it was launched with (Fields names them).
	ReasonConfigChanged ReasonCode = "config_changed"
	// ReasonLaunchIncomplete: an apply stopped before every node was
	// started (interrupted, or a node failed to start).
	ReasonLaunchIncomplete ReasonCode = "launch_incomplete"
	// ReasonHostRemoved: a node's host is no longer declared.
	ReasonHostRemoved ReasonCode = "host_removed"
	// ReasonHostUnreachable: a node's host could not be probed.
	ReasonHostUnreachable ReasonCode = "host_unreachable"
	// ReasonProcessExited: a node's process is gone (pid gone, or its
	// start time or the machine's boot id differ).
	ReasonProcessExited ReasonCode = "process_exited"
	// ReasonGPUsTaken: a node's GPUs are used by a process gpulayer did
	// not start for this job.
	ReasonGPUsTaken ReasonCode = "gpus_taken"
	// ReasonLocationChanged: a node's host now reports another location.
	ReasonLocationChanged ReasonCode = "location_changed"
	// ReasonRemovedFromConfig: the job is in state and no longer
	// configured (destroy).
	ReasonRemovedFromConfig ReasonCode = "removed_from_config"
	// ReasonUnschedulableNow: no group of machines can hold the job now
	// (waiting).
	ReasonUnschedulableNow ReasonCode = "unschedulable_now"
	// ReasonUnschedulable: no group could ever hold the job under its
	// policy (failed).
	ReasonUnschedulable ReasonCode = "unschedulable"
)

// ReasonCodes lists every code in order, with its sentence: the closed set
// that docs/plan.md documents (a test keeps the two equal).
var ReasonCodes = []struct {
	Code     ReasonCode
	Sentence string
}{
	{ReasonNewJob, "the job is configured and not running"},
	{ReasonConfigChanged, "the job's configuration changed"},
	{ReasonLaunchIncomplete, "an earlier apply did not start every node"},
	{ReasonHostRemoved, "a node's host is no longer declared"},
	{ReasonHostUnreachable, "a node's host could not be probed"},
	{ReasonProcessExited, "a node's process exited"},
	{ReasonGPUsTaken, "a node's GPUs are used by a process gpulayer did not start for this job"},
	{ReasonLocationChanged, "a node's host reports another location"},
	{ReasonRemovedFromConfig, "the job is no longer configured"},
	{ReasonUnschedulableNow, "no group of machines can hold the job now"},
	{ReasonUnschedulable, "no group of machines can ever hold the job under its policy"},
}

func reasonOrder(c ReasonCode) int {
	for i, r := range ReasonCodes {
		if r.Code == c {
			return i
		}
	}
	return len(ReasonCodes)
}

// Reason is one reason for a change, with what makes it specific.
type Reason struct {
	Code ReasonCode `json:"code"`
	// Message is the reason as a sentence fragment for people: "process
	// 4211 on a2 (node 1) exited with status 137".
	Message string `json:"message"`
	// Node and Host name the node the reason is about, when it is about
	// one.
	Node *int   `json:"node,omitempty"`
	Host string `json:"host,omitempty"`
	// Fields are the changed configuration fields (config_changed).
	Fields []string `json:"fields,omitempty"`
	// ExitStatus is a process's exit status, when the machine kept it.
	ExitStatus *int `json:"exit_status,omitempty"`
	// LogTail is the last lines of an exited node's log.
	LogTail []string `json:"log_tail,omitempty"`
}

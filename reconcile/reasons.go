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
	// ReasonCodeChanged: the job's code directory hashes differently from
	// the one it was launched with (Files counts what changed).
	ReasonCodeChanged ReasonCode = "code_changed"
	// ReasonSetupChanged: the job's setup script differs.
	ReasonSetupChanged ReasonCode = "setup_changed"
	// ReasonLaunchIncomplete: an apply stopped before every node was
	// started (interrupted, or a node failed to start).
	ReasonLaunchIncomplete ReasonCode = "launch_incomplete"
	// ReasonHostRemoved: a node's host is no longer declared.
	ReasonHostRemoved ReasonCode = "host_removed"
	// ReasonAddressChanged: a node's host is now declared at another
	// address (or port) than the one its run was started at.
	ReasonAddressChanged ReasonCode = "address_changed"
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
	// ReasonMachineMissing: a created machine state records is gone from
	// its provider (deleted outside gpulayer); it is created again, and
	// the jobs on it replaced.
	ReasonMachineMissing ReasonCode = "machine_missing"
	// ReasonMachineStopped: a created machine is stopped (TERMINATED), or
	// a Spot VM was preempted; its jobs are replaced elsewhere.
	ReasonMachineStopped ReasonCode = "machine_stopped"
	// ReasonMachineDeleted: a node's machine is deleted or replaced by
	// this plan (count lowered, or its gcp block changed).
	ReasonMachineDeleted ReasonCode = "machine_deleted"
	// ReasonRunEnded: a node of the job's run ended (it failed, was lost,
	// or the run succeeded, straggled or ran past its deadline) and the
	// nodes that may still run are stopped: the gang ends together.
	ReasonRunEnded ReasonCode = "run_ended"
	// ReasonRestart: the job's run ended and its restart policy runs it
	// again (docs/lifecycle.md).
	ReasonRestart ReasonCode = "restart"
	// ReasonReplaceRequested: --replace job.NAME.
	ReasonReplaceRequested ReasonCode = "replace_requested"
	// ReasonRemovedFromConfig: the job is in state and no longer
	// configured (destroy).
	ReasonRemovedFromConfig ReasonCode = "removed_from_config"
	// ReasonUnschedulableNow: no group of machines can hold the job now
	// (waiting).
	ReasonUnschedulableNow ReasonCode = "unschedulable_now"
	// ReasonUnschedulable: no group could ever hold the job under its
	// policy (failed).
	ReasonUnschedulable ReasonCode = "unschedulable"
	// ReasonMachinesPending: the job cannot be placed on the machines that
	// answer now, and this plan creates machines; apply places it once
	// they answer (waiting).
	ReasonMachinesPending ReasonCode = "machines_pending"
	// ReasonWaitingForGroup: the job could be placed now only at a looser
	// level, and running jobs are expected to free a tighter group within
	// its policy's max_wait (waiting; JobChange.Wait says which and when).
	ReasonWaitingForGroup ReasonCode = "waiting_for_group"
	// ReasonNoTighterGroup: the job's policy has max_wait, and no tighter
	// group than the one it gets is expected to free within it (or
	// max_wait has passed): placed now at the looser level.
	ReasonNoTighterGroup ReasonCode = "no_tighter_group"
	// ReasonNodeReplaced: a node's machine was lost and the restart
	// replaces only that node, next to the nodes that survived (hot swap).
	ReasonNodeReplaced ReasonCode = "node_replaced"

	// Reasons of machines (MachineChange), not of jobs.

	// ReasonCountRaised: the fleet's count asks for a machine that does
	// not exist (create).
	ReasonCountRaised ReasonCode = "count_raised"
	// ReasonCountLowered: the machine's number is at or above the fleet's
	// count (delete, highest numbers first).
	ReasonCountLowered ReasonCode = "count_lowered"
	// ReasonMachineSpecChanged: the gcp block changed in a way the machine
	// cannot follow without being created again (replace).
	ReasonMachineSpecChanged ReasonCode = "machine_spec_changed"
	// ReasonFleetRemoved: the machine's fleet is no longer declared, or no
	// longer has a gcp block (delete).
	ReasonFleetRemoved ReasonCode = "fleet_removed"
)

// ReasonCodes lists every code in order, with its sentence: the closed set
// that docs/plan.md documents (a test keeps the two equal).
var ReasonCodes = []struct {
	Code     ReasonCode
	Sentence string
}{
	{ReasonNewJob, "the job is configured and not running"},
	{ReasonConfigChanged, "the job's configuration changed"},
	{ReasonCodeChanged, "the job's code changed"},
	{ReasonSetupChanged, "the job's setup script changed"},
	{ReasonLaunchIncomplete, "an earlier apply did not start every node"},
	{ReasonHostRemoved, "a node's host is no longer declared"},
	{ReasonAddressChanged, "a node's host is declared at another address"},
	{ReasonHostUnreachable, "a node's host could not be probed"},
	{ReasonProcessExited, "a node's process exited"},
	{ReasonGPUsTaken, "a node's GPUs are used by a process gpulayer did not start for this job"},
	{ReasonLocationChanged, "a node's host reports another location"},
	{ReasonMachineMissing, "a created machine was deleted outside gpulayer"},
	{ReasonMachineStopped, "a created machine is stopped or was preempted"},
	{ReasonMachineDeleted, "a node's machine is deleted or replaced by this plan"},
	{ReasonRunEnded, "the job's run ended; what may still run of it is stopped"},
	{ReasonRestart, "the job's run ended and its restart policy runs it again"},
	{ReasonReplaceRequested, "--replace asked for the job to run again"},
	{ReasonRemovedFromConfig, "the job is no longer configured"},
	{ReasonUnschedulableNow, "no group of machines can hold the job now"},
	{ReasonUnschedulable, "no group of machines can ever hold the job under its policy"},
	{ReasonMachinesPending, "the job waits for machines this apply creates"},
	{ReasonWaitingForGroup, "running jobs are expected to free a tighter group within max_wait"},
	{ReasonNoTighterGroup, "no tighter group frees within max_wait: placed now at the looser level"},
	{ReasonNodeReplaced, "a lost node is replaced next to the nodes that survived"},
	{ReasonCountRaised, "the fleet's count asks for a machine that does not exist"},
	{ReasonCountLowered, "the fleet's count no longer includes the machine"},
	{ReasonMachineSpecChanged, "the gcp block changed in a way that needs a new machine"},
	{ReasonFleetRemoved, "the machine's fleet is no longer declared"},
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
	// Files counts the files of a code_changed reason.
	Files *FileCounts `json:"files,omitempty"`
}

// FileCounts are the files a job's new code added, changed and removed.
type FileCounts struct {
	Added   int `json:"added"`
	Changed int `json:"changed"`
	Removed int `json:"removed"`
}

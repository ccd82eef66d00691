package reconcile

import (
	"time"

	"github.com/gpulayer/gpulayer/placement"
)

// PlanFormatVersion is the version of the plan document (docs/plan.md). A
// reader refuses a saved plan of another version.
const PlanFormatVersion = 1

// Plan is what must change for the running jobs to match the
// configuration, and why. It is data: the human view, the JSON and the
// markdown are renderings of it, and apply carries out exactly its
// changes.
type Plan struct {
	FormatVersion   int    `json:"format_version"`
	GpulayerVersion string `json:"gpulayer_version"`
	// State is the state the plan was made against; apply refuses a saved
	// plan when state has moved on.
	State StateRef `json:"state"`
	// Refresh says where the facts came from and which hosts could not be
	// used.
	Refresh Refresh `json:"refresh"`
	// Targets are the --target addresses the plan was limited to.
	Targets []string `json:"targets,omitempty"`
	// Jobs are the jobs the configuration declares and the ones state
	// records, each once, in name order.
	Jobs []JobChange `json:"jobs"`
	// Leftovers are runs an earlier stop could not finish; apply stops
	// them.
	Leftovers []Leftover `json:"leftovers"`
	// Fleets are the fleets whose machines a provider creates.
	Fleets []FleetChange `json:"fleets"`
	// Warnings are things a reviewer should know that change nothing.
	Warnings []string `json:"warnings"`
	// EndedWaits are the jobs whose wait records (state.Wait) apply
	// removes: placed, no longer configured, or no longer waiting. Name
	// order; absent when none.
	EndedWaits []string `json:"ended_waits,omitempty"`
	Summary    Summary  `json:"summary"`
	// MadeAt is the time the plan's lifecycle pass decided by.
	MadeAt time.Time `json:"made_at"`
}

// StateRef identifies a version of state.
type StateRef struct {
	// Lineage is "" when there was no state yet.
	Lineage string `json:"lineage"`
	Serial  uint64 `json:"serial"`
}

// Refresh sources.
const (
	// RefreshProbe: every declared host was probed over SSH for this plan.
	RefreshProbe = "probe"
	// RefreshState: the facts of the last refresh, saved in state.
	RefreshState = "state"
	// RefreshFile: a facts document given with --facts.
	RefreshFile = "file"
)

// Refresh is where a plan's facts came from.
type Refresh struct {
	Source string `json:"source"`
	// File is the facts document's path, for RefreshFile.
	File string `json:"file,omitempty"`
	// Hosts is how many declared hosts there are; Usable, how many of them
	// had usable facts.
	Hosts  int `json:"hosts"`
	Usable int `json:"usable"`
	// Problems are the declared hosts without usable facts: unreachable,
	// failed probes, and hosts the facts do not name.
	Problems []HostProblem `json:"problems"`
}

// HostProblem is a declared host whose facts could not be used.
type HostProblem struct {
	Host   string `json:"host"`
	Status string `json:"status"` // facts.StatusUnreachable, facts.StatusFailed, or StatusNoFacts
	Error  string `json:"error,omitempty"`
}

// StatusNoFacts is a HostProblem's status for a host the facts do not
// name (a facts document made before the host was declared).
const StatusNoFacts = "no_facts"

// Action is what a plan does with a job.
type Action string

const (
	// ActionNoOp: running as configured; left alone.
	ActionNoOp Action = "no-op"
	// ActionCreate: not running; launched on Placement.
	ActionCreate Action = "create"
	// ActionReplace: stopped (Prior), then launched again on Placement.
	ActionReplace Action = "replace"
	// ActionDestroy: running but no longer configured; stopped.
	ActionDestroy Action = "destroy"
	// ActionWaiting: cannot be placed now; placed by a later plan when
	// machines free up. With StopPrior, what is left of an earlier launch
	// is stopped.
	ActionWaiting Action = "waiting"
	// ActionFailed: can never be placed under its policy
	// (on_unschedulable = "fail").
	ActionFailed Action = "failed"
	// ActionStop: the job's run ended (Run says how); what may still run
	// of it is stopped (the gang fails together), and the job stays in
	// state as it ended, or restarting once its delay is past.
	ActionStop Action = "stop"
)

// JobChange is one job's part of a plan.
type JobChange struct {
	Job    string `json:"job"`
	Action Action `json:"action"`
	// Reasons say why, each once, in the order of the reason codes.
	Reasons []Reason `json:"reasons"`
	// ConfigHash is the hash of the configured job's effective
	// configuration (empty for destroy); apply checks that the
	// configuration it launches still has it.
	ConfigHash string `json:"config_hash,omitempty"`
	// Nodes and GPUsPerNode are the configured shape (or, for destroy,
	// the recorded one).
	Nodes       int    `json:"nodes"`
	GPUsPerNode int    `json:"gpus_per_node"`
	Launcher    string `json:"launcher,omitempty"`
	Policy      string `json:"policy,omitempty"`
	// Prior is what state records of the job; nil when it is not in state.
	Prior *PriorJob `json:"prior,omitempty"`
	// StopPrior says apply stops Prior's processes: true for replace and
	// destroy, and for a waiting or failed job whose earlier launch is
	// gone or broken.
	StopPrior bool `json:"stop_prior"`
	// Placement is where the job runs after apply: the new placement for
	// create and replace, the recorded one for no-op; nil otherwise.
	Placement *Placement `json:"placement,omitempty"`
	// Decision is the scheduler's summary and explanation, for every job
	// that was placed in this plan or could not be.
	Decision *Decision `json:"decision,omitempty"`
	// Run is the lifecycle pass's report on the job's run: how it ended,
	// its restarts; nil when there is nothing to report.
	Run *RunReport `json:"run,omitempty"`
	// Wait is the max_wait decision of a job whose policy has one and
	// that could be placed now only looser than a network group: it
	// waits for a tighter group, or is placed now (wait.go); nil
	// otherwise.
	Wait *WaitReport `json:"wait,omitempty"`
	// Swap says the job's restart keeps its surviving nodes and replaces
	// only its lost ones (hotswap.go); nil otherwise.
	Swap *SwapReport `json:"swap,omitempty"`
}

// HasRecords says apply has run ends (or other observations) to write
// into state, even where the plan changes nothing.
func (p *Plan) HasRecords() bool {
	for _, c := range p.Jobs {
		if c.Run != nil && c.Run.Record {
			return true
		}
	}
	return p.HasWaitRecords()
}

// PriorJob is what state records of a job.
type PriorJob struct {
	Status     string      `json:"status"`
	RunID      string      `json:"run_id"`
	ConfigHash string      `json:"config_hash"`
	Nodes      []PriorNode `json:"nodes"`
}

// PriorNode is one recorded node and what the refresh found of it.
type PriorNode struct {
	Rank    int    `json:"rank"`
	Host    string `json:"host"`
	Address string `json:"address"`
	GPUs    []int  `json:"gpus"`
	PID     int    `json:"pid,omitempty"`
	// Alive is the refresh's word on the process; nil when unknown (no
	// process recorded, or no facts for the host).
	Alive *bool `json:"alive,omitempty"`
}

// Placement is where a job's nodes run.
type Placement struct {
	// Level is the locality level the group shares, and Location the
	// group's location at that level.
	Level        placement.Level    `json:"level"`
	Location     placement.Location `json:"location"`
	TorchVersion string             `json:"torch_version,omitempty"`
	Nodes        []PlacedNode       `json:"nodes"`
	// Cost estimates the placement's links and names the tighter groups
	// passed over (cost.go); only on a placement made in this plan.
	Cost *Cost `json:"cost,omitempty"`
}

// PlacedNode is one node of a placement.
type PlacedNode struct {
	Rank    int    `json:"rank"`
	Host    string `json:"host"`
	Fleet   string `json:"fleet"`
	Address string `json:"address"`
	Port    int    `json:"port,omitempty"`
	// GPUs are the chosen indices in local-rank order, the order
	// CUDA_VISIBLE_DEVICES lists them (neighbours share the fastest
	// links; ascending where the links are alike); GPUUUIDs their UUIDs in
	// the same order when the probe knew them.
	GPUs     []int    `json:"gpus"`
	GPUUUIDs []string `json:"gpu_uuids,omitempty"`
	// Bottleneck is the slowest link between the GPUs ("NV12"); NUMA the
	// NUMA nodes they are attached to ("1", "0,1"); empty when unknown.
	Bottleneck      string             `json:"bottleneck,omitempty"`
	NUMA            string             `json:"numa,omitempty"`
	Location        placement.Location `json:"location"`
	LocationTrusted bool               `json:"location_trusted"`
}

// Decision is the scheduler's account of a placement made in this plan
// (or not made): its one-line summary in ADR-0021's words and, for jobs
// that could not be placed, how it decided.
type Decision struct {
	Status  placement.Status `json:"status"`
	Summary string           `json:"summary"`
	// Explanation is kept for waiting and failed jobs; a placed job's
	// summary says enough.
	Explanation *placement.Explanation `json:"explanation,omitempty"`
}

// Leftover is a run an earlier stop could not finish because a host did
// not answer.
type Leftover struct {
	Job   string      `json:"job"`
	RunID string      `json:"run_id"`
	Nodes []PriorNode `json:"nodes"`
	// Reachable says at least one of its hosts can be reached now, so
	// apply will stop what is there; otherwise it waits for them, and is
	// not counted as a change.
	Reachable bool `json:"reachable"`
}

// FleetChange is a fleet of created machines: what its provider must
// create or delete.
type FleetChange struct {
	Fleet    string `json:"fleet"`
	Provider string `json:"provider"`
	// Count is the configured number of machines; Existing, how many
	// state records.
	Count    int `json:"count"`
	Existing int `json:"existing"`
	// Machines are the machines to create, delete or replace: deletions
	// first, highest numbers first, then the rest in number order.
	Machines []MachineChange `json:"machines"`
	// Listed says the provider was asked which machines exist (a refresh);
	// without it, state's record is taken as it is.
	Listed bool   `json:"listed"`
	Note   string `json:"note,omitempty"`
	// PlacedByZone names the fleet's machines, of those that can hold jobs
	// after this plan, whose provider reports no physical host topology
	// (GCP reports one only for some machine types, or in a compact
	// placement policy): they are placed by zone and the fleet's
	// network_group, not by block. Number order; absent when there are
	// none.
	PlacedByZone []string `json:"placed_by_zone,omitempty"`
}

// MachineChange is one machine to create, delete or replace.
type MachineChange struct {
	Name   string `json:"name"`
	Action Action `json:"action"` // create, destroy or replace
	// Detail is "a2-highgpu-4g in europe-west1-b".
	Detail  string   `json:"detail,omitempty"`
	Reasons []Reason `json:"reasons"`
}

// Summary counts the changes.
type Summary struct {
	Launch  int `json:"launch"`
	Replace int `json:"replace"`
	Stop    int `json:"stop"`
	Waiting int `json:"waiting"`
	Failed  int `json:"failed"`
	NoOp    int `json:"no_op"`
	// Create and Delete count machines; only those a provider can make.
	// Leftovers counts the leftover runs apply will stop now.
	Leftovers      int `json:"leftovers"`
	CreateMachines int `json:"create_machines"`
	DeleteMachines int `json:"delete_machines"`
}

// HasChanges says apply would do something: launch, replace, stop a job,
// stop what is left of one, or create or delete a machine. Waiting and
// failed jobs alone are not changes.
func (p *Plan) HasChanges() bool {
	s := p.Summary
	if s.Launch+s.Replace+s.Stop+s.Leftovers+s.CreateMachines+s.DeleteMachines > 0 {
		return true
	}
	for _, j := range p.Jobs {
		if j.StopPrior {
			return true
		}
	}
	return false
}

// Job returns the change for the job named name, or nil.
func (p *Plan) Job(name string) *JobChange {
	for i := range p.Jobs {
		if p.Jobs[i].Job == name {
			return &p.Jobs[i]
		}
	}
	return nil
}

// WithoutMachines is the plan with its fleets' changes left out: the plan
// apply makes, once the machines it created answer, to place the jobs
// that waited for them. Machines still to create are the next plan's.
func (p *Plan) WithoutMachines() *Plan {
	out := *p
	out.Fleets = []FleetChange{}
	out.Summary.CreateMachines, out.Summary.DeleteMachines = 0, 0
	return &out
}

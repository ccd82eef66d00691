package state

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/reconcile/facts"
)

// FormatVersion is the version of the state document this package writes.
// A document of a newer version is refused, never rewritten: an older
// gpulayer would drop what it does not understand.
const FormatVersion = 1

// State is the whole document.
type State struct {
	FormatVersion int `json:"format_version"`
	// Lineage is a UUID made when the state is first written. A saved plan
	// and a remote backend check it, so that a plan made against one state
	// is never applied to another.
	Lineage string `json:"lineage"`
	// Serial is incremented by every write.
	Serial          uint64 `json:"serial"`
	GpulayerVersion string `json:"gpulayer_version"`
	// Jobs are the jobs gpulayer launched and has not stopped, sorted by
	// name.
	Jobs []Job `json:"jobs"`
	// Leftovers are runs that a stop could not finish (their host did not
	// answer): every apply tries again, so nothing gpulayer started is
	// forgotten. Sorted by job name, then run id.
	Leftovers []Job `json:"leftovers"`
	// Machines are the machines providers created, sorted by fleet and
	// name.
	Machines []Machine `json:"machines"`
	// Waits are the jobs waiting for a tighter group (policy max_wait),
	// sorted by job name (wait.go); absent when none waits.
	Waits []Wait `json:"waits,omitempty"`
	// Facts are what the last refresh found; nil before the first one.
	Facts *facts.Document `json:"facts,omitempty"`
	// Watcher is the lease of the gpulayer watch that supervises the
	// jobs (watcher.go); nil when none ever ran.
	Watcher *Watcher `json:"watcher,omitempty"`
}

// New is an empty state of the current format, with no lineage yet (Save
// makes one on the first write).
func New() *State {
	return &State{FormatVersion: FormatVersion, Jobs: []Job{}, Leftovers: []Job{}, Machines: []Machine{}}
}

// Clone copies s deeply enough that changing the copy's jobs, nodes,
// processes, leftovers and machines leaves s as it was. Facts are shared:
// a refresh replaces them whole and never changes them in place.
func (s *State) Clone() *State {
	c := *s
	c.Jobs = cloneJobs(s.Jobs)
	c.Leftovers = cloneJobs(s.Leftovers)
	c.Machines = slices.Clone(s.Machines)
	c.Waits = slices.Clone(s.Waits)
	if s.Watcher != nil {
		w := *s.Watcher
		c.Watcher = &w
	}
	for i := range c.Machines {
		c.Machines[i].HostKeys = slices.Clone(c.Machines[i].HostKeys)
		if p := c.Machines[i].Physical; p != nil {
			cp := *p
			c.Machines[i].Physical = &cp
		}
	}
	return &c
}

func cloneJobs(jobs []Job) []Job {
	out := slices.Clone(jobs)
	for i := range out {
		out[i].Spec.Lifecycle.RetryExitCodes = slices.Clone(out[i].Spec.Lifecycle.RetryExitCodes)
		out[i].Spec.Lifecycle.FailExitCodes = slices.Clone(out[i].Spec.Lifecycle.FailExitCodes)
		out[i].History = slices.Clone(out[i].History)
		for h := range out[i].History {
			ends := slices.Clone(out[i].History[h].Nodes)
			for k := range ends {
				ends[k] = cloneEnd(ends[k])
			}
			out[i].History[h].Nodes = ends
		}
		out[i].Nodes = slices.Clone(out[i].Nodes)
		for k := range out[i].Nodes {
			n := &out[i].Nodes[k]
			n.GPUs = slices.Clone(n.GPUs)
			n.GPUUUIDs = slices.Clone(n.GPUUUIDs)
			if n.Reach != nil {
				r := *n.Reach
				r.IdentityFiles = slices.Clone(r.IdentityFiles)
				r.HostKeys = slices.Clone(r.HostKeys)
				if r.Bastion != nil {
					b := *r.Bastion
					r.Bastion = &b
				}
				n.Reach = &r
			}
			if n.Process != nil {
				p := *n.Process
				n.Process = &p
			}
			if n.End != nil {
				e := cloneEnd(*n.End)
				n.End = &e
			}
		}
	}
	return out
}

func cloneEnd(e NodeEnd) NodeEnd {
	if e.ExitStatus != nil {
		v := *e.ExitStatus
		e.ExitStatus = &v
	}
	e.LogTail = slices.Clone(e.LogTail)
	return e
}

// AddLeftover records a run that could not be stopped in full.
func (s *State) AddLeftover(j Job) {
	s.Leftovers = slices.DeleteFunc(s.Leftovers, func(o Job) bool { return o.Name == j.Name && o.RunID == j.RunID })
	s.Leftovers = append(s.Leftovers, j)
	slices.SortFunc(s.Leftovers, func(a, b Job) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.RunID, b.RunID)
	})
}

// RemoveLeftover forgets a leftover run once it is stopped.
func (s *State) RemoveLeftover(job, runID string) {
	s.Leftovers = slices.DeleteFunc(s.Leftovers, func(o Job) bool { return o.Name == job && o.RunID == runID })
}

// Job statuses (docs/lifecycle.md).
const (
	// JobLaunching: apply is starting the nodes; some may have a process.
	JobLaunching = "launching"
	// JobRunning: every node's process was started and confirmed.
	JobRunning = "running"
	// JobFailed: with EndReason set, the run failed (a node exited
	// non-zero, was killed, straggled, ran past its deadline) and no
	// restart is left, or one is due (see the plan); without EndReason, a
	// launch failed before its processes ran and its started nodes were
	// stopped (Error says why): the next plan replaces it.
	JobFailed = "failed"
	// JobStopping: apply is stopping the nodes.
	JobStopping = "stopping"
	// JobSucceeded: every node of the run exited 0 (a batch job): done.
	JobSucceeded = "succeeded"
	// JobLost: a node vanished without an exit status (its machine was
	// lost, rebooted, or did not answer for longer than lost_after) and
	// no restart is left.
	JobLost = "lost"
	// JobRestarting: the run ended, what was left of it was stopped, and
	// it is restarted once RestartAt is past.
	JobRestarting = "restarting"
)

// Ended says the job's run is over (nothing of it runs); a plan decides
// from its record and its restart policy whether it runs again.
func (j *Job) Ended() bool {
	switch j.Status {
	case JobSucceeded, JobLost, JobRestarting:
		return true
	case JobFailed:
		return j.EndReason != ""
	}
	return false
}

// Job is one launched job.
type Job struct {
	Name string `json:"name"`
	// Spec is the effective configuration the job was launched with, and
	// ConfigHash its hash (Spec.Hash()); the plan compares both with the
	// configuration to say which fields changed.
	Spec       JobSpec `json:"spec"`
	ConfigHash string  `json:"config_hash"`
	Status     string  `json:"status"`
	// Error is why the job failed; empty otherwise.
	Error string `json:"error,omitempty"`
	// RunID names this launch; every process of the job carries it as
	// GPULAYER_RUN_ID, so stop can find descendants that left the group.
	RunID      string    `json:"run_id"`
	MasterAddr string    `json:"master_addr,omitempty"`
	MasterPort int       `json:"master_port,omitempty"`
	LaunchedAt time.Time `json:"launched_at"`
	// Nodes in node-rank order.
	Nodes []Node `json:"nodes"`

	// The lifecycle of the run (docs/lifecycle.md).
	//
	// Restarts and LostRestarts are the restarts used under this
	// configuration after the job's own failures and after lost nodes;
	// a changed configuration, or --replace, starts again from 0.
	Restarts     int `json:"restarts,omitempty"`
	LostRestarts int `json:"lost_restarts,omitempty"`
	// EndedAt is when the run was first seen to have ended, EndReason why
	// (a lifecycle reason code, docs/lifecycle.md), RestartAt when the
	// restart of a restarting job is due.
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	EndReason string     `json:"end_reason,omitempty"`
	RestartAt *time.Time `json:"restart_at,omitempty"`
	// FirstExitAt is when a node was first seen to have exited 0 while
	// others still ran: completion_grace counts from it.
	FirstExitAt *time.Time `json:"first_exit_at,omitempty"`
	// History are the earlier runs of the job, oldest first, at most
	// MaxHistory.
	History []Run `json:"history,omitempty"`
}

// MaxHistory bounds a job's History.
const MaxHistory = 10

// Run is an earlier run of a job, as it ended.
type Run struct {
	RunID      string     `json:"run_id"`
	LaunchedAt time.Time  `json:"launched_at"`
	EndedAt    *time.Time `json:"ended_at,omitempty"`
	// Status is how it ended: succeeded, failed, lost, or replaced (it
	// was stopped for a new configuration or by --replace).
	Status    string `json:"status"`
	EndReason string `json:"end_reason,omitempty"`
	// Message says how it ended, as the plan that saw it end said it
	// ("node 1 on a2 exited with status 3"); empty for a replaced run and
	// in states written before it.
	Message string    `json:"message,omitempty"`
	Nodes   []NodeEnd `json:"nodes"`
}

// Node is one machine of a job.
type Node struct {
	Rank    int    `json:"rank"`
	Host    string `json:"host"`
	Fleet   string `json:"fleet,omitempty"`
	Address string `json:"address"`
	Port    int    `json:"port,omitempty"`
	// GPUs are the indices the node was given, ascending, and GPUUUIDs
	// their UUIDs in the same order when the probe knew them.
	GPUs     []int    `json:"gpus"`
	GPUUUIDs []string `json:"gpu_uuids,omitempty"`
	// Location is where the host was when the job was placed.
	Location Location `json:"location"`
	// Reach is how the machine was reached when the node was launched:
	// what a stop, status or logs use once the host is no longer
	// declared, or is declared at another address (as Terraform keeps
	// in state what a destroy needs). Nil in states written before it.
	Reach *Reach `json:"reach,omitempty"`
	// Process is what was started there; nil until it was.
	Process *Process `json:"process,omitempty"`
	// End is how the node's process ended, once a refresh saw it had;
	// UnreachableSince is when its host first did not answer (cleared
	// when it answers).
	End              *NodeEnd   `json:"end,omitempty"`
	UnreachableSince *time.Time `json:"unreachable_since,omitempty"`
}

// NodeEnd is how one node of a run ended.
type NodeEnd struct {
	Rank int `json:"rank"`
	// ExitStatus is the status the leader recorded (128+N for a signal N,
	// as sh reports it), nil when it recorded none.
	ExitStatus *int   `json:"exit_status,omitempty"`
	Signal     string `json:"signal,omitempty"`
	// Lost says the node vanished without an exit status.
	Lost    bool      `json:"lost,omitempty"`
	EndedAt time.Time `json:"ended_at"`
	LogTail []string  `json:"log_tail,omitempty"`
}

// Reach is how to reach a machine over SSH as a launch did: its address
// is the node's. Paths are absolute.
type Reach struct {
	// Port is the port dialed (the node's Port is the host block's, 0
	// when the ssh block's applied).
	Port           int      `json:"port"`
	User           string   `json:"user"`
	IdentityFiles  []string `json:"identity_files,omitempty"`
	KnownHostsFile string   `json:"known_hosts_file,omitempty"`
	HostKeyCheck   string   `json:"host_key_check,omitempty"`
	// HostKeys are the keys the machine is reached with once it is no
	// longer declared: the one it proved it holds at the launch
	// (authorized_keys form), or those its provider published.
	HostKeys       []string `json:"host_keys,omitempty"`
	Bastion        *Bastion `json:"bastion,omitempty"`
	ConnectTimeout Duration `json:"connect_timeout,omitempty"`
}

// Bastion is the jump host a machine was reached through; it is checked
// against the Reach's known_hosts file.
type Bastion struct {
	Address string `json:"address"`
	Port    int    `json:"port"`
	User    string `json:"user"`
}

// Location is a machine's region, zone and network group.
type Location struct {
	Region       string `json:"region,omitempty"`
	Zone         string `json:"zone,omitempty"`
	NetworkGroup string `json:"network_group,omitempty"`
}

// Process identifies one started process so that a later process reusing
// its pid is never taken for it: a process is the job's only while its
// pid, its start time (field 22 of /proc/PID/stat, clock ticks after
// boot) and the machine's boot id all match.
type Process struct {
	PID       int    `json:"pid"`
	PGID      int    `json:"pgid"`
	StartTime uint64 `json:"start_time"`
	BootID    string `json:"boot_id"`
	// PIDNamespace is the machine's pid namespace as the launch saw it
	// (the target of /proc/self/ns/pid, "pid:[4026531836]"), empty when
	// it could not be read. Nodes with the same boot id, pid namespace
	// and login share one kernel's processes (the sandbox, containers of
	// one host): a stop sweeps their processes once, not once per node.
	PIDNamespace string    `json:"pid_ns,omitempty"`
	RunID        string    `json:"run_id"`
	LogPath      string    `json:"log_path,omitempty"`
	StartedAt    time.Time `json:"started_at"`
}

// JobSpec is a job's effective configuration: everything that, changed,
// means the job must be launched again.
type JobSpec struct {
	Command     []string          `json:"command"`
	Env         map[string]string `json:"env"`
	Workdir     string            `json:"workdir,omitempty"`
	Launcher    string            `json:"launcher"`
	Nodes       int               `json:"nodes"`
	GPUsPerNode int               `json:"gpus_per_node"`
	MasterPort  int               `json:"master_port,omitempty"`
	// TorchrunArgs are the job's torchrun block's args: launcher options
	// placed before the script (a job of the plain launcher has none).
	TorchrunArgs []string   `json:"torchrun_args,omitempty"`
	Policy       PolicySpec `json:"policy"`
	// StopTimeout is how long stop waits between SIGTERM and SIGKILL. It
	// is not part of the hash: changing it needs no relaunch.
	StopTimeout Duration `json:"stop_timeout"`
	// StartCheck is the job's start_check when it is not the default
	// (nil): how long a node must run after its start to count as
	// started. Not part of the hash, and left out at its default, so the
	// spec recorded for a job that does not set it is what it was.
	StartCheck *Duration `json:"start_check,omitempty"`
	// Lifecycle is the job's kind and restart policy; not part of the
	// hash either: it decides what happens when the run ends, not how it
	// runs.
	Lifecycle LifecycleSpec `json:"lifecycle"`
	// Code is the job's code as plan read it; nil for a job without a
	// code block. Only its hash is part of the job's hash.
	Code *CodeSpec `json:"code,omitempty"`
	// Setup is the script run on each machine before the command (in the
	// hash); SetupTimeout bounds it (not in the hash).
	Setup        string   `json:"setup,omitempty"`
	SetupTimeout Duration `json:"setup_timeout,omitempty"`
}

// CodeSpec is a job's code directory as the plan hashed it.
type CodeSpec struct {
	// Source is the local directory, absolute; Exclude and MaxSize how it
	// was read: what apply reads again to send it.
	Source  string   `json:"source"`
	Exclude []string `json:"exclude,omitempty"`
	MaxSize int64    `json:"max_size"`
	// Hash is the hex sha256 of the tree (codetree.Tree.Hash): the name
	// of its directory on the machines.
	Hash  string `json:"hash"`
	Files int    `json:"files"`
	Size  int64  `json:"size"`
	// Manifest is each file's path and short hash, what a later plan
	// counts added, changed and removed files by.
	Manifest map[string]string `json:"manifest,omitempty"`
}

// LifecycleSpec is what decides a job's run's end (docs/lifecycle.md).
// Its zero value is a batch job never restarted: how jobs launched before
// it existed are handled.
type LifecycleSpec struct {
	Kind string `json:"kind,omitempty"` // batch (also "") or service
	// Attempts and OnLost bound the restarts after the job's own failures
	// and after lost nodes; -1 is unlimited.
	Attempts        int      `json:"attempts"`
	OnLost          int      `json:"on_lost"`
	RetryExitCodes  []int    `json:"retry_exit_codes,omitempty"`
	FailExitCodes   []int    `json:"fail_exit_codes,omitempty"`
	Delay           Duration `json:"delay,omitempty"`
	MaxDelay        Duration `json:"max_delay,omitempty"`
	LostAfter       Duration `json:"lost_after,omitempty"`
	CompletionGrace Duration `json:"completion_grace,omitempty"`
	Deadline        Duration `json:"deadline,omitempty"`
	StallTimeout    Duration `json:"stall_timeout,omitempty"`
	// ExpectedDuration is how long the job said a run lasts (0: not
	// said): what a waiting job's plan counts on to see its machines free.
	ExpectedDuration Duration `json:"expected_duration,omitempty"`
}

// PolicySpec is the effective placement policy of a job.
type PolicySpec struct {
	Name            string            `json:"name"`
	GroupLocality   string            `json:"group_locality"`
	Rank            string            `json:"rank"`
	OnUnschedulable string            `json:"on_unschedulable"`
	BucketChoice    string            `json:"bucket_choice"`
	Regions         []string          `json:"regions"`
	Labels          map[string]string `json:"labels"`
	// Compatible is the properties every node of a group shares, nil for
	// the default (torch alone); Slice the policy's slices, nil for none.
	// Both are left out at their defaults, so that a job recorded before
	// they existed hashes as it did and upgrading replaces nothing.
	Compatible []string   `json:"compatible,omitempty"`
	Slice      *SliceSpec `json:"slice,omitempty"`
	// MaxWait is how long a job may wait for a tighter group (prefer
	// only), left out at 0. It is not part of the hash: it decides when a
	// job is launched, not how it runs.
	MaxWait Duration `json:"max_wait,omitempty"`
}

// SliceSpec is a policy's slices: nodes in runs of Nodes, each inside one
// group at Locality.
type SliceSpec struct {
	Nodes    int    `json:"nodes"`
	Locality string `json:"locality"`
}

// Spec fields, as the plan names them when they change.
const (
	FieldCommand     = "command"
	FieldEnv         = "env"
	FieldWorkdir     = "workdir"
	FieldLauncher    = "launcher"
	FieldNodes       = "nodes"
	FieldGPUsPerNode = "gpus_per_node"
	FieldMasterPort  = "master_port"
	FieldPolicy      = "policy"
	// FieldTorchrunArgs is the args attribute of the job's torchrun block.
	FieldTorchrunArgs = "torchrun.args"
	FieldCode         = "code"
	FieldSetup        = "setup"
)

// hashedField is one field the hash covers. A field added after the
// first version is hashed only when set (sinceFirst), so that a spec
// which does not use it hashes as it did before the field existed, and
// upgrading gpulayer replaces no running job.
type hashedField struct {
	name       string
	value      any
	sinceFirst bool
}

// hashed is the part of a JobSpec that the hash covers, field by field, in
// a fixed order.
func (s JobSpec) hashed() []hashedField {
	p := s.Policy
	p.Name = "" // renaming a policy with the same rules changes nothing
	// max_wait only decides when a job is placed: changing it relaunches
	// nothing.
	p.MaxWait = 0
	return []hashedField{
		{FieldCommand, s.Command, false},
		{FieldEnv, s.Env, false},
		{FieldWorkdir, s.Workdir, false},
		{FieldLauncher, s.Launcher, false},
		{FieldNodes, s.Nodes, false},
		{FieldGPUsPerNode, s.GPUsPerNode, false},
		{FieldMasterPort, s.MasterPort, false},
		{FieldPolicy, p, false},
		{FieldTorchrunArgs, s.TorchrunArgs, true},
		{FieldCode, s.CodeHash(), true},
		{FieldSetup, s.Setup, true},
	}
}

// CodeHash is the hash of the job's code, "" without a code block.
func (s JobSpec) CodeHash() string {
	if s.Code == nil {
		return ""
	}
	return s.Code.Hash
}

// Hash is "sha256:" and the hex digest of the spec's launch-relevant
// fields. encoding/json writes map keys sorted, so equal specs hash
// equally.
func (s JobSpec) Hash() string {
	h := sha256.New()
	for _, f := range s.hashed() {
		if f.sinceFirst && isEmpty(f.value) {
			continue
		}
		b, _ := json.Marshal(normalize(f.value))
		h.Write([]byte(f.name))
		h.Write([]byte{0})
		h.Write(b)
		h.Write([]byte{0})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// ChangedFields lists the fields whose values differ between old and new,
// in the spec's order.
func ChangedFields(old, new JobSpec) []string {
	a, b := old.hashed(), new.hashed()
	var out []string
	for i := range a {
		x, _ := json.Marshal(normalize(a[i].value))
		y, _ := json.Marshal(normalize(b[i].value))
		if string(x) != string(y) {
			out = append(out, a[i].name)
		}
	}
	return out
}

// isEmpty reports whether a field added since the first version is unset.
func isEmpty(v any) bool {
	switch x := v.(type) {
	case []string:
		return len(x) == 0
	case string:
		return x == ""
	}
	return false
}

// normalize makes nil and empty slices and maps hash alike.
func normalize(v any) any {
	switch x := v.(type) {
	case []string:
		if x == nil {
			return []string{}
		}
	case map[string]string:
		if x == nil {
			return map[string]string{}
		}
	case PolicySpec:
		if x.Regions == nil {
			x.Regions = []string{}
		}
		if x.Labels == nil {
			x.Labels = map[string]string{}
		}
		return x
	}
	return v
}

// Machine is one machine a provider created, with the provider's record of
// it; that record, not the machine's claims, says where it is (ADR-0021).
type Machine struct {
	Fleet    string `json:"fleet"`
	Name     string `json:"name"`
	Provider string `json:"provider"`
	// Project is the provider's account the machine was made in (GCP
	// project): where to delete it once its fleet is no longer declared.
	Project string `json:"project,omitempty"`
	// SpecHash is the hash of the fleet's provider block the machine was
	// created from; a change that needs a new machine shows as replace.
	SpecHash   string    `json:"spec_hash,omitempty"`
	ID         string    `json:"id,omitempty"`
	Zone       string    `json:"zone,omitempty"`
	Region     string    `json:"region,omitempty"`
	InternalIP string    `json:"internal_ip,omitempty"`
	ExternalIP string    `json:"external_ip,omitempty"`
	Status     string    `json:"status,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	// Physical is where the provider says the machine runs (GCP's
	// physicalHostTopology); nil when it did not say.
	Physical *PhysicalHost `json:"physical,omitempty"`
	// Spot says the machine can be preempted: TERMINATED then means
	// preempted rather than stopped.
	Spot bool `json:"spot,omitempty"`
	// HostKeys are the machine's SSH host keys as its provider published
	// them (GCP guest attributes, "hostkeys/"), in authorized_keys form
	// ("ssh-ed25519 AAAA..."); gpulayer pins them when it connects. Empty
	// when the provider did not publish them: the fleet's host_key_check
	// then applies.
	HostKeys []string `json:"host_keys,omitempty"`
}

// PhysicalHost is a provider's account of the hardware under a VM.
type PhysicalHost struct {
	Cluster  string `json:"cluster,omitempty"`
	Block    string `json:"block,omitempty"`
	SubBlock string `json:"sub_block,omitempty"`
	Host     string `json:"host,omitempty"`
}

// Job returns the job named name, or nil.
func (s *State) Job(name string) *Job {
	for i := range s.Jobs {
		if s.Jobs[i].Name == name {
			return &s.Jobs[i]
		}
	}
	return nil
}

// SetJob records j, replacing the job of the same name, keeping Jobs
// sorted.
func (s *State) SetJob(j Job) {
	if old := s.Job(j.Name); old != nil {
		*old = j
		return
	}
	s.Jobs = append(s.Jobs, j)
	slices.SortFunc(s.Jobs, func(a, b Job) int { return strings.Compare(a.Name, b.Name) })
}

// RemoveJob forgets the job named name.
func (s *State) RemoveJob(name string) {
	s.Jobs = slices.DeleteFunc(s.Jobs, func(j Job) bool { return j.Name == name })
}

// Duration is a time.Duration written as Go writes it ("30s").
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// SetMachine records m, replacing the machine of the same name, keeping
// Machines sorted by fleet and name.
func (s *State) SetMachine(m Machine) {
	for i := range s.Machines {
		if s.Machines[i].Name == m.Name {
			s.Machines[i] = m
			return
		}
	}
	s.Machines = append(s.Machines, m)
	slices.SortFunc(s.Machines, func(a, b Machine) int {
		if c := strings.Compare(a.Fleet, b.Fleet); c != 0 {
			return c
		}
		return CompareMachineNames(a.Name, b.Name)
	})
}

// RemoveMachine forgets the machine named name, and what is left of runs
// on it: its processes ended with it.
func (s *State) RemoveMachine(name string) {
	s.Machines = slices.DeleteFunc(s.Machines, func(m Machine) bool { return m.Name == name })
	for i := range s.Leftovers {
		s.Leftovers[i].Nodes = slices.DeleteFunc(s.Leftovers[i].Nodes, func(n Node) bool { return n.Host == name })
	}
	s.Leftovers = slices.DeleteFunc(s.Leftovers, func(j Job) bool { return len(j.Nodes) == 0 })
}

// CompareMachineNames orders "cloud-2" before "cloud-10".
func CompareMachineNames(a, b string) int {
	fa, ia := MachineNumber(a)
	fb, ib := MachineNumber(b)
	if c := strings.Compare(fa, fb); c != 0 {
		return c
	}
	return ia - ib
}

// MachineNumber splits "cloud-12" into "cloud" and 12; a name without a
// number gives -1.
func MachineNumber(name string) (string, int) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return name, -1
	}
	n := 0
	for _, r := range name[i+1:] {
		if r < '0' || r > '9' || n > 1<<20 {
			return name, -1
		}
		n = n*10 + int(r-'0')
	}
	if i+1 == len(name) {
		return name, -1
	}
	return name[:i], n
}

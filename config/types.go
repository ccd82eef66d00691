package config

import (
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Config is everything a directory of configuration files declares, after
// variables, locals and references have been resolved. Slices are sorted by
// name so that everything derived from a Config is deterministic.
type Config struct {
	// Dir is the directory the files were read from.
	Dir string
	// Files maps each file name to its source, for rendering diagnostics
	// with source snippets, and its syntax tree (Body, Nav) when Load
	// returned diagnostics.
	Files map[string]*hcl.File

	Variables []*Variable
	// Locals are the values of every locals block, by name.
	Locals   map[string]cty.Value
	SSH      []*SSH
	Fleets   []*Fleet
	Policies []*Policy
	Jobs     []*Job
	// Backend is where state is kept; nil for the default local file.
	Backend *Backend
}

// Variable is a declared input variable and the value it resolved to.
type Variable struct {
	Name        string
	Description string
	Sensitive   bool
	// Type is the declared type constraint; cty.DynamicPseudoType ("any")
	// when none is declared.
	Type cty.Type
	// HasDefault is true when the block has a default, even a null one.
	HasDefault bool
	// Value is the value after every source has been applied, converted
	// to Type.
	Value     cty.Value
	DeclRange hcl.Range

	set        bool      // a value was given or defaulted
	valueRange hcl.Range // where Value was written, when it was in a file
}

// HasValue reports whether the variable has a default or was given a value.
func (v *Variable) HasValue() bool { return v.set }

// Host-key checking modes of an ssh block.
const (
	HostKeyStrict    = "strict"     // unknown and changed keys are refused (default)
	HostKeyAcceptNew = "accept-new" // unknown keys are recorded; changed keys are refused
)

// SSH is an `ssh "name"` block: how to reach a fleet's machines.
type SSH struct {
	Name           string
	User           string
	Port           int // default 22
	IdentityFile   string
	KnownHosts     string // default ~/.ssh/known_hosts
	HostKeyCheck   string // HostKeyStrict or HostKeyAcceptNew
	Bastion        string // "host" or "user@host:port"; empty for none
	ConnectTimeout time.Duration
	DeclRange      hcl.Range
}

// Location is where a machine is, from the loosest level to the tightest.
// An empty field means unknown at that level.
type Location struct {
	Region       string
	Zone         string
	NetworkGroup string
}

// Over is l with the fields that over sets replacing l's.
func (l Location) Over(over Location) Location {
	if over.Region != "" {
		l.Region = over.Region
	}
	if over.Zone != "" {
		l.Zone = over.Zone
	}
	if over.NetworkGroup != "" {
		l.NetworkGroup = over.NetworkGroup
	}
	return l
}

// Fleet is a `fleet "name"` block: either static hosts, or Count machines
// that gpulayer creates on GCP.
type Fleet struct {
	Name     string
	SSH      *SSH // nil: defaults (current user, port 22, ~/.ssh/known_hosts, strict)
	Location Location
	Labels   map[string]string
	Hosts    []*Host // static machines, in declaration order
	Count    int     // machines to create; only with GCP
	GCP      *GCP
	// LinkBandwidth is the fleet's link_bandwidth block; nil without one.
	LinkBandwidth *LinkBandwidth
	DeclRange     hcl.Range
}

// Host is a `host "name"` block inside a fleet. Location and Labels already
// include what the host inherits from its fleet.
type Host struct {
	Name     string
	Fleet    string
	Address  string // host name or IP, without the port
	Port     int    // 0: the ssh block's port
	Location Location
	// OwnLocation is what the host block itself sets, empty where it
	// inherits: a probe reports whether a host's zone came from its own
	// block or from its fleet's defaults, even where the two are equal.
	OwnLocation Location
	Labels      map[string]string
	// Created marks a machine a provider created, not a declared host:
	// OwnLocation is then the provider's record, trusted over anything the
	// machine says (ADR-0021), and HostKeys, when the provider published
	// them, are the only keys it is reached with.
	Created   bool
	HostKeys  []string
	DeclRange hcl.Range
}

// GCP is the `gcp` block of a fleet whose machines gpulayer creates.
type GCP struct {
	Project          string
	Zone             string
	MachineType      string
	Image            string
	AcceleratorType  string // "" with AcceleratorCount 0: the machine type's own GPUs
	AcceleratorCount int
	DiskSizeGB       int // 0: the image's size
	Spot             bool
	Network          string // "" : the project's default network
	Subnetwork       string
	ServiceAccount   string
	Tags             []string
	Metadata         map[string]string
	Labels           map[string]string
	// Placement is "compact", "spread" or "": compact and spread create (or
	// reuse) a resource policy that places the fleet's machines close
	// together or apart.
	Placement string
	// Endpoint overrides the Compute Engine API endpoint (tests,
	// emulators); GPULAYER_GCP_ENDPOINT does the same for every fleet.
	Endpoint  string
	DeclRange hcl.Range
}

// Placement values of a gcp block.
const (
	GCPPlacementCompact = "compact"
	GCPPlacementSpread  = "spread"
)

// Placement policy values (ADR-0021).
const (
	LocalityPrefer       = "prefer"
	LocalityNVLinkDomain = "nvlink_domain" // machines whose GPUs share one NVLink fabric clique
	LocalityNetworkGroup = "network_group"
	LocalityZone         = "zone"
	LocalityRegion       = "region"
	LocalityAny          = "any"

	RankSpread         = "spread"
	RankFirstFit       = "first_fit"
	RankMostFreeMemory = "most_free_memory"
	RankBinpack        = "binpack"

	UnschedulableWait = "wait"
	UnschedulableFail = "fail"

	BucketBestFit   = "best_fit"
	BucketFirstFill = "first_fill"

	CompatTorch      = "torch"
	CompatCUDADriver = "cuda_driver"
	CompatGPUModel   = "gpu_model"
)

// Policy is a `policy "name"` block.
type Policy struct {
	Name            string
	GroupLocality   string // default LocalityPrefer
	Rank            string // default RankSpread
	OnUnschedulable string // default UnschedulableWait
	BucketChoice    string // default BucketBestFit
	Regions         []string
	Labels          map[string]string
	// Compatible lists the properties every node of a group shares;
	// default [CompatTorch].
	Compatible []string
	// Slice is the policy's slice block, nil when it has none.
	Slice *Slice
	// MaxWait is how long a job under prefer may wait for a tighter group
	// that running jobs are expected to free (their expected_duration);
	// 0, the default, never waits (ADR-0021's prefer).
	MaxWait   time.Duration
	DeclRange hcl.Range
}

// Slice is a policy's slice block: a job's nodes come in slices of Nodes,
// each slice inside one group at Locality.
type Slice struct {
	Nodes     int
	Locality  string
	DeclRange hcl.Range
}

// Launchers of a job.
const (
	LauncherPlain    = "plain"
	LauncherTorchrun = "torchrun"
)

// Job is a `job "name"` block.
type Job struct {
	Name        string
	Policy      *Policy // nil: the default policy; see EffectivePolicy
	Nodes       int
	GPUsPerNode int
	Command     []string
	Env         map[string]string
	Workdir     string
	Labels      map[string]string
	Launcher    string // default LauncherTorchrun
	StopTimeout time.Duration
	// StartCheck is how long each node's process must still run after
	// its start for the launch to count as done (DefaultStartCheck); a
	// node that ends before fails the launch, as soon as it is seen.
	StartCheck time.Duration
	// MasterPort is node 0's rendezvous port; 0 lets apply choose one.
	MasterPort int
	// Kind is KindBatch (runs to completion; a success is final) or
	// KindService (restarted whenever it ends).
	Kind string
	// Restart is the job's restart policy (docs/lifecycle.md).
	Restart Restart
	// CompletionGrace is how long the other nodes may run once one node
	// exited 0; Deadline, 0 for none, how long a run may last; StallTimeout,
	// 0 for none, how long its logs and heartbeat may stay unchanged.
	CompletionGrace time.Duration
	Deadline        time.Duration
	StallTimeout    time.Duration
	// ExpectedDuration is how long a run is expected to last, 0 when not
	// declared: what a waiting job's plan estimates its machines free by
	// (policy max_wait). It bounds nothing (deadline does).
	ExpectedDuration time.Duration
	// TorchrunArgs are the args of the job's torchrun block: launcher
	// options placed before the script, none of those gpulayer sets.
	TorchrunArgs []string
	// Code is the job's code block, nil when it has none; Setup the
	// script run on each machine before the command, bounded by
	// SetupTimeout.
	Code         *Code
	Setup        string
	SetupTimeout time.Duration
	DeclRange    hcl.Range

	policyRange hcl.Range
}

// Job kinds.
const (
	KindBatch   = "batch"
	KindService = "service"
)

// Kinds are the values of a job's kind.
var Kinds = []string{KindBatch, KindService}

// Restart is a job's `restart` block.
type Restart struct {
	// Attempts are the restarts after the job's own failures (a node
	// exited non-zero or was killed); OnLost those after a node or its
	// machine was lost. -1 is unlimited (a service's default).
	Attempts int
	OnLost   int
	// RetryExitCodes are always restarted, and not counted;
	// FailExitCodes never restarted.
	RetryExitCodes []int
	FailExitCodes  []int
	// Delay is the wait before a restart, doubled after each one up to
	// MaxDelay.
	Delay    time.Duration
	MaxDelay time.Duration
	// LostAfter is how long a node's host may not answer before the node
	// counts as lost.
	LostAfter time.Duration
}

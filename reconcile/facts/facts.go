package facts

import (
	"time"

	"github.com/gpulayer/gpulayer/topology"
)

// Version is the version of the Facts document this package writes. A
// reader refuses documents of another version rather than guess.
const Version = 1

// Document is a facts snapshot: what every probed host reported at one time.
// Plans can be made offline from a saved Document.
type Document struct {
	Version int    `json:"version"`
	Hosts   []Host `json:"hosts"`
}

// Status of one host's probe.
const (
	StatusOK          = "ok"          // the script ran and its output was read
	StatusUnreachable = "unreachable" // no SSH session: dial, handshake, auth or host key
	StatusFailed      = "failed"      // a session ran but the script failed or timed out
)

// Host is what one machine reported, and where it is.
type Host struct {
	Name    string `json:"name"`
	Fleet   string `json:"fleet,omitempty"`
	Address string `json:"address"`
	Port    int    `json:"port,omitempty"`
	Status  string `json:"status"`
	Error   string `json:"error,omitempty"`

	Hostname    string `json:"hostname,omitempty"`
	Kernel      string `json:"kernel,omitempty"` // `uname -sr`: "Linux 6.1.0-18-amd64"
	Arch        string `json:"arch,omitempty"`   // `uname -m`: "x86_64"
	ProductName string `json:"product_name,omitempty"`

	Location Location `json:"location"`

	TorchVersion      string `json:"torch_version,omitempty"`
	CUDADriverVersion string `json:"cuda_driver_version,omitempty"` // nvidia-smi's driver_version
	// Torchrun is where `command -v torchrun` found torchrun on the
	// login's PATH (the PATH a launch has), "" when it found none, nil
	// when not known (facts of a probe that did not ask): a host known to
	// have none cannot run a torchrun job.
	Torchrun *string `json:"torchrun,omitempty"`

	GPUs []GPU `json:"gpus"`
	// FreeGPUs are the indices of GPUs with no compute process, ascending.
	FreeGPUs []int `json:"free_gpus"`

	// TopologyRaw is the exact output of `nvidia-smi topo -m`, kept so that
	// a better parser can read an old snapshot again.
	TopologyRaw string           `json:"topology_raw,omitempty"`
	Topology    *topology.Matrix `json:"topology,omitempty"`
	// NVLinkDomain is the multi-node NVLink domain the machine's GPUs are
	// registered in, "CLUSTER_UUID:CLIQUE_ID" (topology.NVLinkDomain):
	// set only when every GPU finished registering with the same fabric
	// clique; "" otherwise, with a warning when the machine has a fabric it
	// cannot be placed by (a registration not completed, mixed cliques).
	NVLinkDomain string `json:"nvlink_domain,omitempty"`

	PIDs   []PID  `json:"pids,omitempty"`
	BootID string `json:"boot_id,omitempty"`

	Warnings []string  `json:"warnings,omitempty"`
	ProbedAt time.Time `json:"probed_at"`
}

// Location sources, from the most trusted to the least.
const (
	SourceProvider      = "provider"       // the record of the provider that created the machine
	SourceGCEMetadata   = "gce-metadata"   // the machine's GCE metadata server
	SourceEC2Metadata   = "ec2-metadata"   // the machine's EC2 instance metadata service (IMDSv2)
	SourceAzureMetadata = "azure-metadata" // the machine's Azure instance metadata service
	SourceHost          = "host"           // the host block of the configuration
	SourceFleet         = "fleet"          // the fleet's defaults
)

// Location is where a host is. Source names the most trusted source that
// supplied any of the fields; "" when none did.
type Location struct {
	Region       string `json:"region,omitempty"`
	Zone         string `json:"zone,omitempty"`
	NetworkGroup string `json:"network_group,omitempty"`
	Source       string `json:"source,omitempty"`
}

// GPU is one row of `nvidia-smi --query-gpu`.
type GPU struct {
	Index          int       `json:"index"`
	UUID           string    `json:"uuid"`
	Name           string    `json:"name"`
	PCIBusID       string    `json:"pci_bus_id"`
	MemoryTotalMiB int64     `json:"memory_total_mib"`
	MemoryUsedMiB  int64     `json:"memory_used_mib"`
	Processes      []Process `json:"processes"`
	// Claim is the live claim a gpulayer launch holds on the GPU on the
	// machine (~/.gpulayer/claims, docs/apply.md), nil when none: a GPU
	// claimed by another configuration is busy even before its process
	// opens it.
	Claim *Claim `json:"claim,omitempty"`
	// Fabric is the GPU's NVLink fabric registration, from the Fabric
	// section of `nvidia-smi -q`; nil when it printed none (drivers before
	// the section existed, GPUs it does not apply to on some drivers).
	Fabric *topology.GPUFabric `json:"fabric,omitempty"`
}

// Claim is who holds a GPU's claim: a node of a job of one state (its
// lineage), and the process whose life the claim lasts.
type Claim struct {
	Lineage string `json:"lineage"`
	Job     string `json:"job"`
	RunID   string `json:"run_id"`
	Rank    int    `json:"rank"`
	PID     int    `json:"pid"`
}

// Process is a compute process on a GPU, from
// `nvidia-smi --query-compute-apps`. Its pid is in the machine's (or its
// container's) pid namespace.
type Process struct {
	PID           int   `json:"pid"`
	UsedMemoryMiB int64 `json:"used_memory_mib"`
	// RunID is the GPULAYER_RUN_ID in the process's environment: the
	// launch of gpulayer's that it belongs to; "" when it has none or the
	// probe could not read its environment (another user's process).
	RunID string `json:"run_id,omitempty"`
}

// PID is the liveness of a process the caller asked about (one that state
// says was launched there). StartTime is field 22 of /proc/PID/stat, in
// clock ticks after boot: with BootID it tells a process from a later one
// that reuses its pid.
type PID struct {
	PID       int    `json:"pid"`
	Alive     bool   `json:"alive"`
	StartTime uint64 `json:"start_time,omitempty"`
	// ExitStatus is the status a launched process exited with, when the
	// launcher recorded it on the machine; nil while alive or unknown.
	ExitStatus *int `json:"exit_status,omitempty"`
	// LogTail is the last lines of an exited process's log, when the
	// caller named its log.
	LogTail []string `json:"log_tail,omitempty"`
	// NotRegular names the files of an exited process's node that were
	// there but were not regular files (NodeFileExit, NodeFileLog): the
	// probe never reads a FIFO or a device, which could block it or never
	// end.
	NotRegular []string `json:"not_regular,omitempty"`
	// LogAgeSeconds and HeartbeatAgeSeconds are, for a running process
	// whose job has a stall_timeout, the seconds since its node's log and
	// heartbeat file last changed (the machine's clock); nil when the
	// file is not there or the probe was not asked.
	LogAgeSeconds *int64 `json:"log_age_seconds,omitempty"`
	// EndedAgoSeconds is, for an ended process, how long ago its exit
	// file was written (the machine's clock): when it ended.
	EndedAgoSeconds     *int64 `json:"ended_ago_seconds,omitempty"`
	HeartbeatAgeSeconds *int64 `json:"heartbeat_age_seconds,omitempty"`
}

// The files of a node a PID's NotRegular names.
const (
	NodeFileExit = "exit"
	NodeFileLog  = "log"
)

// Index maps each host's name to its facts (the first of a name): a plan of
// thousands of hosts looks each up once, not by a search of them all. A
// nil document indexes no host.
func (d *Document) Index() map[string]*Host {
	if d == nil {
		return nil
	}
	out := make(map[string]*Host, len(d.Hosts))
	for i := range d.Hosts {
		if _, dup := out[d.Hosts[i].Name]; !dup {
			out[d.Hosts[i].Name] = &d.Hosts[i]
		}
	}
	return out
}

// Find returns the host named name, or nil: a search of every host, for
// one look-up (Index for many).
func (d *Document) Find(name string) *Host {
	for i := range d.Hosts {
		if d.Hosts[i].Name == name {
			return &d.Hosts[i]
		}
	}
	return nil
}

package topology

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// GPU fabric registration states and the one status that counts, spelled as
// nvidia-smi -q prints them (NVML's NVML_GPU_FABRIC_STATE_* and
// nvmlReturn_t).
const (
	FabricNotSupported = "Not Supported"
	FabricNotStarted   = "Not Started"
	FabricInProgress   = "In Progress"
	FabricCompleted    = "Completed"
	FabricSuccess      = "Success"
)

// GPUFabric is one GPU's registration with an NVLink fabric: what NVML's
// nvmlDeviceGetGpuFabricInfo returns and nvidia-smi -q prints in its
// Fabric section. GPUs registered with the same fabric (the same cluster
// UUID and clique id) reach each other over NVLink even when they sit in
// different machines, as the trays of a GB200 NVL72 rack do.
type GPUFabric struct {
	// Index is the GPU's place in the machine's order (nvidia-smi's and
	// CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID); it names the GPU in
	// messages.
	Index int `json:"-"`
	// BusID is the PCI bus id nvidia-smi -q heads the GPU's part with
	// ("00000000:07:00.0"); "" when unknown.
	BusID string `json:"-"`
	// State is the registration's state as printed: Completed, In
	// Progress, Not Started, Not Supported, N/A.
	State string `json:"state"`
	// Status is the registration's error status, meaningful only once
	// State is Completed: Success, or an error ("Insufficient Resources").
	Status string `json:"status,omitempty"`
	// CliqueID is the clique (an NVLink partition) of the fabric the GPU
	// belongs to.
	CliqueID uint32 `json:"clique_id"`
	// ClusterUUID is the fabric's cluster, lower-case 8-4-4-4-12 hex; ""
	// when not reported. All zeros means the GPU is in no multi-node
	// fabric (an HGX H100 with its NVSwitches inside the machine).
	ClusterUUID string `json:"cluster_uuid,omitempty"`
}

// zeroUUID is the cluster UUID of a GPU in no multi-node fabric.
const zeroUUID = "00000000-0000-0000-0000-000000000000"

// Registered says the GPU finished registering with a multi-node fabric:
// state Completed, status Success and a cluster UUID that is not all zeros.
// Only such GPUs count: the status of an unfinished registration means
// nothing (nvml.h), and an HGX H100 reports Completed with a zero UUID on
// every machine alike, which would put unconnected machines in one domain.
func (f GPUFabric) Registered() bool {
	return f.State == FabricCompleted && f.Status == FabricSuccess && f.ClusterUUID != "" && f.ClusterUUID != zeroUUID
}

// Domain is the fabric's identity, "CLUSTER_UUID:CLIQUE_ID"; "" unless
// Registered.
func (f GPUFabric) Domain() string {
	if !f.Registered() {
		return ""
	}
	return f.ClusterUUID + ":" + strconv.FormatUint(uint64(f.CliqueID), 10)
}

// NVLinkDomain is the multi-node NVLink domain of a machine whose GPUs
// report fabrics: the Domain every GPU shares. It is "" with a nil error
// when the machine is in no domain and nothing is wrong (no fabric, or
// NVSwitches inside the machine only). It is "" with an error saying why
// when the machine has a fabric but cannot be placed by it: a registration
// not completed or failed, GPUs in different cliques, or some GPUs
// registered and others not. A machine is in a domain only whole, because a
// node placed there for its NVLinks may be given any of its GPUs.
func NVLinkDomain(gpus []GPUFabric) (string, error) {
	byDomain := map[string][]int{}
	var domains []string
	var unfinished, failed, other []int
	var states, statuses []string
	for _, g := range gpus {
		switch d := g.Domain(); {
		case d != "":
			if _, seen := byDomain[d]; !seen {
				domains = append(domains, d)
			}
			byDomain[d] = append(byDomain[d], g.Index)
		case g.State == FabricCompleted && g.Status != FabricSuccess:
			failed = append(failed, g.Index)
			statuses = appendNew(statuses, g.Status)
		case g.State == FabricInProgress || g.State == FabricNotStarted:
			unfinished = append(unfinished, g.Index)
			states = appendNew(states, g.State)
		default:
			// No fabric here (N/A, Not Supported, absent) or one inside
			// the machine only (a zero cluster UUID).
			other = append(other, g.Index)
		}
	}
	switch {
	case len(domains) == 1 && len(unfinished)+len(failed)+len(other) == 0:
		return domains[0], nil
	case len(domains) > 1:
		parts := make([]string, 0, len(domains))
		for _, d := range domains {
			parts = append(parts, fmt.Sprintf("GPU %s in %s", listOf(byDomain[d]), d))
		}
		return "", fmt.Errorf("GPUs are in different NVLink fabrics (%s): the machine is in no NVLink domain", strings.Join(parts, ", "))
	case len(domains) == 1:
		return "", fmt.Errorf("GPU %s in NVLink fabric %s but GPU %s not (%s): the machine is in no NVLink domain",
			listOf(byDomain[domains[0]]), domains[0], listOf(slices.Concat(unfinished, failed, other)), notWhy(states, statuses))
	case len(failed) > 0:
		return "", fmt.Errorf("GPU %s: NVLink fabric registration failed (status %s): the machine is in no NVLink domain", listOf(failed), strings.Join(statuses, ", "))
	case len(unfinished) > 0:
		return "", fmt.Errorf("GPU %s: NVLink fabric registration not completed (state %s): the machine is in no NVLink domain until it is", listOf(unfinished), strings.Join(states, ", "))
	}
	return "", nil
}

// notWhy says why GPUs outside a fabric are: their states and statuses,
// or that they report none.
func notWhy(states, statuses []string) string {
	var parts []string
	if len(states) > 0 {
		parts = append(parts, "state "+strings.Join(states, ", "))
	}
	if len(statuses) > 0 {
		parts = append(parts, "status "+strings.Join(statuses, ", "))
	}
	if len(parts) == 0 {
		return "no multi-node fabric"
	}
	return strings.Join(parts, "; ")
}

func appendNew(xs []string, x string) []string {
	if slices.Contains(xs, x) {
		return xs
	}
	return append(xs, x)
}

// listOf writes GPU indices as "0-3,6".
func listOf(indices []int) string {
	s := slices.Clone(indices)
	slices.Sort(s)
	return FormatList(slices.Compact(s))
}

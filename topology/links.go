package topology

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// LinkKind is how two devices of one machine are connected, as
// `nvidia-smi topo -m` names it. Kinds are ordered from slowest to fastest.
type LinkKind uint8

const (
	LinkUnknown LinkKind = iota
	LinkSYS              // PCIe plus the SMP interconnect between NUMA nodes (QPI/UPI); old drivers say SOC
	LinkNODE             // PCIe plus the interconnect between host bridges of one NUMA node
	LinkPHB              // PCIe through a host bridge (the CPU)
	LinkPXB              // several PCIe bridges, no host bridge
	LinkPIX              // at most one PCIe bridge
	LinkNV               // a bonded set of NVLinks; Link.NVLinks says how many
	LinkSelf             // the device itself ("X")
)

// Link is one cell of the matrix: a kind and, for NVLink, the link count.
type Link struct {
	Kind    LinkKind
	NVLinks uint8 // only for LinkNV: NV12 has 12
}

// Well-known links, for tests and tables.
var (
	SYS  = Link{Kind: LinkSYS}
	NODE = Link{Kind: LinkNODE}
	PHB  = Link{Kind: LinkPHB}
	PXB  = Link{Kind: LinkPXB}
	PIX  = Link{Kind: LinkPIX}
	Self = Link{Kind: LinkSelf}
)

// NV returns the link of n bonded NVLinks.
func NV(n int) Link { return Link{Kind: LinkNV, NVLinks: uint8(n)} }

// Score is the link's speed points: SYS 1, NODE 2, PHB 3, PXB 4, PIX 5,
// NV<n> 10·n. Self and unknown links score 0.
func (l Link) Score() int {
	switch l.Kind {
	case LinkSYS:
		return 1
	case LinkNODE:
		return 2
	case LinkPHB:
		return 3
	case LinkPXB:
		return 4
	case LinkPIX:
		return 5
	case LinkNV:
		return 10 * int(l.NVLinks)
	}
	return 0
}

// String is the canonical token: "X", "NV12", "PIX", ..., "SYS" (never SOC).
func (l Link) String() string {
	switch l.Kind {
	case LinkSelf:
		return "X"
	case LinkSYS:
		return "SYS"
	case LinkNODE:
		return "NODE"
	case LinkPHB:
		return "PHB"
	case LinkPXB:
		return "PXB"
	case LinkPIX:
		return "PIX"
	case LinkNV:
		return "NV" + strconv.Itoa(int(l.NVLinks))
	}
	return "?"
}

// MarshalText writes the canonical token, so links read as "NV12" in JSON.
func (l Link) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText reads a token with ParseLink.
func (l *Link) UnmarshalText(b []byte) error {
	v, err := ParseLink(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// ParseLink reads one matrix token: X, NV<n>, PIX, PXB, PHB, NODE, SYS, or
// SOC (old drivers' name for SYS).
func ParseLink(tok string) (Link, error) {
	switch tok {
	case "X":
		return Self, nil
	case "SYS", "SOC":
		return SYS, nil
	case "NODE":
		return NODE, nil
	case "PHB":
		return PHB, nil
	case "PXB":
		return PXB, nil
	case "PIX":
		return PIX, nil
	}
	if rest, ok := strings.CutPrefix(tok, "NV"); ok {
		n, err := strconv.Atoi(rest)
		if err == nil && n > 0 && n <= 255 {
			return NV(n), nil
		}
	}
	return Link{}, fmt.Errorf("unknown link %q (want X, NV<n>, PIX, PXB, PHB, NODE, SYS or SOC)", tok)
}

// NUMASet is a sorted list of NUMA node ids a GPU has affinity with; nil
// means unknown (N/A or no column).
type NUMASet []int

// Matrix is what `nvidia-smi topo -m` (or NVML) says about one machine's
// GPUs. GPU indices follow PCI bus order, as CUDA_VISIBLE_DEVICES does with
// CUDA_DEVICE_ORDER=PCI_BUS_ID.
//
// Its JSON form (in facts documents) names fields in snake_case, as every
// other document gpulayer writes does.
type Matrix struct {
	// Links[i][j] is the link from GPU i to GPU j; Self on the diagonal.
	Links [][]Link `json:"links"`
	// NICs are the NIC names: "mlx5_0", from the header or the NIC Legend.
	NICs []string `json:"nics"`
	// NICLinks[i][n] is the link from GPU i to NIC n.
	NICLinks [][]Link `json:"nic_links"`
	// CPUAffinity per GPU as printed ("0-31,64-95"); "" when unknown.
	CPUAffinity []string `json:"cpu_affinity"`
	// NUMAAffinity per GPU; nil when unknown.
	NUMAAffinity []NUMASet `json:"numa_affinity"`
	// GPUNUMAID per GPU (Grace Hopper and similar); -1 when unknown.
	GPUNUMAID []int `json:"gpu_numa_id"`
}

// GPUs is the number of GPUs in the matrix.
func (m *Matrix) GPUs() int {
	if m == nil {
		return 0
	}
	return len(m.Links)
}

// DeviceSet is a set of GPU indices of one machine, as a bit mask (bit i is
// GPU i). Machines have at most MaxGPUs GPUs.
type DeviceSet uint64

// MaxGPUs is the most GPUs of one machine gpulayer works with: a DeviceSet
// holds 64. Every reader of a machine's topology (ParseSMI, the NVML
// adapter) and PrepareMatrix refuse more, in CheckGPUCount's words, so that
// no view covers only part of a machine.
const MaxGPUs = 64

// CheckGPUCount refuses a machine of more than MaxGPUs GPUs: "65 GPUs: at
// most 64 GPUs per machine are supported".
func CheckGPUCount(n int) error {
	if n > MaxGPUs {
		return fmt.Errorf("%d GPUs: at most %d GPUs per machine are supported", n, MaxGPUs)
	}
	return nil
}

// DeviceSetOf returns the set holding the given indices.
func DeviceSetOf(indices ...int) DeviceSet {
	var s DeviceSet
	for _, i := range indices {
		s |= 1 << uint(i)
	}
	return s
}

// AllDevices returns the set {0, ..., n-1}.
func AllDevices(n int) DeviceSet {
	if n >= MaxGPUs {
		return ^DeviceSet(0)
	}
	return DeviceSet(1)<<uint(n) - 1
}

// Has reports whether i is in the set.
func (s DeviceSet) Has(i int) bool { return i >= 0 && i < MaxGPUs && s&(1<<uint(i)) != 0 }

// Len is the number of GPUs in the set.
func (s DeviceSet) Len() int { return bits.OnesCount64(uint64(s)) }

// Indices lists the set's GPUs in increasing order.
func (s DeviceSet) Indices() []int {
	out := make([]int, 0, s.Len())
	for i := 0; s != 0; i++ {
		if s&1 != 0 {
			out = append(out, i)
		}
		s >>= 1
	}
	return out
}

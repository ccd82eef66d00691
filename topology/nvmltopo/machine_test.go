//go:build linux && cgo && nvml

package nvmltopo

import (
	"fmt"
	"math/bits"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// fakeMachine is what NVML answers on one machine, in NVML's own terms (bus
// ids, common-ancestor levels, link states, bitmasks), so tests check the
// translation into nvidia-smi's matrix rather than restate it.
type fakeMachine struct {
	gpus []fakeGPU // in NVML index order
	// level[i][j] is what GetTopologyCommonAncestor says for NVML devices i
	// and j.
	level [][]nvml.GpuTopologyLevel
	// missing names the library symbols this driver lacks; calling one would
	// kill a real process, so the fake fails the test instead.
	missing map[string]bool
	// remoteTypeNotSupported: GetNvLinkRemoteDeviceType exists but answers
	// NOT_SUPPORTED.
	remoteTypeNotSupported bool
}

type fakeGPU struct {
	busID string
	// nvlinks by link number; links past the end answer INVALID_ARGUMENT.
	nvlinks []fakeNVLink
	// nvlinkNotSupported: every NVLink query answers NOT_SUPPORTED.
	nvlinkNotSupported bool
	cpuMask            []uint // the NUMA node's CPUs
	memMask            []uint // NUMA nodes; nil answers NOT_SUPPORTED
	numaID             int    // GPU NUMA ID; -1 answers NOT_SUPPORTED
}

type fakeNVLink struct {
	active       bool
	remoteBusID  string
	remoteType   nvml.IntNvLinkDeviceType
	remotePCIDev uint32 // device<<16 | vendor
}

const (
	nvswitchA100PCIID = 0x1af110de // NVSwitch (A100 generation)
	nvswitchV100PCIID = 0x1ac210de // NVSwitch (V100 generation)
	ibmNPUPCIID       = 0x04ea1014 // IBM POWER9 NVLink (NPU)
)

// busIDs returns "00000000:XX:00.0" for each bus number.
func busIDs(buses ...int) []string {
	ids := make([]string, len(buses))
	for i, b := range buses {
		ids[i] = fmt.Sprintf("00000000:%02X:00.0", b)
	}
	return ids
}

// switchLinks is a GPU's links all ending at NVSwitches: link l at switch
// l/perSwitch.
func switchLinks(n, perSwitch int, switchBus []string) []fakeNVLink {
	links := make([]fakeNVLink, n)
	for l := range links {
		links[l] = fakeNVLink{active: true, remoteBusID: switchBus[l/perSwitch], remoteType: nvml.NVLINK_DEVICE_TYPE_SWITCH, remotePCIDev: nvswitchA100PCIID}
	}
	return links
}

// gpuLinks is a GPU's links each ending at the GPU with the given bus id.
func gpuLinks(peerBusIDs ...string) []fakeNVLink {
	links := make([]fakeNVLink, len(peerBusIDs))
	for l, p := range peerBusIDs {
		links[l] = fakeNVLink{active: true, remoteBusID: p, remoteType: nvml.NVLINK_DEVICE_TYPE_GPU, remotePCIDev: 0x1db110de}
	}
	return links
}

// levels builds a symmetric level matrix: group[i] is GPU i's PCIe switch,
// node[i] its NUMA node; same switch is MULTIPLE (PXB) or SINGLE (PIX) as
// sameSwitch says, same node NODE, else SYSTEM.
func levels(group, node []int, sameSwitch nvml.GpuTopologyLevel) [][]nvml.GpuTopologyLevel {
	n := len(group)
	lv := make([][]nvml.GpuTopologyLevel, n)
	for i := range lv {
		lv[i] = make([]nvml.GpuTopologyLevel, n)
		for j := range lv[i] {
			switch {
			case i == j:
				lv[i][j] = nvml.TOPOLOGY_INTERNAL
			case group[i] == group[j]:
				lv[i][j] = sameSwitch
			case node[i] == node[j]:
				lv[i][j] = nvml.TOPOLOGY_NODE
			default:
				lv[i][j] = nvml.TOPOLOGY_SYSTEM
			}
		}
	}
	return lv
}

// permuted returns the machine with NVML enumerating its GPUs in another
// order: NVML index k is the GPU that was at order[k].
func (m fakeMachine) permuted(order []int) fakeMachine {
	p := m
	p.gpus = make([]fakeGPU, len(order))
	p.level = make([][]nvml.GpuTopologyLevel, len(order))
	for a, oa := range order {
		p.gpus[a] = m.gpus[oa]
		p.level[a] = make([]nvml.GpuTopologyLevel, len(order))
		for b, ob := range order {
			p.level[a][b] = m.level[oa][ob]
		}
	}
	return p
}

// serve installs the machine's answers on a go-nvml mock server whose
// devices are the machine's GPUs, in NVML index order.
func (m fakeMachine) serve(t *testing.T, srv *server.Server) *server.Server {
	t.Helper()
	if len(srv.Devices) != len(m.gpus) {
		t.Fatalf("mock server has %d devices, machine %d GPUs", len(srv.Devices), len(m.gpus))
	}
	srv.LookupSymbolFunc = func(symbol string) error {
		if m.missing[symbol] {
			return fmt.Errorf("%s: undefined symbol", symbol)
		}
		return nil
	}
	// missingCall fails the test for a call a real process would die of.
	missingCall := func(symbol string) {
		if m.missing[symbol] {
			t.Errorf("%s called although the driver's library lacks it", symbol)
		}
	}
	for i, d := range srv.Devices {
		dev := d.(*server.Device)
		g := m.gpus[i]
		dev.PciBusID = g.busID
		dev.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			return pciInfo(g.busID, dev.Config.PciDeviceId), nvml.SUCCESS
		}
		dev.GetTopologyCommonAncestorFunc = func(other nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
			o, ok := other.(*server.Device)
			if !ok || o.Index < 0 || o.Index >= len(m.gpus) {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return m.level[dev.Index][o.Index], nvml.SUCCESS
		}
		link := func(l int) (fakeNVLink, nvml.Return) {
			switch {
			case g.nvlinkNotSupported:
				return fakeNVLink{}, nvml.ERROR_NOT_SUPPORTED
			case l < 0 || l >= len(g.nvlinks):
				return fakeNVLink{}, nvml.ERROR_INVALID_ARGUMENT
			}
			return g.nvlinks[l], nvml.SUCCESS
		}
		dev.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
			nl, ret := link(l)
			if ret != nvml.SUCCESS {
				return 0, ret
			}
			if nl.active {
				return nvml.FEATURE_ENABLED, nvml.SUCCESS
			}
			return nvml.FEATURE_DISABLED, nvml.SUCCESS
		}
		dev.GetNvLinkRemotePciInfoFunc = func(l int) (nvml.PciInfo, nvml.Return) {
			nl, ret := link(l)
			if ret != nvml.SUCCESS {
				return nvml.PciInfo{}, ret
			}
			return pciInfo(nl.remoteBusID, nl.remotePCIDev), nvml.SUCCESS
		}
		dev.GetNvLinkRemoteDeviceTypeFunc = func(l int) (nvml.IntNvLinkDeviceType, nvml.Return) {
			missingCall("nvmlDeviceGetNvLinkRemoteDeviceType")
			nl, ret := link(l)
			if ret != nvml.SUCCESS {
				return 0, ret
			}
			if m.remoteTypeNotSupported {
				return 0, nvml.ERROR_NOT_SUPPORTED
			}
			return nl.remoteType, nvml.SUCCESS
		}
		dev.GetCpuAffinityFunc = func(numCPUs int) ([]uint, nvml.Return) {
			return mask(g.cpuMask, numCPUs), nvml.SUCCESS
		}
		dev.GetCpuAffinityWithinScopeFunc = func(numCPUs int, scope nvml.AffinityScope) ([]uint, nvml.Return) {
			missingCall("nvmlDeviceGetCpuAffinityWithinScope")
			if scope != nvml.AFFINITY_SCOPE_NODE {
				t.Errorf("CPU affinity asked in scope %d, want NODE", scope)
			}
			return mask(g.cpuMask, numCPUs), nvml.SUCCESS
		}
		dev.GetMemoryAffinityFunc = func(numNodes int, scope nvml.AffinityScope) ([]uint, nvml.Return) {
			missingCall("nvmlDeviceGetMemoryAffinity")
			if scope != nvml.AFFINITY_SCOPE_NODE {
				t.Errorf("memory affinity asked in scope %d, want NODE", scope)
			}
			if g.memMask == nil {
				return nil, nvml.ERROR_NOT_SUPPORTED
			}
			return mask(g.memMask, numNodes), nvml.SUCCESS
		}
		dev.GetNumaNodeIdFunc = func() (int, nvml.Return) {
			missingCall("nvmlDeviceGetNumaNodeId")
			if g.numaID < 0 {
				return 0, nvml.ERROR_NOT_SUPPORTED
			}
			return g.numaID, nvml.SUCCESS
		}
	}
	return srv
}

// mask pads words to the array size the real library fills for n ids.
func mask(words []uint, n int) []uint {
	out := make([]uint, (n+bits.UintSize-1)/bits.UintSize)
	copy(out, words)
	return out
}

func pciInfo(busID string, pciDeviceID uint32) nvml.PciInfo {
	var p nvml.PciInfo
	for i := 0; i < len(busID) && i < len(p.BusId)-1; i++ {
		p.BusId[i] = int8(busID[i])
	}
	p.PciDeviceId = pciDeviceID
	return p
}

// newServer is a mock server with n GPUs of one model.
func newServer(t *testing.T, n int, model gpus.Config) *server.Server {
	t.Helper()
	srv, err := server.New(server.WithGPUs(gpus.Multiple(n, model)...), server.WithDriverVersion("550.54.15"))
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// GPU models the mock package does not define.
var (
	rtx6000Ada = gpus.Config{
		Name:         "NVIDIA RTX 6000 Ada Generation",
		Architecture: nvml.DEVICE_ARCH_ADA,
		Brand:        nvml.BRAND_NVIDIA_RTX,
		MemoryMB:     49140,
		CudaMajor:    8,
		CudaMinor:    9,
		PciDeviceId:  0x26b110de,
	}
	v100SXM2 = gpus.Config{
		Name:         "Tesla V100-SXM2-16GB",
		Architecture: nvml.DEVICE_ARCH_VOLTA,
		Brand:        nvml.BRAND_TESLA,
		MemoryMB:     16160,
		CudaMajor:    7,
		CudaMinor:    0,
		PciDeviceId:  0x1db110de,
	}
	v100SXM3 = gpus.Config{
		Name:         "Tesla V100-SXM3-32GB",
		Architecture: nvml.DEVICE_ARCH_VOLTA,
		Brand:        nvml.BRAND_TESLA,
		MemoryMB:     32510,
		CudaMajor:    7,
		CudaMinor:    0,
		PciDeviceId:  0x1db810de,
	}
)

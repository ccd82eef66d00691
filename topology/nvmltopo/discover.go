//go:build linux && cgo && nvml

package nvmltopo

import (
	"errors"
	"fmt"
	"sort"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpulayer/gpulayer/topology"
)

// Local reads this machine's GPUs through the driver's libnvidia-ml.so.1. It
// returns ErrUnavailable, with the reason, when the library is missing or
// NVML does not initialise.
func Local() (*topology.Matrix, error) {
	return Load(nvml.New())
}

// Load initialises NVML through lib, reads the matrix with Discover and shuts
// NVML down again. When Init fails it returns ErrUnavailable and makes no
// other call on lib: go-nvml's functions then point into a library that is
// not loaded, and calling one kills the process.
func Load(lib nvml.Interface) (*topology.Matrix, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			return nil, fmt.Errorf("%w: nvml init: %s (libnvidia-ml.so.1 could not be loaded: no NVIDIA driver here?)", ErrUnavailable, ret.Error())
		}
		return nil, fmt.Errorf("%w: nvml init: %s", ErrUnavailable, ret.Error())
	}
	// A failed Shutdown leaves nothing for the caller to do; the matrix
	// already read is still right.
	defer lib.Shutdown()
	return Discover(lib)
}

// Discover builds the matrix `nvidia-smi topo -m` would print, from an
// initialised lib. GPUs are ordered by PCI bus id. A pair joined by NVLink
// reads NV<n>, else its PCIe level from the common ancestor in the PCIe tree.
// NVLinks that end at an NVSwitch join the GPU to every other GPU that has
// NVSwitch links, with the smaller of the two GPUs' switch link counts.
// NUMA affinity comes from the GPU's memory affinity, CPU affinity from its
// NUMA node's CPUs, the GPU NUMA ID from the NUMA node id of GPUs that are
// NUMA nodes themselves (Grace Hopper). NICs are not visible through NVML and
// stay empty.
func Discover(lib nvml.Interface) (*topology.Matrix, error) {
	gpus, err := listGPUs(lib)
	if err != nil {
		return nil, err
	}
	n := len(gpus)
	if err := topology.CheckGPUCount(n); err != nil {
		return nil, fmt.Errorf("nvml: %w", err)
	}
	has := driverFeaturesOf(lib)

	ends := make([]nvlinkEnds, n)
	for i := range gpus {
		if ends[i], err = readNVLinks(gpus, i, has); err != nil {
			return nil, err
		}
	}

	m := &topology.Matrix{
		Links:        make([][]topology.Link, n),
		CPUAffinity:  make([]string, n),
		NUMAAffinity: make([]topology.NUMASet, n),
		GPUNUMAID:    make([]int, n),
	}
	for i := range m.Links {
		m.Links[i] = make([]topology.Link, n)
		m.Links[i][i] = topology.Self
	}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			l, err := pairLink(gpus, ends, i, j)
			if err != nil {
				return nil, err
			}
			m.Links[i][j], m.Links[j][i] = l, l
		}
	}
	for i, g := range gpus {
		if m.CPUAffinity[i], err = cpuAffinity(g, has); err != nil {
			return nil, err
		}
		if m.NUMAAffinity[i], err = numaAffinity(g, has); err != nil {
			return nil, err
		}
		if m.GPUNUMAID[i], err = gpuNUMAID(g, has); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// gpu is one NVML device and where it sits on the PCI bus.
type gpu struct {
	dev   nvml.Device
	index int // NVML's index, the tie-break when two addresses are equal
	addr  pciAddress
}

func (g gpu) String() string { return "GPU " + g.addr.String() }

// listGPUs returns NVML's devices sorted by PCI address, the order CUDA uses
// with CUDA_DEVICE_ORDER=PCI_BUS_ID and nvidia-smi prints.
func listGPUs(lib nvml.Interface) ([]gpu, error) {
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml: device count: %s", ret.Error())
	}
	gpus := make([]gpu, 0, count)
	for i := 0; i < count; i++ {
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml: device %d: handle: %s", i, ret.Error())
		}
		info, ret := dev.GetPciInfo()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml: device %d: PCI info: %s", i, ret.Error())
		}
		addr, err := pciInfoAddress(info)
		if err != nil {
			return nil, fmt.Errorf("nvml: device %d: %w", i, err)
		}
		gpus = append(gpus, gpu{dev: dev, index: i, addr: addr})
	}
	sort.SliceStable(gpus, func(a, b int) bool { return gpus[a].addr.less(gpus[b].addr) })
	for i := 1; i < len(gpus); i++ {
		if gpus[i].addr == gpus[i-1].addr {
			return nil, fmt.Errorf("nvml: devices %d and %d both report PCI address %s", gpus[i-1].index, gpus[i].index, gpus[i].addr)
		}
	}
	return gpus, nil
}

// pciInfoAddress reads the bus id string NVML fills in; drivers that leave it
// empty still give the domain, bus and device numbers.
func pciInfoAddress(info nvml.PciInfo) (pciAddress, error) {
	if s := cString(info.BusId[:]); s != "" {
		return parsePCIAddress(s)
	}
	if s := cString(info.BusIdLegacy[:]); s != "" {
		return parsePCIAddress(s)
	}
	if info.Domain == 0 && info.Bus == 0 && info.Device == 0 {
		return pciAddress{}, errors.New("no PCI bus id")
	}
	if info.Bus > 0xff || info.Device > 0x1f {
		return pciAddress{}, fmt.Errorf("PCI bus %#x device %#x out of range", info.Bus, info.Device)
	}
	return pciAddress{domain: info.Domain, bus: uint8(info.Bus), device: uint8(info.Device)}, nil
}

// driverFeatures says which of the newer NVML functions this driver's library
// has. Calling a function the library lacks kills the process (go-nvml binds
// symbols lazily), so each is looked up before use.
type driverFeatures struct {
	remoteDeviceType       bool // nvmlDeviceGetNvLinkRemoteDeviceType
	cpuAffinityWithinScope bool // nvmlDeviceGetCpuAffinityWithinScope
	memoryAffinity         bool // nvmlDeviceGetMemoryAffinity
	numaNodeID             bool // nvmlDeviceGetNumaNodeId
}

func driverFeaturesOf(lib nvml.Interface) driverFeatures {
	ext := lib.Extensions()
	has := func(symbol string) bool { return ext != nil && ext.LookupSymbol(symbol) == nil }
	return driverFeatures{
		remoteDeviceType:       has("nvmlDeviceGetNvLinkRemoteDeviceType"),
		cpuAffinityWithinScope: has("nvmlDeviceGetCpuAffinityWithinScope"),
		memoryAffinity:         has("nvmlDeviceGetMemoryAffinity"),
		numaNodeID:             has("nvmlDeviceGetNumaNodeId"),
	}
}

// notThere reports whether ret says the feature or the link does not exist,
// as opposed to a failure.
func notThere(ret nvml.Return) bool {
	return ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND
}

// nvlinkEnds counts one GPU's active NVLinks by where they end.
type nvlinkEnds struct {
	toGPU    []int // toGPU[j]: links straight to GPU j
	toSwitch int   // links to an NVSwitch
}

// readNVLinks walks GPU i's NVLinks. A link that does not exist or an
// NVLink query the GPU does not support counts as no link, so GPUs without
// NVLink fall back to their PCIe levels.
func readNVLinks(gpus []gpu, i int, has driverFeatures) (nvlinkEnds, error) {
	g := gpus[i]
	ends := nvlinkEnds{toGPU: make([]int, len(gpus))}
	for link := 0; link < nvml.NVLINK_MAX_LINKS; link++ {
		state, ret := g.dev.GetNvLinkState(link)
		if notThere(ret) || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue // INVALID_ARGUMENT: past this GPU's last link
		}
		if ret != nvml.SUCCESS {
			return ends, fmt.Errorf("nvml: %s: NVLink %d state: %s", g, link, ret.Error())
		}
		if state != nvml.FEATURE_ENABLED {
			continue
		}
		remote, ret := g.dev.GetNvLinkRemotePciInfo(link)
		if notThere(ret) {
			continue
		}
		if ret != nvml.SUCCESS {
			return ends, fmt.Errorf("nvml: %s: NVLink %d remote PCI info: %s", g, link, ret.Error())
		}
		kind := nvml.NVLINK_DEVICE_TYPE_UNKNOWN
		if has.remoteDeviceType {
			t, ret := g.dev.GetNvLinkRemoteDeviceType(link)
			switch {
			case ret == nvml.SUCCESS:
				kind = t
			case !notThere(ret):
				return ends, fmt.Errorf("nvml: %s: NVLink %d remote device type: %s", g, link, ret.Error())
			}
		}
		peer := -1
		if addr, err := pciInfoAddress(remote); err == nil {
			peer = gpuAt(gpus, addr)
		}
		switch {
		case kind == nvml.NVLINK_DEVICE_TYPE_SWITCH:
			ends.toSwitch++
		case kind == nvml.NVLINK_DEVICE_TYPE_IBMNPU:
			// A link to a POWER9 CPU, not to another GPU.
		case peer == i:
			// A link back to itself says nothing about pairs.
		case peer >= 0:
			ends.toGPU[peer]++
		case kind == nvml.NVLINK_DEVICE_TYPE_GPU:
			// A GPU this NVML does not list (hidden from this container).
		case isNVIDIAOrUnknown(remote.PciDeviceId):
			// Older drivers do not say what the far end is; an NVIDIA
			// device that is not one of the GPUs is an NVSwitch.
			ends.toSwitch++
		}
	}
	return ends, nil
}

// isNVIDIAOrUnknown reports whether a PCI device id (device<<16 | vendor)
// names NVIDIA (0x10de) or no vendor at all.
func isNVIDIAOrUnknown(pciDeviceID uint32) bool {
	vendor := pciDeviceID & 0xffff
	return vendor == 0x10de || vendor == 0
}

// gpuAt returns the position of the GPU at addr, or -1.
func gpuAt(gpus []gpu, addr pciAddress) int {
	for i, g := range gpus {
		if g.addr == addr {
			return i
		}
	}
	return -1
}

// pairLink is the matrix cell for GPUs i and j: NV<n> when NVLinks join them,
// else their PCIe level.
func pairLink(gpus []gpu, ends []nvlinkEnds, i, j int) (topology.Link, error) {
	// Both GPUs report the same direct links; the larger count keeps them
	// when one GPU's NVLink query is not supported.
	links := max(ends[i].toGPU[j], ends[j].toGPU[i])
	if ends[i].toSwitch > 0 && ends[j].toSwitch > 0 {
		links += min(ends[i].toSwitch, ends[j].toSwitch)
	}
	if links > 0 {
		return topology.NV(min(links, 255)), nil
	}
	level, ret := gpus[i].dev.GetTopologyCommonAncestor(gpus[j].dev)
	if ret != nvml.SUCCESS {
		return topology.Link{}, fmt.Errorf("nvml: %s and %s: PCIe common ancestor: %s", gpus[i], gpus[j], ret.Error())
	}
	l, ok := pcieLink(level)
	if !ok {
		return topology.Link{}, fmt.Errorf("nvml: %s and %s: unknown PCIe topology level %d", gpus[i], gpus[j], level)
	}
	return l, nil
}

// pcieLink maps NVML's common-ancestor level to nvidia-smi's token.
// TOPOLOGY_INTERNAL is two GPUs on one board (Tesla K80): at most the board's
// own bridge lies between them, so it reads PIX.
func pcieLink(level nvml.GpuTopologyLevel) (topology.Link, bool) {
	switch level {
	case nvml.TOPOLOGY_INTERNAL, nvml.TOPOLOGY_SINGLE:
		return topology.PIX, true
	case nvml.TOPOLOGY_MULTIPLE:
		return topology.PXB, true
	case nvml.TOPOLOGY_HOSTBRIDGE:
		return topology.PHB, true
	case nvml.TOPOLOGY_NODE:
		return topology.NODE, true
	case nvml.TOPOLOGY_SYSTEM:
		return topology.SYS, true
	}
	return topology.Link{}, false
}

// Sizes of the sets asked for. go-nvml turns them into arrays of words
// generously; machines have far fewer CPUs and NUMA nodes.
const (
	maxCPUs      = 4096
	maxNUMANodes = 1024
)

// cpuAffinity is the GPU's NUMA node's CPUs as nvidia-smi prints them
// ("0-31,64-95"), or "" when the driver does not say.
func cpuAffinity(g gpu, has driverFeatures) (string, error) {
	if has.cpuAffinityWithinScope {
		mask, ret := g.dev.GetCpuAffinityWithinScope(maxCPUs, nvml.AFFINITY_SCOPE_NODE)
		if ret == nvml.SUCCESS {
			return topology.FormatList(maskIDs(mask)), nil
		}
		if !notThere(ret) {
			return "", fmt.Errorf("nvml: %s: CPU affinity: %s", g, ret.Error())
		}
	}
	mask, ret := g.dev.GetCpuAffinity(maxCPUs)
	if notThere(ret) {
		return "", nil
	}
	if ret != nvml.SUCCESS {
		return "", fmt.Errorf("nvml: %s: CPU affinity: %s", g, ret.Error())
	}
	return topology.FormatList(maskIDs(mask)), nil
}

// numaAffinity is the NUMA nodes whose memory is closest to the GPU, nil when
// unknown (nvidia-smi's N/A).
func numaAffinity(g gpu, has driverFeatures) (topology.NUMASet, error) {
	if !has.memoryAffinity {
		return nil, nil
	}
	mask, ret := g.dev.GetMemoryAffinity(maxNUMANodes, nvml.AFFINITY_SCOPE_NODE)
	if notThere(ret) {
		return nil, nil
	}
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml: %s: NUMA affinity: %s", g, ret.Error())
	}
	ids := maskIDs(mask)
	if len(ids) == 0 {
		return nil, nil
	}
	return topology.NUMASet(ids), nil
}

// gpuNUMAID is the NUMA node of the GPU's own memory on machines where GPUs
// are NUMA nodes (Grace Hopper), else -1.
func gpuNUMAID(g gpu, has driverFeatures) (int, error) {
	if !has.numaNodeID {
		return -1, nil
	}
	id, ret := g.dev.GetNumaNodeId()
	if notThere(ret) {
		return -1, nil
	}
	if ret != nvml.SUCCESS {
		return -1, fmt.Errorf("nvml: %s: GPU NUMA ID: %s", g, ret.Error())
	}
	return id, nil
}

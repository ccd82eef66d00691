//go:build linux && cgo && nvml

package nvmltopo

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpulayer/gpulayer/topology"
)

// dgxA100 is the machine of testdata/topo/dgx-a100-8x-nv12-8nic-mlx5.txt as
// NVML sees it: 8 A100s in PCIe pairs under 4 switches, 2 sockets, each GPU
// with 12 NVLinks, two to each of 6 NVSwitches.
func dgxA100() fakeMachine {
	bus := busIDs(0x07, 0x0f, 0x47, 0x4e, 0x87, 0x90, 0xb7, 0xbd)
	switches := busIDs(0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9)
	m := fakeMachine{level: levels([]int{0, 0, 1, 1, 2, 2, 3, 3}, []int{0, 0, 0, 0, 1, 1, 1, 1}, nvml.TOPOLOGY_MULTIPLE)}
	for i, b := range bus {
		g := fakeGPU{busID: b, nvlinks: switchLinks(12, 2, switches), numaID: -1}
		if i < 4 {
			g.cpuMask, g.memMask = []uint{0x00000000ffffffff, 0x00000000ffffffff}, []uint{1 << 0} // CPUs 0-31,64-95; node 0
		} else {
			g.cpuMask, g.memMask = []uint{0xffffffff00000000, 0xffffffff00000000}, []uint{1 << 1} // CPUs 32-63,96-127; node 1
		}
		m.gpus = append(m.gpus, g)
	}
	return m
}

// rtx6000AdaBox is testdata/topo/4x-rtx6000ada-pcie-2socket-node-sys-4nic.txt:
// two GPUs per socket on separate host bridges, no NVLink.
func rtx6000AdaBox() fakeMachine {
	bus := busIDs(0x01, 0x21, 0x81, 0xa1)
	m := fakeMachine{level: levels([]int{0, 1, 2, 3}, []int{0, 0, 1, 1}, nvml.TOPOLOGY_MULTIPLE)}
	for i, b := range bus {
		g := fakeGPU{busID: b, nvlinkNotSupported: true, numaID: -1}
		if i < 2 {
			g.cpuMask, g.memMask = []uint{0x00000000ffffffff}, []uint{1 << 0} // 0-31; node 0
		} else {
			g.cpuMask, g.memMask = []uint{0xffffffff00000000}, []uint{1 << 1} // 32-63; node 1
		}
		m.gpus = append(m.gpus, g)
	}
	return m
}

// dgx1V100 is testdata/topo/dgx1-v100-8x-nv1-nv2-mlx5-driver440.txt: the
// hybrid cube mesh of direct GPU-to-GPU NVLinks, under driver 440, whose
// library lacks the remote device type, scoped CPU affinity, memory affinity
// and NUMA node id functions.
func dgx1V100() fakeMachine {
	bus := busIDs(0x06, 0x07, 0x0a, 0x0b, 0x85, 0x86, 0x89, 0x8a)
	// peers[i] lists, link by link, the GPU each of GPU i's 6 NVLinks reaches.
	peers := [][]int{
		{1, 2, 3, 3, 4, 4},
		{0, 2, 2, 3, 5, 5},
		{0, 1, 1, 3, 3, 6},
		{0, 0, 1, 2, 2, 7},
		{0, 0, 5, 6, 7, 7},
		{1, 1, 4, 6, 6, 7},
		{2, 4, 5, 5, 7, 7},
		{3, 4, 4, 5, 6, 6},
	}
	m := fakeMachine{
		level: levels([]int{0, 0, 1, 1, 2, 2, 3, 3}, []int{0, 0, 0, 0, 1, 1, 1, 1}, nvml.TOPOLOGY_SINGLE),
		missing: map[string]bool{
			"nvmlDeviceGetNvLinkRemoteDeviceType": true,
			"nvmlDeviceGetCpuAffinityWithinScope": true,
			"nvmlDeviceGetMemoryAffinity":         true,
			"nvmlDeviceGetNumaNodeId":             true,
		},
	}
	for i, b := range bus {
		var peerBus []string
		for _, p := range peers[i] {
			peerBus = append(peerBus, bus[p])
		}
		g := fakeGPU{busID: b, nvlinks: gpuLinks(peerBus...), numaID: -1}
		if i < 4 {
			g.cpuMask = []uint{0xfff<<24 | 0xfff} // 0-11,24-35
		} else {
			g.cpuMask = []uint{0xfff<<36 | 0xfff<<12} // 12-23,36-47
		}
		m.gpus = append(m.gpus, g)
	}
	return m
}

// nvswitch16 is a DGX-2-style machine: 16 V100s on two baseboards, each GPU
// with 6 NVLinks, one to each of its baseboard's 6 NVSwitches; the boards'
// switches are trunked, so every GPU reaches all 15 others.
func nvswitch16() fakeMachine {
	bus := busIDs(0x34, 0x36, 0x39, 0x3b, 0x57, 0x59, 0x5c, 0x5e, 0xb7, 0xb9, 0xbc, 0xbe, 0xe0, 0xe2, 0xe5, 0xe7)
	boardSwitches := [][]string{
		busIDs(0x60, 0x61, 0x62, 0x63, 0x64, 0x65),
		busIDs(0xe8, 0xe9, 0xea, 0xeb, 0xec, 0xed),
	}
	group := make([]int, 16)
	node := make([]int, 16)
	for i := range group {
		group[i], node[i] = i/2, i/8
	}
	m := fakeMachine{level: levels(group, node, nvml.TOPOLOGY_MULTIPLE)}
	for i, b := range bus {
		links := switchLinks(6, 1, boardSwitches[i/8])
		for l := range links {
			links[l].remotePCIDev = nvswitchV100PCIID
		}
		g := fakeGPU{busID: b, nvlinks: links, numaID: -1}
		if i < 8 {
			g.cpuMask, g.memMask = []uint{0xffff<<48 | 0xffffff, 0xff}, []uint{1 << 0} // 0-23,48-71; node 0
		} else {
			g.cpuMask, g.memMask = []uint{0xffffff << 24, 0xffffff << 8}, []uint{1 << 1} // 24-47,72-95; node 1
		}
		m.gpus = append(m.gpus, g)
	}
	return m
}

// discover serves the machine on a mock server and reads it through Load, as
// Local does on a real machine.
func discover(t *testing.T, m fakeMachine, srv *server.Server) (*topology.Matrix, error) {
	t.Helper()
	m.serve(t, srv)
	mat, err := Load(srv)
	if n := len(srv.InitCalls()); n != 1 {
		t.Errorf("Init called %d times, want 1", n)
	}
	if n := len(srv.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times, want 1", n)
	}
	return mat, err
}

func TestDiscoverReproducesRecordedMachines(t *testing.T) {
	oldDriver := func(m fakeMachine) fakeMachine {
		m.missing = map[string]bool{"nvmlDeviceGetNvLinkRemoteDeviceType": true}
		return m
	}
	typeNotSupported := func(m fakeMachine) fakeMachine {
		m.remoteTypeNotSupported = true
		return m
	}
	reversed := func(m fakeMachine) fakeMachine {
		order := make([]int, len(m.gpus))
		for i := range order {
			order[i] = len(order) - 1 - i
		}
		return m.permuted(order)
	}
	tests := []struct {
		name    string
		machine fakeMachine
		server  func(t *testing.T) *server.Server
		file    string
	}{
		{"DGX A100 NVSwitch", dgxA100(), dgxServer, "dgx-a100-8x-nv12-8nic-mlx5.txt"},
		{"DGX A100 NVSwitch, driver without remote device type", oldDriver(dgxA100()), dgxServer, "dgx-a100-8x-nv12-8nic-mlx5.txt"},
		{"DGX A100 NVSwitch, remote device type not supported", typeNotSupported(dgxA100()), dgxServer, "dgx-a100-8x-nv12-8nic-mlx5.txt"},
		{"DGX A100 NVSwitch, NVML index order scrambled", dgxA100().permuted([]int{5, 2, 7, 0, 3, 6, 1, 4}), dgxServer, "dgx-a100-8x-nv12-8nic-mlx5.txt"},
		{"two-socket PCIe box", rtx6000AdaBox(), func(t *testing.T) *server.Server { return newServer(t, 4, rtx6000Ada) }, "4x-rtx6000ada-pcie-2socket-node-sys-4nic.txt"},
		{"two-socket PCIe box, NVML index order reversed", reversed(rtx6000AdaBox()), func(t *testing.T) *server.Server { return newServer(t, 4, rtx6000Ada) }, "4x-rtx6000ada-pcie-2socket-node-sys-4nic.txt"},
		{"DGX-1 V100 direct NVLinks, driver 440", dgx1V100(), func(t *testing.T) *server.Server { return newServer(t, 8, v100SXM2) }, "dgx1-v100-8x-nv1-nv2-mlx5-driver440.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := discover(t, tt.machine, tt.server(t))
			if err != nil {
				t.Fatal(err)
			}
			assertSameMatrix(t, got, recorded(t, tt.file))
		})
	}
}

func dgxServer(t *testing.T) *server.Server { return dgxa100.New() }

func TestDiscoverNVLinkNotSupportedFallsBackToPCIeLevels(t *testing.T) {
	m := dgxA100()
	m.gpus[3].nvlinkNotSupported = true
	got, err := discover(t, m, dgxa100.New())
	if err != nil {
		t.Fatal(err)
	}
	want := recorded(t, "dgx-a100-8x-nv12-8nic-mlx5.txt")
	// GPU 3 keeps only PCIe: its switch partner GPU 2 is PXB, the rest of
	// its socket NODE, the other socket SYS.
	for j, l := range []topology.Link{topology.NODE, topology.NODE, topology.PXB, topology.Self, topology.SYS, topology.SYS, topology.SYS, topology.SYS} {
		want.Links[3][j], want.Links[j][3] = l, l
	}
	assertSameMatrix(t, got, want)
}

func TestDiscoverNVSwitchPairReadsTheSmallerSwitchLinkCount(t *testing.T) {
	m := dgxA100()
	m.gpus[5].nvlinks[0].active = false
	m.gpus[5].nvlinks[7].active = false
	got, err := discover(t, m, dgxa100.New())
	if err != nil {
		t.Fatal(err)
	}
	want := recorded(t, "dgx-a100-8x-nv12-8nic-mlx5.txt")
	for j := range want.Links {
		if j != 5 {
			want.Links[5][j], want.Links[j][5] = topology.NV(10), topology.NV(10)
		}
	}
	assertSameMatrix(t, got, want)
}

func TestDiscoverSixteenGPUNVSwitch(t *testing.T) {
	oldDriver := nvswitch16()
	oldDriver.missing = map[string]bool{"nvmlDeviceGetNvLinkRemoteDeviceType": true}
	for name, m := range map[string]fakeMachine{"remote type reported": nvswitch16(), "driver without remote device type": oldDriver} {
		t.Run(name, func(t *testing.T) {
			got, err := discover(t, m, newServer(t, 16, v100SXM3))
			if err != nil {
				t.Fatal(err)
			}
			want := &topology.Matrix{Links: make([][]topology.Link, 16)}
			for i := range want.Links {
				want.Links[i] = make([]topology.Link, 16)
				for j := range want.Links[i] {
					want.Links[i][j] = topology.NV(6)
				}
				want.Links[i][i] = topology.Self
				if i < 8 {
					want.CPUAffinity = append(want.CPUAffinity, "0-23,48-71")
					want.NUMAAffinity = append(want.NUMAAffinity, topology.NUMASet{0})
				} else {
					want.CPUAffinity = append(want.CPUAffinity, "24-47,72-95")
					want.NUMAAffinity = append(want.NUMAAffinity, topology.NUMASet{1})
				}
			}
			assertSameMatrix(t, got, want)
		})
	}
}

// power9Pair is two V100s joined by 3 NVLinks, each also with 3 NVLinks to
// the POWER9 CPU's NPU (IBM AC922-style).
func power9Pair() fakeMachine {
	bus := busIDs(0x04, 0x05)
	npu := "00000000:00:01.0"
	m := fakeMachine{level: levels([]int{0, 1}, []int{0, 0}, nvml.TOPOLOGY_MULTIPLE)}
	for i, b := range bus {
		links := gpuLinks(bus[1-i], bus[1-i], bus[1-i])
		for k := 0; k < 3; k++ {
			links = append(links, fakeNVLink{active: true, remoteBusID: npu, remoteType: nvml.NVLINK_DEVICE_TYPE_IBMNPU, remotePCIDev: ibmNPUPCIID})
		}
		m.gpus = append(m.gpus, fakeGPU{busID: b, nvlinks: links, cpuMask: []uint{0xffff}, memMask: []uint{1}, numaID: -1})
	}
	return m
}

func TestDiscoverLinksToTheCPUAreNotNVSwitchLinks(t *testing.T) {
	typeUnknown := power9Pair()
	typeUnknown.missing = map[string]bool{"nvmlDeviceGetNvLinkRemoteDeviceType": true}
	for name, m := range map[string]fakeMachine{"remote type reported": power9Pair(), "driver without remote device type": typeUnknown} {
		t.Run(name, func(t *testing.T) {
			got, err := discover(t, m, newServer(t, 2, v100SXM2))
			if err != nil {
				t.Fatal(err)
			}
			want := &topology.Matrix{
				Links:        linkRows("X NV3", "NV3 X"),
				CPUAffinity:  []string{"0-15", "0-15"},
				NUMAAffinity: []topology.NUMASet{{0}, {0}},
			}
			assertSameMatrix(t, got, want)
		})
	}
}

func TestDiscoverReadsGPUNUMAIDOnGraceHopper(t *testing.T) {
	m := rtx6000AdaBox()
	for i := range m.gpus {
		m.gpus[i].numaID = 4 + 8*i
	}
	got, err := discover(t, m, newServer(t, 4, rtx6000Ada))
	if err != nil {
		t.Fatal(err)
	}
	want := recorded(t, "4x-rtx6000ada-pcie-2socket-node-sys-4nic.txt")
	want.GPUNUMAID = []int{4, 12, 20, 28}
	assertSameMatrix(t, got, want)
}

func TestDiscoverErrorsNameTheGPU(t *testing.T) {
	pcieBox := func(t *testing.T) (fakeMachine, *server.Server) { return rtx6000AdaBox(), newServer(t, 4, rtx6000Ada) }
	dgx := func(t *testing.T) (fakeMachine, *server.Server) { return dgxA100(), dgxa100.New() }
	device := func(srv *server.Server, i int) *server.Device { return srv.Devices[i].(*server.Device) }
	tests := []struct {
		name    string
		machine func(t *testing.T) (fakeMachine, *server.Server)
		fault   func(srv *server.Server)
		want    []string
	}{
		{
			name:    "NVLink state fails",
			machine: dgx,
			fault: func(srv *server.Server) {
				device(srv, 2).GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
			},
			want: []string{"GPU 00000000:47:00.0", "NVLink 0 state"},
		},
		{
			name:    "NVLink remote PCI info fails",
			machine: dgx,
			fault: func(srv *server.Server) {
				device(srv, 6).GetNvLinkRemotePciInfoFunc = func(int) (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{}, nvml.ERROR_UNKNOWN }
			},
			want: []string{"GPU 00000000:B7:00.0", "NVLink 0 remote PCI info"},
		},
		{
			name:    "PCIe common ancestor fails",
			machine: pcieBox,
			fault: func(srv *server.Server) {
				device(srv, 0).GetTopologyCommonAncestorFunc = func(nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
			},
			want: []string{"GPU 00000000:01:00.0 and GPU 00000000:21:00.0", "PCIe common ancestor"},
		},
		{
			name:    "PCIe level unknown",
			machine: pcieBox,
			fault: func(srv *server.Server) {
				device(srv, 0).GetTopologyCommonAncestorFunc = func(nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) { return 45, nvml.SUCCESS }
			},
			want: []string{"unknown PCIe topology level 45"},
		},
		{
			name:    "CPU affinity fails",
			machine: pcieBox,
			fault: func(srv *server.Server) {
				device(srv, 3).GetCpuAffinityWithinScopeFunc = func(int, nvml.AffinityScope) ([]uint, nvml.Return) { return nil, nvml.ERROR_GPU_IS_LOST }
			},
			want: []string{"GPU 00000000:A1:00.0", "CPU affinity"},
		},
		{
			name:    "two GPUs at one address",
			machine: pcieBox,
			fault: func(srv *server.Server) {
				device(srv, 1).GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) { return pciInfo("0000:01:00.0", 0), nvml.SUCCESS }
			},
			want: []string{"devices 0 and 1 both report PCI address 00000000:01:00.0"},
		},
		{
			name:    "unreadable bus id",
			machine: pcieBox,
			fault: func(srv *server.Server) {
				device(srv, 1).GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) { return pciInfo("garbage", 0), nvml.SUCCESS }
			},
			want: []string{"device 1", `PCI address "garbage"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, srv := tt.machine(t)
			m.serve(t, srv)
			tt.fault(srv)
			mat, err := Load(srv)
			if err == nil {
				t.Fatalf("no error; matrix %+v", mat)
			}
			if errors.Is(err, ErrUnavailable) {
				t.Errorf("%v: a failure after Init is not ErrUnavailable", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if n := len(srv.ShutdownCalls()); n != 1 {
				t.Errorf("Shutdown called %d times after a failed discovery, want 1", n)
			}
		})
	}
}

func TestLoadAfterFailedInitMakesNoOtherCall(t *testing.T) {
	for _, ret := range []nvml.Return{nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_NO_PERMISSION, nvml.ERROR_LIB_RM_VERSION_MISMATCH} {
		t.Run(fmt.Sprint(int32(ret)), func(t *testing.T) {
			// Every method but Init is unset: the mock panics when one is
			// called, which a real process would not survive.
			lib := &mock.Interface{InitFunc: func() nvml.Return { return ret }}
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("NVML called after a failed Init: %v", r)
				}
			}()
			m, err := Load(lib)
			if m != nil {
				t.Errorf("got a matrix %+v after a failed Init", m)
			}
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("error %v, want ErrUnavailable", err)
			}
			if !strings.Contains(err.Error(), ret.Error()) {
				t.Errorf("error %q does not give the reason %q", err, ret.Error())
			}
			if n := len(lib.InitCalls()); n != 1 {
				t.Errorf("Init called %d times, want 1", n)
			}
		})
	}
}

func TestLocalWithoutDriverIsUnavailableNotFatal(t *testing.T) {
	m, err := Local()
	if err != nil {
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Local: %v; want a matrix or ErrUnavailable", err)
		}
		t.Logf("no NVML here: %v", err)
		return
	}
	// A machine with the NVIDIA driver: the matrix must be well formed.
	for i, row := range m.Links {
		if len(row) != m.GPUs() || row[i] != topology.Self {
			t.Fatalf("row %d of %d GPUs: %v", i, m.GPUs(), row)
		}
	}
}

func TestPCIeLevelsMapToNvidiaSmiTokens(t *testing.T) {
	tests := []struct {
		level nvml.GpuTopologyLevel
		want  topology.Link
	}{
		{nvml.TOPOLOGY_INTERNAL, topology.PIX},
		{nvml.TOPOLOGY_SINGLE, topology.PIX},
		{nvml.TOPOLOGY_MULTIPLE, topology.PXB},
		{nvml.TOPOLOGY_HOSTBRIDGE, topology.PHB},
		{nvml.TOPOLOGY_NODE, topology.NODE},
		{nvml.TOPOLOGY_SYSTEM, topology.SYS},
	}
	for _, tt := range tests {
		got, ok := pcieLink(tt.level)
		if !ok || got != tt.want {
			t.Errorf("pcieLink(%d) = %v, %v; want %v", tt.level, got, ok, tt.want)
		}
	}
	if _, ok := pcieLink(nvml.GpuTopologyLevel(15)); ok {
		t.Error("pcieLink(15) accepted an unknown level")
	}
}

func TestDiscoverRefusesMoreGPUsThanTopologyHolds(t *testing.T) {
	n := topology.MaxGPUs + 1
	buses := make([]int, n)
	for i := range buses {
		buses[i] = i + 1
	}
	var m fakeMachine
	for _, b := range busIDs(buses...) {
		m.gpus = append(m.gpus, fakeGPU{busID: b, numaID: -1})
	}
	_, err := discover(t, m, newServer(t, n, rtx6000Ada))
	if want := "nvml: " + topology.CheckGPUCount(n).Error(); err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

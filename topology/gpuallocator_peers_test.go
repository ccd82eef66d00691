package topology

import (
	"fmt"
	"slices"
	"testing"
)

// TestPickDevicesNeverWorseThanGPUAllocatorBestEffort maps the cases of
// NVIDIA/go-gpuallocator's best-effort policy tests
// (gpuallocator/besteffort_test.go and the machines of common_test.go, at
// a4601e7) onto PickDevices: for each, the same links as a Matrix, the
// same free GPUs and the same count, and gpulayer's pick must rank no worse
// than the best-effort one by gpulayer's own order, the slowest link first
// and then the total link score (docs/topology.md). Where the sets differ
// the test logs both.
//
// The links: gpuallocator gives each pair its NVLinks and its PCIe path;
// nvidia-smi topo -m, which a Matrix reads, shows the NVLinks where there
// are any (SingleNVLINKLink is NV1, TwoNVLINKLinks NV2) and the PCIe path
// otherwise (P2PLinkSingleSwitch PIX, P2PLinkMultiSwitch PXB,
// P2PLinkHostBridge PHB, P2PLinkSameCPU NODE, P2PLinkCrossCPU SYS). The
// sockets its P2PLinkCrossCPU links imply are the GPUs' NUMA nodes.
//
// Upstream, the *GPUAlloc* tests allocate in turn from one machine, each
// step from what the steps before left free; each step here is a case with
// that free set (the best-effort picks before it taken away). The last step
// of each asks for a GPU when none is left: both give nothing.
//
// The picks differ in 5 of the 52 cases, never to gpulayer's loss: best
// effort scores the partition of all the free GPUs into sets of k, so it
// gives up a faster pair now to leave a good one for later (free 0, 2, 4
// and 5 of the Volta: it takes NV1 4-5 and leaves 0-2, gpulayer the NV2
// 0-4); it adds the PCIe path under an NVLink, which nvidia-smi does not
// show, so of two NV1 pairs it prefers the one on one switch where gpulayer
// ties them and takes the lowest indices; and for one GPU it takes the
// lowest index where gpulayer takes the GPU least linked to the free ones
// (the cross score), keeping an NVLink pair whole.
//
// Not mapped: TestBestEffortAllocate's seven "Must include ..." and
// "Required too many devices than available" cases (gpuallocator's
// required devices: PickDevices has no set a pick must contain; gpulayer
// places whole jobs and chooses every GPU itself), and
// TestBestEffortIterateGPUSets and TestBestEffortIterateGPUPartitions (12
// cases of the policy's internal enumerators, not picks). NewDGX2VoltaNode
// is empty upstream.
func TestPickDevicesNeverWorseThanGPUAllocatorBestEffort(t *testing.T) {
	volta, pascal, rtx := gpuallocatorDGX1Volta(), gpuallocatorDGX1Pascal(), gpuallocator4xRTX8000()
	type step struct {
		k    int
		want []int // the best-effort pick
	}
	var cases []struct {
		name  string
		m     *Matrix
		free  DeviceSet
		k     int
		other []int
	}
	add := func(name string, m *Matrix, free []int, k int, want []int) {
		cases = append(cases, struct {
			name  string
			m     *Matrix
			free  DeviceSet
			k     int
			other []int
		}{name, m, DeviceSetOf(free...), k, want})
	}
	// TestBestEffortAllocate, the cases with no required devices.
	add("TestBestEffortAllocate/Single NVLINK, prefer same switch", volta, []int{0, 2, 4, 5}, 2, []int{4, 5})
	add("TestBestEffortAllocate/Single NVLINK, prefer same socket", volta, []int{0, 4, 5, 6}, 2, []int{5, 6})
	add("TestBestEffortAllocate/Prefer dual NVLINK same socket", volta, []int{0, 3, 1}, 2, []int{0, 3})
	add("TestBestEffortAllocate/Prefer dual NVLINK cross socket", volta, []int{0, 1, 4}, 2, []int{0, 4})
	// The allocator tests: steps in turn on one machine.
	for _, seq := range []struct {
		name  string
		m     *Matrix
		steps []step
	}{
		{"TestBestEffort4xRTX8000GPUAllocOne", rtx, []step{{1, []int{0}}, {1, []int{1}}, {1, []int{2}}, {1, []int{3}}, {1, nil}}},
		{"TestBestEffort4xRTX8000GPUAllocTwo", rtx, []step{{2, []int{0, 3}}, {2, []int{1, 2}}, {1, nil}}},
		{"TestBestEffort4xRTX8000GPUAllocFour", rtx, []step{{4, []int{0, 1, 2, 3}}, {1, nil}}},
		{"TestBestEffortDGX1PascalGPUAllocOne", pascal, []step{{1, []int{0}}, {1, []int{1}}, {1, []int{2}}, {1, []int{3}}, {1, []int{4}}, {1, []int{5}}, {1, []int{6}}, {1, []int{7}}, {1, nil}}},
		{"TestBestEffortDGX1PascalGPUAllocTwo", pascal, []step{{2, []int{0, 2}}, {2, []int{1, 3}}, {2, []int{4, 6}}, {2, []int{5, 7}}, {1, nil}}},
		{"TestBestEffortDGX1PascalGPUAllocFour", pascal, []step{{4, []int{0, 1, 2, 3}}, {4, []int{4, 5, 6, 7}}, {1, nil}}},
		{"TestBestEffortDGX1PascalGPUAllocEight", pascal, []step{{8, []int{0, 1, 2, 3, 4, 5, 6, 7}}, {1, nil}}},
		{"TestBestEffortDGX1VoltaGPUAllocOne", volta, []step{{1, []int{0}}, {1, []int{1}}, {1, []int{2}}, {1, []int{3}}, {1, []int{4}}, {1, []int{5}}, {1, []int{6}}, {1, []int{7}}, {1, nil}}},
		{"TestBestEffortDGX1VoltaGPUAllocTwo", volta, []step{{2, []int{0, 3}}, {2, []int{1, 2}}, {2, []int{4, 7}}, {2, []int{5, 6}}, {1, nil}}},
		{"TestBestEffortDGX1VoltaGPUAllocFour", volta, []step{{4, []int{0, 1, 2, 3}}, {4, []int{4, 5, 6, 7}}, {1, nil}}},
		{"TestBestEffortDGX1VoltaGPUAllocEight", volta, []step{{8, []int{0, 1, 2, 3, 4, 5, 6, 7}}, {1, nil}}},
	} {
		free := AllDevices(seq.m.GPUs())
		for i, s := range seq.steps {
			add(fmt.Sprintf("%s/step %d", seq.name, i+1), seq.m, free.Indices(), s.k, s.want)
			free &^= DeviceSetOf(s.want...)
		}
	}

	differ := 0
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			p, err := PickDevices(tt.m, tt.free, tt.k, PickOptions{})
			if len(tt.other) == 0 {
				// Best effort gives nothing: fewer GPUs free than asked for.
				if err == nil {
					t.Fatalf("picked %v from %v, want an error (best effort gives nothing)", p.GPUs, tt.free.Indices())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			mine, theirs := DeviceSetOf(p.GPUs...), DeviceSetOf(tt.other...)
			if theirs&^tt.free != 0 || theirs.Len() != tt.k {
				t.Fatalf("the best-effort pick %v is not %d of the free %v: the case is mistyped", tt.other, tt.k, tt.free.Indices())
			}
			a, b := scoreSet(tt.m, tt.free, mine, PickOptions{}), scoreSet(tt.m, tt.free, theirs, PickOptions{})
			if b.bottleneck > a.bottleneck || b.bottleneck == a.bottleneck && b.total > a.total {
				t.Errorf("gpulayer %v (slowest %d, total %d) ranks below best effort %v (slowest %d, total %d)",
					p.GPUs, a.bottleneck, a.total, tt.other, b.bottleneck, b.total)
			}
			if mine != theirs {
				differ++
				t.Logf("picks differ: gpulayer %v (slowest %d, total %d, NUMA nodes %d, cross %d), best effort %v (slowest %d, total %d, NUMA nodes %d, cross %d)",
					p.GPUs, a.bottleneck, a.total, a.numa, a.cross, tt.other, b.bottleneck, b.total, b.numa, b.cross)
			}
		})
	}
	t.Logf("%d cases, %d where the picks differ", len(cases), differ)
}

// TestGPUAllocatorDGX1VoltaIsTheRecordedDGX1 checks the mapped link table
// against a real DGX-1's nvidia-smi topo -m: the same NVLinks, pair by
// pair, so the best-effort cases run on the machine they were written for.
func TestGPUAllocatorDGX1VoltaIsTheRecordedDGX1(t *testing.T) {
	rec, mapped := mustParse(t, "dgx1-v100-8x-nv1-nv2-mlx5-driver440.txt"), gpuallocatorDGX1Volta()
	for i := range 8 {
		for j := range 8 {
			r, m := rec.Links[i][j], mapped.Links[i][j]
			if (r.Kind == LinkNV || m.Kind == LinkNV) && r != m {
				t.Errorf("GPU%d-GPU%d: recorded %s, mapped %s", i, j, r, m)
			}
		}
	}
}

// gpuallocatorMatrix builds a Matrix from gpuallocator's per-pair PCIe
// path and NVLink count (0 for none), and its GPUs' sockets.
func gpuallocatorMatrix(pcie [][]Link, nvlinks map[[2]int]int, socket []int) *Matrix {
	n := len(pcie)
	m := &Matrix{Links: make([][]Link, n), NUMAAffinity: make([]NUMASet, n)}
	for i := range n {
		m.Links[i] = slices.Clone(pcie[i])
		m.Links[i][i] = Self
		m.NUMAAffinity[i] = NUMASet{socket[i]}
	}
	for pair, nv := range nvlinks {
		m.Links[pair[0]][pair[1]], m.Links[pair[1]][pair[0]] = NV(nv), NV(nv)
	}
	return m
}

// gpuallocatorDGX1Volta is NewDGX1VoltaNode: the hybrid cube mesh, NV2
// around two rings and NV1 across, PIX pairs (0,1) (2,3) (4,5) (6,7), PHB
// inside a socket, SYS across.
func gpuallocatorDGX1Volta() *Matrix {
	pcie := socketPCIe([][2]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}})
	nv := map[[2]int]int{
		{0, 1}: 1, {0, 2}: 1, {0, 3}: 2, {0, 4}: 2,
		{1, 2}: 2, {1, 3}: 1, {1, 5}: 2,
		{2, 3}: 2, {2, 6}: 1,
		{3, 7}: 1,
		{4, 5}: 1, {4, 6}: 1, {4, 7}: 2,
		{5, 6}: 2, {5, 7}: 1,
		{6, 7}: 2,
	}
	return gpuallocatorMatrix(pcie, nv, []int{0, 0, 0, 0, 1, 1, 1, 1})
}

// gpuallocatorDGX1Pascal is NewDGX1PascalNode: NV1 between every pair of
// a socket's four GPUs and from each to its twin on the other socket; PIX
// pairs (0,2) (1,3) (4,6) (5,7), PHB inside a socket, SYS across.
func gpuallocatorDGX1Pascal() *Matrix {
	pcie := socketPCIe([][2]int{{0, 2}, {1, 3}, {4, 6}, {5, 7}})
	nv := map[[2]int]int{}
	for _, quad := range [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}} {
		for a := range quad {
			for b := a + 1; b < len(quad); b++ {
				nv[[2]int{quad[a], quad[b]}] = 1
			}
		}
	}
	for i := range 4 {
		nv[[2]int{i, i + 4}] = 1
	}
	return gpuallocatorMatrix(pcie, nv, []int{0, 0, 0, 0, 1, 1, 1, 1})
}

// socketPCIe is a DGX-1's PCIe: two sockets of four GPUs, the given pairs
// on one switch (PIX), the rest of a socket through the host bridge (PHB),
// SYS across sockets.
func socketPCIe(pix [][2]int) [][]Link {
	pcie := make([][]Link, 8)
	for i := range 8 {
		pcie[i] = make([]Link, 8)
		for j := range 8 {
			pcie[i][j] = SYS
			if i/4 == j/4 {
				pcie[i][j] = PHB
			}
		}
	}
	for _, p := range pix {
		pcie[p[0]][p[1]], pcie[p[1]][p[0]] = PIX, PIX
	}
	return pcie
}

// gpuallocator4xRTX8000 is New4xRTX8000Node: NVLink bridges (NV2) on
// (0,3) and (1,2); 0-1 and 2-3 share a socket (NODE), the rest cross
// (SYS).
func gpuallocator4xRTX8000() *Matrix {
	pcie := [][]Link{
		{Self, NODE, SYS, SYS},
		{NODE, Self, SYS, SYS},
		{SYS, SYS, Self, NODE},
		{SYS, SYS, NODE, Self},
	}
	return gpuallocatorMatrix(pcie, map[[2]int]int{{0, 3}: 2, {1, 2}: 2}, []int{0, 0, 1, 1})
}

package topology

import (
	"math/rand"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// layout is one matrix the pick tests run on: a recording or a synthetic
// 16-GPU layout.
type layout struct {
	name string
	m    *Matrix
}

func loadLayouts(t testing.TB) []layout {
	t.Helper()
	var out []layout
	for _, dir := range []string{"../testdata/topo", "../testdata/topo-synthetic"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			m, err := ParseSMI(readRecording(t, dir, filepath.Base(f)))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out = append(out, layout{name: strings.TrimSuffix(filepath.Base(f), ".txt"), m: m})
		}
	}
	if len(out) < 28 {
		t.Fatalf("found %d layouts, want the recordings and the synthetic ones", len(out))
	}
	return out
}

// freeMasks is every subset of n GPUs for n <= 8; above that all free, half
// busy (odd indices free), and a few hundred seeded random masks.
func freeMasks(n int, seed int64) []DeviceSet {
	if n <= 8 {
		out := make([]DeviceSet, 0, 1<<n)
		for s := DeviceSet(0); s < 1<<uint(n); s++ {
			out = append(out, s)
		}
		return out
	}
	all := AllDevices(n)
	out := []DeviceSet{all, all & 0xAAAAAAAAAAAAAAAA, all & 0x5555555555555555}
	rng := rand.New(rand.NewSource(seed))
	for i := 0; i < 300; i++ {
		out = append(out, DeviceSet(rng.Uint64())&all)
	}
	return out
}

func comparePicks(t *testing.T, name string, m *Matrix, free DeviceSet) {
	t.Helper()
	p, err := PrepareMatrix(m)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for _, multi := range []bool{false, true} {
		opts := PickOptions{MultiNode: multi}
		for k := 0; k <= free.Len(); k++ {
			want := pickReference(m, free, k, opts)
			got, err := p.Pick(free, k, opts)
			if err != nil {
				t.Fatalf("%s free=%b k=%d multi=%v: %v", name, free, k, multi, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s free=%b k=%d multi=%v:\n got %+v\nwant %+v", name, free, k, multi, got, want)
			}
		}
	}
}

func TestPickDevicesEqualsExhaustiveReference(t *testing.T) {
	for i, l := range loadLayouts(t) {
		t.Run(l.name, func(t *testing.T) {
			for _, free := range freeMasks(l.m.GPUs(), int64(i)+1) {
				comparePicks(t, l.name, l.m, free)
			}
		})
	}
}

// randomMatrix builds an n-GPU machine with random links, NICs and NUMA
// sets, with some repeated rows so that interchangeable GPUs occur.
func randomMatrix(rng *rand.Rand, n int) *Matrix {
	kinds := []Link{SYS, NODE, PHB, PXB, PIX, NV(1), NV(2), NV(4), NV(12), {}}
	m := &Matrix{Links: make([][]Link, n), NICs: []string{"mlx5_0", "mlx5_1"}, NICLinks: make([][]Link, n),
		CPUAffinity: make([]string, n), NUMAAffinity: make([]NUMASet, n), GPUNUMAID: make([]int, n)}
	levels := 1 + rng.Intn(4) // few distinct links make many ties
	for i := range m.Links {
		m.Links[i] = make([]Link, n)
		m.Links[i][i] = Self
		m.NICLinks[i] = []Link{kinds[rng.Intn(5)], kinds[rng.Intn(5)]}
		switch rng.Intn(4) {
		case 0: // unknown
		case 1:
			m.NUMAAffinity[i] = NUMASet{rng.Intn(3)}
		case 2:
			m.NUMAAffinity[i] = NUMASet{0, 1 + rng.Intn(3)}
		default:
			m.NUMAAffinity[i] = NUMASet{rng.Intn(2)}
		}
		m.GPUNUMAID[i] = -1
	}
	if rng.Intn(3) == 0 {
		// One private NUMA set per GPU, of one or two nodes, as on servers
		// with a NUMA node per GPU.
		for i := range m.NUMAAffinity {
			if rng.Intn(4) == 0 {
				m.NUMAAffinity[i] = NUMASet{100 + 2*i, 101 + 2*i}
			} else if rng.Intn(8) > 0 {
				m.NUMAAffinity[i] = NUMASet{100 + 2*i}
			} else {
				m.NUMAAffinity[i] = nil
			}
		}
	}
	base := rng.Intn(len(kinds) - levels + 1)
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			l := kinds[base+rng.Intn(levels)]
			m.Links[i][j], m.Links[j][i] = l, l
		}
	}
	return m
}

func TestPickDevicesEqualsReferenceOnRandomMachines(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for round := 0; round < 120; round++ {
		n := 1 + rng.Intn(12)
		m := randomMatrix(rng, n)
		masks := freeMasks(n, int64(round))
		if len(masks) > 40 {
			rng.Shuffle(len(masks), func(a, b int) { masks[a], masks[b] = masks[b], masks[a] })
			masks = masks[:40]
		}
		for _, free := range masks {
			comparePicks(t, "random", m, free)
		}
	}
}

func mustParse(t testing.TB, file string) *Matrix {
	t.Helper()
	dir := "../testdata/topo"
	if strings.HasPrefix(file, "synthetic-") {
		dir = "../testdata/topo-synthetic"
	}
	m, err := ParseSMI(readRecording(t, dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPickDevicesEdgeCases(t *testing.T) {
	dgx := mustParse(t, "dgx-a100-8x-nv12-8nic-mlx5.txt")
	if _, err := PickDevices(dgx, DeviceSetOf(0, 1, 2), 4, PickOptions{}); err == nil || !strings.Contains(err.Error(), "4 GPUs requested, 3 free") {
		t.Errorf("k > free: err %v", err)
	}
	if _, err := PickDevices(dgx, AllDevices(8), -1, PickOptions{}); err == nil {
		t.Error("k < 0 gave no error")
	}
	if p, err := PickDevices(dgx, AllDevices(8), 0, PickOptions{}); err != nil || p.GPUs == nil || len(p.GPUs) != 0 {
		t.Errorf("k = 0: %+v, %v", p, err)
	}
	// Busy GPUs beyond the matrix are ignored, not counted as free.
	if _, err := PickDevices(dgx, AllDevices(12), 9, PickOptions{}); err == nil {
		t.Error("free GPUs beyond the matrix were counted")
	}
	if p, err := PickDevices(&Matrix{}, DeviceSetOf(1, 4, 6, 9), 3, PickOptions{}); err != nil || !reflect.DeepEqual(p.GPUs, []int{1, 4, 6}) {
		t.Errorf("no link data: %+v, %v", p, err)
	}
	if _, err := PickDevices(&Matrix{Links: [][]Link{{Self, PIX}, {PHB, Self}}}, 3, 2, PickOptions{}); err == nil {
		t.Error("asymmetric matrix accepted")
	}
}

func TestPickPrefersIntactNVLinkIsland(t *testing.T) {
	cases := []struct {
		name, file string
		free       DeviceSet
		k          int
		multi      bool
		want       []int
	}{
		// ADR-0021: with GPU 0 busy, 4 GPUs on the DGX-1 cube mesh take the
		// other island rather than 1-4, which crosses the sockets.
		{"dgx1 island with GPU0 busy", "dgx1-v100-8x-nv1-nv2-mlx5-driver440.txt", AllDevices(8) &^ DeviceSetOf(0), 4, false, []int{4, 5, 6, 7}},
		// One GPU goes where it breaks no NVLink pair: GPU1's partner is busy.
		{"single GPU keeps NV12 pair free", "azure-nc96ads-a100v4-4x-a100pcie-nv12-pairs-4numa-matrix-only.txt", DeviceSetOf(1, 2, 3), 1, false, []int{1}},
		// A pair takes the NVLink bridge, not the PCIe neighbour.
		{"pair takes the NV4 bridge", "3x-rtx-a6000-nv4-pair-ansi-escapes-tabs.txt", AllDevices(3), 2, false, []int{0, 1}},
		// Four of eight NVSwitch GPUs stay on one socket.
		{"one NUMA node on the H100", "hgx-h100-8x-nv18-gpunumaid-nonic.txt", DeviceSetOf(2, 3, 4, 5, 6, 7), 4, false, []int{4, 5, 6, 7}},
		// Multi-node jobs on the two-board layout prefer GPUs next to a NIC.
		{"multi-node takes NIC-local GPUs", "synthetic-16x-two-boards-nv12-sys-4numa-4nic.txt", AllDevices(16) &^ DeviceSetOf(0, 1), 2, true, []int{4, 5}},
		{"single-node ignores NICs", "synthetic-16x-two-boards-nv12-sys-4numa-4nic.txt", AllDevices(16) &^ DeviceSetOf(0, 1), 2, false, []int{2, 3}},
		// Ten GPUs on two 8-GPU boards: eight on one board, two on the other.
		{"ten GPUs fill one board", "synthetic-16x-two-boards-nv12-sys-4numa-4nic.txt", AllDevices(16), 10, false, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := PickDevices(mustParse(t, c.file), c.free, c.k, PickOptions{MultiNode: c.multi})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.GPUs, c.want) {
				t.Fatalf("picked %v (%+v), want %v", p.GPUs, p, c.want)
			}
		})
	}
}

func TestPreparedPickSetDoesNotAllocate(t *testing.T) {
	for _, file := range []string{"dgx1-v100-8x-nv1-nv2-mlx5-driver440.txt", "synthetic-16x-two-boards-nv12-sys-4numa-4nic.txt"} {
		p, err := PrepareMatrix(mustParse(t, file))
		if err != nil {
			t.Fatal(err)
		}
		free := AllDevices(p.GPUs()) &^ DeviceSetOf(1)
		allocs := testing.AllocsPerRun(50, func() {
			if _, err := p.PickSet(free, 4, PickOptions{MultiNode: true}); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per PickSet", file, allocs)
		}
	}
}

func TestPickDevicesSeesMatrixChangedInPlace(t *testing.T) {
	m := mustParse(t, "azure-nc96ads-a100v4-4x-a100pcie-nv12-pairs-4numa-matrix-only.txt")
	first, err := PickDevices(m, AllDevices(4), 2, PickOptions{})
	if err != nil || !reflect.DeepEqual(first.GPUs, []int{0, 1}) {
		t.Fatalf("first pick %+v, %v", first, err)
	}
	// Bridge GPU1 and GPU3 with more NVLinks than the 0-1 pair.
	m.Links[1][3], m.Links[3][1] = NV(18), NV(18)
	second, err := PickDevices(m, AllDevices(4), 2, PickOptions{})
	if err != nil || !reflect.DeepEqual(second.GPUs, []int{1, 3}) {
		t.Fatalf("after the change: %+v, %v", second, err)
	}
	m.NUMAAffinity[3] = NUMASet{1}
	m.Links[1][3], m.Links[3][1] = NV(12), NV(12)
	m.Links[0][1], m.Links[1][0] = NV(12), NV(12)
	third, err := PickDevices(m, DeviceSetOf(0, 1, 3), 2, PickOptions{})
	want := pickReference(m, DeviceSetOf(0, 1, 3), 2, PickOptions{})
	if err != nil || !reflect.DeepEqual(third, want) {
		t.Fatalf("after the NUMA change: %+v, want %+v (%v)", third, want, err)
	}
	// Only the NUMA sets change: GPU3 joins GPU0's node.
	m.NUMAAffinity[3] = NUMASet{0}
	fourth, err := PickDevices(m, DeviceSetOf(0, 1, 3), 2, PickOptions{})
	want = pickReference(m, DeviceSetOf(0, 1, 3), 2, PickOptions{})
	if err != nil || !reflect.DeepEqual(fourth, want) || reflect.DeepEqual(fourth.GPUs, third.GPUs) {
		t.Fatalf("after a NUMA-only change: %+v, want %+v, different from %v (%v)", fourth, want, third.GPUs, err)
	}
	// Only the NIC links change, for a multi-node job.
	m2 := mustParse(t, "2x-rtx6000ada-threadripper-phb-2nic.txt")
	if p, err := PickDevices(m2, AllDevices(2), 1, PickOptions{MultiNode: true}); err != nil || p.GPUs[0] != 0 {
		t.Fatalf("before the NIC change: %+v, %v", p, err)
	}
	m2.NICLinks[1][0] = PIX
	if p, err := PickDevices(m2, AllDevices(2), 1, PickOptions{MultiNode: true}); err != nil || p.GPUs[0] != 1 {
		t.Fatalf("after the NIC change: %+v, %v", p, err)
	}
}

func TestPickDevicesIsSafeForConcurrentUse(t *testing.T) {
	layouts := loadLayouts(t)
	want := make([]Pick, len(layouts))
	for i, l := range layouts {
		want[i] = pickReference(l.m, AllDevices(l.m.GPUs()), (l.m.GPUs()+1)/2, PickOptions{})
	}
	errs := make(chan string, 4*len(layouts))
	done := make(chan struct{})
	for g := 0; g < 4; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for round := 0; round < 3; round++ {
				for i, l := range layouts {
					got, err := PickDevices(l.m, AllDevices(l.m.GPUs()), (l.m.GPUs()+1)/2, PickOptions{})
					if err != nil || !reflect.DeepEqual(got, want[i]) {
						errs <- l.name
						return
					}
				}
			}
		}()
	}
	for g := 0; g < 4; g++ {
		<-done
	}
	close(errs)
	for name := range errs {
		t.Errorf("%s: concurrent pick differs from the reference", name)
	}
}

// TestBothPickPathsMeetTheReference makes sure the recordings exercise both
// ways PickDevices scores sets (subset tables on small machines without
// interchangeable GPUs, the search elsewhere), so the reference comparisons
// above cover both.
func TestBothPickPathsMeetTheReference(t *testing.T) {
	tables, search := 0, 0
	for _, l := range loadLayouts(t) {
		p, err := PrepareMatrix(l.m)
		if err != nil {
			t.Fatal(err)
		}
		if p.subsetTotal != nil && !p.hasTwins[0] {
			tables++
		} else {
			search++
		}
	}
	if tables == 0 || search == 0 {
		t.Fatalf("%d layouts use subset tables, %d the search: both must be covered", tables, search)
	}
	t.Logf("%d layouts use subset tables, %d the search", tables, search)
}

// TestDescribesMeansTheSamePicks: a matrix that Prepared.Describes picks
// as PickDevices does on it, for every free set, size and option; a
// matrix differing in a link, a NIC's locality or a NUMA set is not
// described (placement memoises picks on this check).
func TestDescribesMeansTheSamePicks(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	clone := func(m *Matrix) *Matrix {
		c := &Matrix{NICs: m.NICs, CPUAffinity: m.CPUAffinity, GPUNUMAID: m.GPUNUMAID}
		for _, r := range m.Links {
			c.Links = append(c.Links, append([]Link(nil), r...))
		}
		for _, r := range m.NICLinks {
			c.NICLinks = append(c.NICLinks, append([]Link(nil), r...))
		}
		for _, s := range m.NUMAAffinity {
			c.NUMAAffinity = append(c.NUMAAffinity, append(NUMASet(nil), s...))
		}
		return c
	}
	described, differ := 0, 0
	for round := 0; round < 60; round++ {
		n := 2 + rng.Intn(7)
		a := randomMatrix(rng, n)
		p, err := PrepareMatrix(a)
		if err != nil {
			t.Fatal(err)
		}
		b := clone(a)
		switch rng.Intn(4) {
		case 0: // the same content
		case 1:
			i, j := rng.Intn(n), rng.Intn(n)
			if i != j {
				l := []Link{SYS, PHB, NV(2), NV(18)}[rng.Intn(4)]
				b.Links[i][j], b.Links[j][i] = l, l
			}
		case 2:
			b.NICLinks[rng.Intn(n)][0] = []Link{SYS, PIX, PXB}[rng.Intn(3)]
		default:
			b.NUMAAffinity[rng.Intn(n)] = NUMASet{rng.Intn(3)}
		}
		if !p.Describes(b) {
			differ++
			// Not described: something it read differs.
			if reflect.DeepEqual(a.Links, b.Links) && reflect.DeepEqual(a.NUMAAffinity, b.NUMAAffinity) && nicLocalOf(a) == nicLocalOf(b) {
				t.Fatalf("round %d: equal matrices not described", round)
			}
			continue
		}
		described++
		for _, free := range freeMasks(n, int64(round)) {
			for k := 0; k <= free.Len(); k++ {
				for _, multi := range []bool{false, true} {
					opts := PickOptions{MultiNode: multi}
					got, gerr := p.Pick(free, k, opts)
					want, werr := PickDevices(b, free, k, opts)
					if (gerr == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
						t.Fatalf("round %d, free %b, k %d, multi %v: described matrix picks %+v (%v), PickDevices %+v (%v)", round, free, k, multi, got, gerr, want, werr)
					}
				}
			}
		}
	}
	if described == 0 || differ == 0 {
		t.Fatalf("%d described, %d not: the rounds should draw both", described, differ)
	}
}

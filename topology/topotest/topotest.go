// Package topotest builds GPU link matrices for tests of the packages that
// use topology (placement, reconcile): the recorded `nvidia-smi topo -m`
// outputs under testdata/ and random machines.
//
// topology's own in-package tests keep their copies of these (an in-package
// test cannot import a package that imports topology); a change to the
// random machine here is a change to theirs.
package topotest

import (
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/topology"
)

// testdata is the repository's testdata directory, found from this file so
// that tests in any package read the same recordings.
func testdata() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata")
}

// Recording is the text of a recording in testdata/topo (or
// testdata/topo-synthetic for a name starting with "synthetic-").
func Recording(t testing.TB, file string) string {
	t.Helper()
	dir := "topo"
	if strings.HasPrefix(file, "synthetic-") {
		dir = "topo-synthetic"
	}
	b, err := os.ReadFile(filepath.Join(testdata(), dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// MustParse parses the recording [Recording] reads.
func MustParse(t testing.TB, file string) *topology.Matrix {
	t.Helper()
	m, err := topology.ParseSMI(Recording(t, file))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// RandomMatrix builds an n-GPU machine with random links, NICs and NUMA
// sets, with some repeated rows so that interchangeable GPUs occur.
func RandomMatrix(rng *rand.Rand, n int) *topology.Matrix {
	kinds := []topology.Link{topology.SYS, topology.NODE, topology.PHB, topology.PXB, topology.PIX, topology.NV(1), topology.NV(2), topology.NV(4), topology.NV(12), {}}
	m := &topology.Matrix{Links: make([][]topology.Link, n), NICs: []string{"mlx5_0", "mlx5_1"}, NICLinks: make([][]topology.Link, n),
		CPUAffinity: make([]string, n), NUMAAffinity: make([]topology.NUMASet, n), GPUNUMAID: make([]int, n)}
	levels := 1 + rng.Intn(4) // few distinct links make many ties
	for i := range m.Links {
		m.Links[i] = make([]topology.Link, n)
		m.Links[i][i] = topology.Self
		m.NICLinks[i] = []topology.Link{kinds[rng.Intn(5)], kinds[rng.Intn(5)]}
		switch rng.Intn(4) {
		case 0: // unknown
		case 1:
			m.NUMAAffinity[i] = topology.NUMASet{rng.Intn(3)}
		case 2:
			m.NUMAAffinity[i] = topology.NUMASet{0, 1 + rng.Intn(3)}
		default:
			m.NUMAAffinity[i] = topology.NUMASet{rng.Intn(2)}
		}
		m.GPUNUMAID[i] = -1
	}
	if rng.Intn(3) == 0 {
		// One private NUMA set per GPU, of one or two nodes, as on servers
		// with a NUMA node per GPU.
		for i := range m.NUMAAffinity {
			if rng.Intn(4) == 0 {
				m.NUMAAffinity[i] = topology.NUMASet{100 + 2*i, 101 + 2*i}
			} else if rng.Intn(8) > 0 {
				m.NUMAAffinity[i] = topology.NUMASet{100 + 2*i}
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

//go:build linux && cgo && nvml

package nvmltopo

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/topology"
)

// recorded returns what `nvidia-smi topo -m` printed on a recorded machine,
// testdata/topo/<file> read with topology.ParseSMI, without its NICs, which
// NVML cannot see.
func recorded(t *testing.T, file string) *topology.Matrix {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "..", "testdata", "topo", file))
	if err != nil {
		t.Fatal(err)
	}
	m, err := topology.ParseSMI(string(text))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	m.NICs, m.NICLinks = nil, nil
	return m
}

// linkRows reads matrix rows written as nvidia-smi tokens.
func linkRows(rows ...string) [][]topology.Link {
	out := make([][]topology.Link, len(rows))
	for i, r := range rows {
		for _, tok := range strings.Fields(r) {
			l, err := topology.ParseLink(tok)
			if err != nil {
				panic(fmt.Sprintf("row %d: %v", i, err))
			}
			out[i] = append(out[i], l)
		}
	}
	return out
}

// assertSameMatrix compares what NVML gave with what nvidia-smi printed: the
// GPU links, CPU and NUMA affinity and GPU NUMA ID. A recording without a
// NUMA or GPU NUMA ID column counts as unknown for every GPU. NVML must
// report no NICs.
func assertSameMatrix(t *testing.T, got, want *topology.Matrix) {
	t.Helper()
	if got == nil {
		t.Fatal("no matrix")
	}
	n := want.GPUs()
	if got.GPUs() != n {
		t.Fatalf("%d GPUs, want %d", got.GPUs(), n)
	}
	if g, w := tokenRows(got.Links), tokenRows(want.Links); g != w {
		t.Errorf("links:\n%s\nwant:\n%s", g, w)
	}
	if g, w := padStrings(got.CPUAffinity, n), padStrings(want.CPUAffinity, n); !reflect.DeepEqual(g, w) {
		t.Errorf("CPU affinity %q, want %q", g, w)
	}
	if g, w := padNUMA(got.NUMAAffinity, n), padNUMA(want.NUMAAffinity, n); !reflect.DeepEqual(g, w) {
		t.Errorf("NUMA affinity %v, want %v", g, w)
	}
	if g, w := padIDs(got.GPUNUMAID, n), padIDs(want.GPUNUMAID, n); !reflect.DeepEqual(g, w) {
		t.Errorf("GPU NUMA ID %v, want %v", g, w)
	}
	if len(got.NICs) != 0 || len(got.NICLinks) != 0 {
		t.Errorf("NVML reported NICs %q and links %v; it cannot see NICs", got.NICs, got.NICLinks)
	}
}

func tokenRows(links [][]topology.Link) string {
	var sb strings.Builder
	for _, row := range links {
		for j, l := range row {
			if j > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(l.String())
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

func padStrings(s []string, n int) []string {
	out := make([]string, n)
	copy(out, s)
	return out
}

func padNUMA(s []topology.NUMASet, n int) []topology.NUMASet {
	out := make([]topology.NUMASet, n)
	for i := 0; i < n && i < len(s); i++ {
		if len(s[i]) > 0 {
			out[i] = s[i]
		}
	}
	return out
}

func padIDs(s []int, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = -1
		if i < len(s) {
			out[i] = s[i]
		}
	}
	return out
}

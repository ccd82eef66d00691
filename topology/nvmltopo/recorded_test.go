//go:build linux && cgo

package nvmltopo

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/topology"
)

// recorded returns what `nvidia-smi topo -m` printed on a recorded machine
// (testdata/topo/<file>), without its NICs, which NVML cannot see.
//
// The matrices are transcribed by hand from the recordings until
// topology.ParseSMI is on main; then this reads and parses the files.
func recorded(t *testing.T, file string) *topology.Matrix {
	t.Helper()
	m, ok := transcribed[file]
	if !ok {
		t.Fatalf("no transcription of %s", file)
	}
	return m()
}

var transcribed = map[string]func() *topology.Matrix{
	"dgx-a100-8x-nv12-8nic-mlx5.txt": func() *topology.Matrix {
		return &topology.Matrix{
			Links: linkRows(
				"X NV12 NV12 NV12 NV12 NV12 NV12 NV12",
				"NV12 X NV12 NV12 NV12 NV12 NV12 NV12",
				"NV12 NV12 X NV12 NV12 NV12 NV12 NV12",
				"NV12 NV12 NV12 X NV12 NV12 NV12 NV12",
				"NV12 NV12 NV12 NV12 X NV12 NV12 NV12",
				"NV12 NV12 NV12 NV12 NV12 X NV12 NV12",
				"NV12 NV12 NV12 NV12 NV12 NV12 X NV12",
				"NV12 NV12 NV12 NV12 NV12 NV12 NV12 X",
			),
			CPUAffinity:  repeat(4, "0-31,64-95", 4, "32-63,96-127"),
			NUMAAffinity: []topology.NUMASet{{0}, {0}, {0}, {0}, {1}, {1}, {1}, {1}},
			GPUNUMAID:    nil, // no GPU NUMA ID column
		}
	},
	"4x-rtx6000ada-pcie-2socket-node-sys-4nic.txt": func() *topology.Matrix {
		return &topology.Matrix{
			Links: linkRows(
				"X NODE SYS SYS",
				"NODE X SYS SYS",
				"SYS SYS X NODE",
				"SYS SYS NODE X",
			),
			CPUAffinity:  repeat(2, "0-31", 2, "32-63"),
			NUMAAffinity: []topology.NUMASet{{0}, {0}, {1}, {1}},
			GPUNUMAID:    []int{-1, -1, -1, -1}, // N/A
		}
	},
	"dgx1-v100-8x-nv1-nv2-mlx5-driver440.txt": func() *topology.Matrix {
		return &topology.Matrix{
			Links: linkRows(
				"X NV1 NV1 NV2 NV2 SYS SYS SYS",
				"NV1 X NV2 NV1 SYS NV2 SYS SYS",
				"NV1 NV2 X NV2 SYS SYS NV1 SYS",
				"NV2 NV1 NV2 X SYS SYS SYS NV1",
				"NV2 SYS SYS SYS X NV1 NV1 NV2",
				"SYS NV2 SYS SYS NV1 X NV2 NV1",
				"SYS SYS NV1 SYS NV1 NV2 X NV2",
				"SYS SYS SYS NV1 NV2 NV1 NV2 X",
			),
			CPUAffinity:  repeat(4, "0-11,24-35", 4, "12-23,36-47"),
			NUMAAffinity: nil, // CPU Affinity only
		}
	},
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

// repeat(2, "a", 3, "b") is a, a, b, b, b.
func repeat(pairs ...any) []string {
	var out []string
	for i := 0; i+1 < len(pairs); i += 2 {
		for k := 0; k < pairs[i].(int); k++ {
			out = append(out, pairs[i+1].(string))
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

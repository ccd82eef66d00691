package topology

import (
	"fmt"
	"strings"
	"testing"
)

// Helpers that build fleets for the placement tests and benchmarks.

// matrixRows builds a matrix from the GPU rows of an `nvidia-smi topo -m`
// table (the GPU columns only), as recorded in testdata/topo.
func matrixRows(t testing.TB, rows ...string) *Matrix {
	t.Helper()
	m := &Matrix{}
	for _, r := range rows {
		var row []Link
		for _, tok := range strings.Fields(r) {
			l, err := ParseLink(tok)
			if err != nil {
				t.Fatalf("row %q: %v", r, err)
			}
			row = append(row, l)
		}
		m.Links = append(m.Links, row)
	}
	return m
}

// hgxH100 is testdata/topo/hgx-h100-8x-nv18-gpunumaid-nonic.txt: eight
// GPUs, every pair NV18.
func hgxH100(t testing.TB) *Matrix {
	rows := make([]string, 8)
	for i := range rows {
		toks := make([]string, 8)
		for j := range toks {
			toks[j] = "NV18"
		}
		toks[i] = "X"
		rows[i] = strings.Join(toks, " ")
	}
	return matrixRows(t, rows...)
}

// dgx1V100 is testdata/topo/dgx1-v100-8x-nv1-nv2-mlx5-driver440.txt: the
// NVLink hybrid cube mesh (NV1 and NV2 inside each half, SYS across).
func dgx1V100(t testing.TB) *Matrix {
	return matrixRows(t,
		"X NV1 NV1 NV2 NV2 SYS SYS SYS",
		"NV1 X NV2 NV1 SYS NV2 SYS SYS",
		"NV1 NV2 X NV2 SYS SYS NV1 SYS",
		"NV2 NV1 NV2 X SYS SYS SYS NV1",
		"NV2 SYS SYS SYS X NV1 NV1 NV2",
		"SYS NV2 SYS SYS NV1 X NV2 NV1",
		"SYS SYS NV1 SYS NV1 NV2 X NV2",
		"SYS SYS SYS NV1 NV2 NV1 NV2 X",
	)
}

// loc reads "region/zone/network-group"; missing or "-" parts are unknown.
func loc(s string) Location {
	p := strings.Split(s, "/")
	for len(p) < 3 {
		p = append(p, "")
	}
	for i := range p {
		if p[i] == "-" {
			p[i] = ""
		}
	}
	return Location{Region: p[0], Zone: p[1], NetworkGroup: p[2]}
}

// wk is a worker with gpus GPUs and no link data, free ones the lowest
// indices, running one task when not all are free.
func wk(id, where, torch string, gpus, free int) Worker {
	w := Worker{ID: id, Location: loc(where), TorchVersion: torch, GPUs: gpus, Free: AllDevices(free), FreeMemoryMiB: int64(free) * 80 << 10}
	if free < gpus {
		w.RunningTasks = 1
	}
	return w
}

// adrZones are ADR-0021's benchmark fleet: five zones in two regions.
var adrZones = []Location{
	{Region: "europe-west1", Zone: "europe-west1-b"},
	{Region: "europe-west1", Zone: "europe-west1-c"},
	{Region: "europe-west1", Zone: "europe-west1-d"},
	{Region: "europe-west4", Zone: "europe-west4-a"},
	{Region: "europe-west4", Zone: "europe-west4-b"},
}

// adrFleet is n eight-GPU HGX H100 workers (each with its own matrix, as
// separate probes give), spread round robin over adrZones, every other one
// busy on all its GPUs.
func adrFleet(t testing.TB, n int) []Worker {
	ws := make([]Worker, n)
	for i := range ws {
		z := adrZones[i%len(adrZones)]
		w := Worker{
			ID: fmt.Sprintf("w%05d", i),
			// Fresh strings, as decoding each worker's facts gives: no
			// comparison may shortcut on shared pointers.
			Location:        Location{Region: strings.Clone(z.Region), Zone: strings.Clone(z.Zone)},
			LocationTrusted: true,
			TorchVersion:    strings.Clone("2.5.1"),
			Matrix:          hgxH100(t),
			GPUs:            8,
			Free:            AllDevices(8),
			FreeMemoryMiB:   8 * 80 << 10,
		}
		if i%2 == 1 {
			w.Free, w.FreeMemoryMiB, w.RunningTasks = 0, 0, 1
		}
		ws[i] = w
	}
	return ws
}

// ids lists the placed workers in node-rank order.
func ids(d Decision) []string {
	out := make([]string, len(d.Workers))
	for i, p := range d.Workers {
		out[i] = p.Worker
	}
	return out
}

package placement

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/topology"
	"github.com/gpulayer/gpulayer/topology/topotest"
)

// Helpers that build fleets for the placement tests and benchmarks.

// hgxH100 is the recorded HGX H100: eight GPUs, every pair NV18.
func hgxH100(t testing.TB) *topology.Matrix {
	return topotest.MustParse(t, "hgx-h100-8x-nv18-gpunumaid-nonic.txt")
}

// dgx1V100 is the recorded DGX-1: the NVLink hybrid cube mesh (NV1 and NV2
// inside each half, SYS across).
func dgx1V100(t testing.TB) *topology.Matrix {
	return topotest.MustParse(t, "dgx1-v100-8x-nv1-nv2-mlx5-driver440.txt")
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
	w := Worker{ID: id, Location: loc(where), TorchVersion: torch, GPUs: gpus, Free: topology.AllDevices(free), FreeMemoryMiB: int64(free) * 80 << 10}
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
	text := topotest.Recording(t, "hgx-h100-8x-nv18-gpunumaid-nonic.txt")
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
			Matrix:          mustParseText(t, text),
			GPUs:            8,
			Free:            topology.AllDevices(8),
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

func mustParseText(t testing.TB, text string) *topology.Matrix {
	m, err := topology.ParseSMI(text)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

package placement

import (
	"fmt"
	"testing"

	"github.com/gpulayer/gpulayer/internal/threadcpu"
	"github.com/gpulayer/gpulayer/topology"
)

// BenchmarkSchedule places an 8-node, 8-GPU-per-node job on ADR-0021's
// benchmark fleet (5 zones in 2 regions, every other worker busy) with the
// default policy (prefer), and reports the span of the chosen group with
// locality prefer and with locality any, as ADR-0021 did.
func BenchmarkSchedule(b *testing.B) {
	for _, n := range []int{30, 120, 500, 2000, 10000} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			ws := adrFleet(b, n)
			job := Job{Name: "train", Nodes: 8, GPUsPerNode: 8}
			b.ReportAllocs()
			threadcpu.Loop(b, func() { Schedule(job, ws, Policy{}) })
			// After the loop: b.Loop and ResetTimer drop metrics reported
			// before it.
			for _, p := range []struct {
				name   string
				policy Policy
			}{{"prefer", Policy{}}, {"any", Policy{GroupLocality: LocalityAny}}} {
				d := Schedule(job, ws, p.policy)
				if d.Status != StatusPlaced {
					b.Fatalf("%s: %s", p.name, d.Summary)
				}
				z, r := span(d)
				b.ReportMetric(float64(z), p.name+"-zones")
				b.ReportMetric(float64(r), p.name+"-regions")
			}
		})
	}
}

// BenchmarkScheduleWithoutMatrices is BenchmarkSchedule on the same fleet
// with no link data, as ADR-0021's benchmark had: the cost of locality and
// buckets alone, without GPU pick tie-breaks.
func BenchmarkScheduleWithoutMatrices(b *testing.B) {
	for _, n := range []int{30, 120, 500, 2000, 10000} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			ws := adrFleet(b, n)
			for i := range ws {
				ws[i].Matrix = nil
			}
			job := Job{Name: "train", Nodes: 8, GPUsPerNode: 8}
			b.ReportAllocs()
			threadcpu.Loop(b, func() { Schedule(job, ws, Policy{}) })
		})
	}
}

// BenchmarkSchedulePolicies is BenchmarkSchedule's fleet (ADR-0021's: 5
// zones in 2 regions, every other worker busy) and 8-node job under the
// policies of Placement II, alone and all together:
//
//   - spread4 and binpack: 4 GPUs per node, the idle workers with 8, 6 or 4
//     GPUs free, so that binpack's key differs between them (spread4 is the
//     same job and fleet under the default rank: the cost of picking 4 of
//     8 GPUs, which binpack shares);
//   - slices: pairs by zone, the job at region level (group_locality
//     region), so that zones are counted in whole pairs;
//   - compatible: torch, cuda_driver and gpu_model, every third worker on
//     another driver;
//   - mix: binpack, slices and compatible at once, 4 GPUs per node;
//   - racks and racks-mix: the fleet with 4 network groups per zone (20
//     cells, so prefer starts at network_group), under the default policy
//     and under mix with pairs by network group.
func BenchmarkSchedulePolicies(b *testing.B) {
	compat := []string{CompatTorch, CompatCUDADriver, CompatGPUModel}
	zonePairs := &Slice{Nodes: 2, Locality: LocalityZone}
	cases := []struct {
		name   string
		gpus   int
		racks  bool
		policy Policy
	}{
		{"spread4", 4, false, Policy{}},
		{"binpack", 4, false, Policy{Rank: RankBinpack}},
		{"slices", 8, false, Policy{GroupLocality: LocalityRegion, Slice: zonePairs}},
		{"compatible", 8, false, Policy{Compatible: compat}},
		{"mix", 4, false, Policy{Rank: RankBinpack, GroupLocality: LocalityRegion, Slice: zonePairs, Compatible: compat}},
		{"racks", 8, true, Policy{}},
		{"racks-mix", 4, true, Policy{Rank: RankBinpack, Slice: &Slice{Nodes: 2, Locality: LocalityNetworkGroup}, Compatible: compat}},
	}
	for _, c := range cases {
		for _, n := range []int{500, 10000} {
			b.Run(fmt.Sprintf("%s/workers=%d", c.name, n), func(b *testing.B) {
				ws := policyFleet(b, n, c.racks)
				job := Job{Name: "train", Nodes: 8, GPUsPerNode: c.gpus}
				if d := Schedule(job, ws, c.policy); d.Status != StatusPlaced {
					b.Fatal(d.Summary)
				}
				b.ReportAllocs()
				threadcpu.Loop(b, func() { Schedule(job, ws, c.policy) })
			})
		}
	}
}

// policyFleet is adrFleet with two CUDA drivers (every third worker on the
// older) and the idle workers' free GPUs varied (8, 6 or 4); with racks,
// also 4 network groups per zone.
func policyFleet(b testing.TB, n int, racks bool) []Worker {
	ws := adrFleet(b, n)
	for i := range ws {
		w := &ws[i]
		if racks {
			w.Location.NetworkGroup = fmt.Sprintf("rack-%d", (i/len(adrZones))%4)
		}
		w.CUDADriver, w.GPUModel = "550.54.15", "NVIDIA H100 80GB HBM3"
		if i%3 == 0 {
			w.CUDADriver = "535.104.05"
		}
		if w.Free != 0 {
			free := []int{8, 6, 4}[(i/2)%3]
			w.Free = topology.AllDevices(free)
			w.FreeMemoryMiB = int64(free) * 80 << 10
		}
	}
	return ws
}

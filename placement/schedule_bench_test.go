package placement

import (
	"fmt"
	"testing"

	"github.com/gpulayer/gpulayer/internal/threadcpu"
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

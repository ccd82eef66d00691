package topology

import (
	"fmt"
	"testing"
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
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				Schedule(job, ws, Policy{})
			}
		})
	}
}

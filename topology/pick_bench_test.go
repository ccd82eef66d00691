package topology

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/gpulayer/gpulayer/internal/threadcpu"
)

// BenchmarkPickDevices times one PickDevices call (set-up included) per
// layout, k, and free mask: all GPUs free, and half busy (the even indices).
func BenchmarkPickDevices(b *testing.B) {
	for _, l := range loadLayouts(b) {
		n := l.m.GPUs()
		masks := []struct {
			name string
			free DeviceSet
		}{{"all", AllDevices(n)}, {"half", AllDevices(n) & 0xAAAAAAAAAAAAAAAA}}
		for k := 1; k <= n; k++ {
			for _, mask := range masks {
				if k > mask.free.Len() {
					continue
				}
				b.Run(fmt.Sprintf("%s/k=%d/free=%s", l.name, k, mask.name), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if _, err := PickDevices(l.m, mask.free, k, PickOptions{}); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// BenchmarkPreparedPickSet times the allocation-free search alone, on a
// matrix prepared once.
func BenchmarkPreparedPickSet(b *testing.B) {
	for _, l := range loadLayouts(b) {
		p, err := PrepareMatrix(l.m)
		if err != nil {
			b.Fatal(err)
		}
		n := l.m.GPUs()
		for k := 1; k <= n; k++ {
			b.Run(fmt.Sprintf("%s/k=%d/free=all", l.name, k), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.PickSet(AllDevices(n), k, PickOptions{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkPickSetRandom16 times the search on unstructured 16-GPU
// matrices (random links from a few kinds, random NUMA sets): the hard case
// for the bounds, unlike real layouts, where interchangeable GPUs and
// NVLink islands cut the search short.
func BenchmarkPickSetRandom16(b *testing.B) {
	rng := rand.New(rand.NewSource(3))
	for r := 0; r < 4; r++ {
		m := randomMatrix(rng, 16)
		p, err := PrepareMatrix(m)
		if err != nil {
			b.Fatal(err)
		}
		for _, k := range []int{3, 6, 8, 10, 13} {
			b.Run(fmt.Sprintf("matrix=%d/k=%d", r, k), func(b *testing.B) {
				for b.Loop() {
					if _, err := p.PickSet(AllDevices(16), k, PickOptions{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkPickDevicesWorstCase times picks on machines no real layout
// resembles, where the search runs out of PickBudget: issue 7's random
// 64-GPU matrix of three link kinds, and random matrices of 6, 16 and 260
// kinds (the last the costliest node for the total bound). It reports the
// thread's CPU time per pick and whether the pick was proven optimal
// (optimal: 1), so the cost of a pick that uses up its budget is read off
// directly.
func BenchmarkPickDevicesWorstCase(b *testing.B) {
	cases := []struct {
		name string
		m    *Matrix
	}{
		{"random-64-3kinds", hostileMatrix()},
		{"kinds=6/n=64", manyLinkKindsMatrix(rand.New(rand.NewSource(64006)), 64, 6)},
		{"kinds=16/n=64", manyLinkKindsMatrix(rand.New(rand.NewSource(64016)), 64, 16)},
		{"kinds=260/n=48", manyLinkKindsMatrix(rand.New(rand.NewSource(48260)), 48, 260)},
	}
	for _, c := range cases {
		n := c.m.GPUs()
		for _, k := range []int{8, 16, 20, 24, 28, 32, 36, 48} {
			if k > n {
				continue
			}
			b.Run(fmt.Sprintf("%s/k=%d", c.name, k), func(b *testing.B) {
				optimal := false
				threadcpu.Loop(b, func() {
					p, err := PickDevices(c.m, AllDevices(n), k, PickOptions{})
					if err != nil {
						b.Fatal(err)
					}
					optimal = p.Optimal
				})
				b.ReportMetric(map[bool]float64{false: 0, true: 1}[optimal], "optimal")
			})
		}
	}
}

package topology

import (
	"fmt"
	"testing"
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

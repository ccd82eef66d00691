// Package stats is what the benchmark programs summarize their rounds
// with: medians, minimums and the machine's load while they ran.
package stats

import (
	"os"
	"sort"
	"strconv"
	"strings"
)

// Median is the median of f over rs, 0 for none.
func Median[T any](rs []T, f func(T) float64) float64 {
	if len(rs) == 0 {
		return 0
	}
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// Min is the least of f over rs, 0 for none.
func Min[T any](rs []T, f func(T) float64) float64 {
	if len(rs) == 0 {
		return 0
	}
	m := f(rs[0])
	for _, r := range rs[1:] {
		m = min(m, f(r))
	}
	return m
}

// Load1 is the 1-minute load average, or 0 where /proc does not say.
func Load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _, _ := strings.Cut(string(b), " ")
	v, _ := strconv.ParseFloat(f, 64)
	return v
}

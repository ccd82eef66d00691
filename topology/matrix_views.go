package topology

import (
	"strconv"
	"strings"
)

// String writes the set as a Linux list: "0,5-11". A nil (unknown) set is
// "".
func (s NUMASet) String() string { return FormatList(s) }

// FormatList writes sorted numbers as a Linux list, runs as ranges:
// [0 5 6 7] is "0,5-7".
func FormatList(sorted []int) string {
	var b strings.Builder
	for i := 0; i < len(sorted); {
		j := i
		for j+1 < len(sorted) && sorted[j+1] == sorted[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(sorted[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(sorted[j]))
		}
		i = j + 1
	}
	return b.String()
}

// NVLinkIslands are the groups of two or more GPUs joined, directly or
// through each other, by NVLink, in order of their lowest GPU.
func (m *Matrix) NVLinkIslands() []DeviceSet {
	n := m.GPUs()
	var seen DeviceSet
	var out []DeviceSet
	for i := 0; i < n && i < MaxGPUs; i++ {
		if seen.Has(i) {
			continue
		}
		island := DeviceSetOf(i)
		queue := []int{i}
		for len(queue) > 0 {
			a := queue[0]
			queue = queue[1:]
			for b := 0; b < n && b < MaxGPUs && b < len(m.Links[a]); b++ {
				if m.Links[a][b].Kind == LinkNV && !island.Has(b) {
					island |= DeviceSetOf(b)
					queue = append(queue, b)
				}
			}
		}
		seen |= island
		if island.Len() > 1 {
			out = append(out, island)
		}
	}
	return out
}

// NICLocal reports whether GPU i has a NIC at PIX or PXB, the GPUs that
// multi-node jobs prefer.
func (m *Matrix) NICLocal(i int) bool {
	return i >= 0 && i < len(m.NICLinks) && i < MaxGPUs && nicLocalOf(m).Has(i)
}

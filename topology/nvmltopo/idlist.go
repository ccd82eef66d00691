package nvmltopo

import (
	"math/bits"
	"strconv"
	"strings"
)

// maskIDs lists the bits set in a bitmask as NVML returns CPU and NUMA node
// sets: an array of words, bit b of word w standing for id w·UintSize+b.
func maskIDs(mask []uint) []int {
	var ids []int
	for w, word := range mask {
		for word != 0 {
			b := bits.TrailingZeros(word)
			ids = append(ids, w*bits.UintSize+b)
			word &^= 1 << uint(b)
		}
	}
	return ids
}

// formatIDList writes sorted ids as nvidia-smi and Linux cpulists do: runs of
// two or more as "first-last", joined by commas ("0-31,64-95"); "" for none.
func formatIDList(ids []int) string {
	var sb strings.Builder
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(ids[i]))
		if j > i {
			sb.WriteByte('-')
			sb.WriteString(strconv.Itoa(ids[j]))
		}
		i = j + 1
	}
	return sb.String()
}

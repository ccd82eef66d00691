package nvmltopo

import "math/bits"

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

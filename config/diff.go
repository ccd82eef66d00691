package config

import "sort"

// diffOp is one line of an edit script: kept (' '), deleted ('-') or
// inserted ('+'), with its place in both texts.
type diffOp struct {
	kind         byte // ' ', '-', '+'
	text         string
	aLine, bLine int // 0-based position in a and b before this op
}

// maxExactGap bounds the table of the exact longest-common-subsequence
// diff run between two anchors (entries of 4 bytes: 4 MiB at most).
const maxExactGap = 1 << 20

// diffLines is an edit script from a to b in O(n log n) time and linear
// memory, whatever the inputs (the quadratic table it replaces took 4 GB
// for a 32 000-line file). As in Go's own diff for gofmt -d: lines that
// occur exactly once in each text are matched in the longest order that
// keeps both increasing (patience sorting), and each gap between two such
// anchors keeps its common first and last lines; what remains of a gap is
// diffed exactly when small, else deleted and inserted whole.
func diffLines(a, b []string) []diffOp {
	var ops []diffOp
	i, j := 0, 0
	for _, p := range append(uniqueAnchors(a, b), [2]int{len(a), len(b)}) {
		ops = diffGap(ops, a, b, i, p[0], j, p[1])
		if p[0] < len(a) {
			ops = append(ops, diffOp{' ', a[p[0]], p[0], p[1]})
		}
		i, j = p[0]+1, p[1]+1
	}
	return ops
}

// uniqueAnchors returns the pairs (i, j) with a[i] == b[j] occurring once
// in a and once in b, the longest run of them increasing in both i and j.
func uniqueAnchors(a, b []string) [][2]int {
	type seen struct{ inA, inB, at int }
	count := make(map[string]*seen, len(a))
	for _, l := range a {
		if c := count[l]; c != nil {
			c.inA++
		} else {
			count[l] = &seen{inA: 1}
		}
	}
	for j, l := range b {
		if c := count[l]; c != nil {
			c.inB++
			c.at = j
		}
	}
	var pairs [][2]int
	for i, l := range a {
		if c := count[l]; c.inA == 1 && c.inB == 1 {
			pairs = append(pairs, [2]int{i, c.at})
		}
	}
	return longestIncreasing(pairs)
}

// longestIncreasing picks from pairs, sorted by their first element, the
// longest subsequence whose second elements increase (patience sorting:
// O(k log k)).
func longestIncreasing(pairs [][2]int) [][2]int {
	tops := []int{}                 // index in pairs of the top card of each pile
	prev := make([]int, len(pairs)) // the card below each one, in the pile before
	for k, p := range pairs {
		pile := sort.Search(len(tops), func(t int) bool { return pairs[tops[t]][1] > p[1] })
		prev[k] = -1
		if pile > 0 {
			prev[k] = tops[pile-1]
		}
		if pile == len(tops) {
			tops = append(tops, k)
		} else {
			tops[pile] = k
		}
	}
	if len(tops) == 0 {
		return nil
	}
	out := make([][2]int, len(tops))
	for k, n := tops[len(tops)-1], len(tops)-1; k >= 0; k, n = prev[k], n-1 {
		out[n] = pairs[k]
	}
	return out
}

// diffGap appends the edit script of a[i0:i1] against b[j0:j1].
func diffGap(ops []diffOp, a, b []string, i0, i1, j0, j1 int) []diffOp {
	for i0 < i1 && j0 < j1 && a[i0] == b[j0] {
		ops = append(ops, diffOp{' ', a[i0], i0, j0})
		i0, j0 = i0+1, j0+1
	}
	tail := 0
	for i1-tail > i0 && j1-tail > j0 && a[i1-tail-1] == b[j1-tail-1] {
		tail++
	}
	n, m := i1-tail-i0, j1-tail-j0
	if n > 0 && m > 0 && n*m <= maxExactGap {
		ops = exactDiff(ops, a[i0:i0+n], b[j0:j0+m], i0, j0)
	} else {
		for k := range n {
			ops = append(ops, diffOp{'-', a[i0+k], i0 + k, j0})
		}
		for k := range m {
			ops = append(ops, diffOp{'+', b[j0+k], i0 + n, j0 + k})
		}
	}
	for k := range tail {
		ops = append(ops, diffOp{' ', a[i1-tail+k], i1 - tail + k, j1 - tail + k})
	}
	return ops
}

// exactDiff appends a minimal edit script of a against b (offsets i0, j0
// in the whole texts), from the longest-common-subsequence table.
func exactDiff(ops []diffOp, a, b []string, i0, j0 int) []diffOp {
	n, m := len(a), len(b)
	w := m + 1
	lcs := make([]int32, (n+1)*w)
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
			} else {
				lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			ops = append(ops, diffOp{' ', a[i], i0 + i, j0 + j})
			i, j = i+1, j+1
		case i < n && (j == m || lcs[(i+1)*w+j] >= lcs[i*w+j+1]):
			ops = append(ops, diffOp{'-', a[i], i0 + i, j0 + j})
			i++
		default:
			ops = append(ops, diffOp{'+', b[j], i0 + i, j0 + j})
			j++
		}
	}
	return ops
}

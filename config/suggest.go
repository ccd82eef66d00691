package config

import (
	"fmt"
	"sort"
	"strings"
)

// didYouMean returns ` Did you mean "x"?` for the candidate closest to given,
// or "" when none is close enough to be a plausible typo. Ties go to the
// candidate that sorts first, so the sentence is the same on every run.
func didYouMean(given string, candidates []string) string {
	best, bestDist := "", -1
	sorted := append([]string(nil), candidates...)
	sort.Strings(sorted)
	for _, c := range sorted {
		d := levenshtein(given, c)
		if bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	// A third of the name, at least one edit: "tigth" finds "tight",
	// "x" does not find "nodes".
	limit := len(given) / 3
	if limit < 2 {
		limit = 2
	}
	if bestDist < 0 || bestDist > limit || bestDist >= len(given) {
		return ""
	}
	return fmt.Sprintf(" Did you mean %q?", best)
}

// levenshtein is the edit distance between a and b, counted in runes.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// quotedList renders names as `"a", "b" or "c"` for a detail sentence.
func quotedList(names []string) string { return joinQuoted(names, "or") }

// quotedAndList renders names as `"a", "b" and "c"`.
func quotedAndList(names []string) string { return joinQuoted(names, "and") }

func joinQuoted(names []string, conjunction string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	switch len(q) {
	case 0:
		return ""
	case 1:
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " " + conjunction + " " + q[len(q)-1]
}

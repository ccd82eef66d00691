package config

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

// checkScript fails unless ops turns a into b: kept and deleted lines
// spell a, kept and inserted ones spell b, and every op's positions are
// where it stands in both.
func checkScript(t *testing.T, a, b []string, ops []diffOp) {
	t.Helper()
	var gotA, gotB []string
	for _, op := range ops {
		if op.aLine != len(gotA) || op.bLine != len(gotB) {
			t.Fatalf("op %c %q at (%d, %d), want (%d, %d)", op.kind, op.text, op.aLine, op.bLine, len(gotA), len(gotB))
		}
		switch op.kind {
		case ' ':
			gotA, gotB = append(gotA, op.text), append(gotB, op.text)
		case '-':
			gotA = append(gotA, op.text)
		case '+':
			gotB = append(gotB, op.text)
		}
	}
	if strings.Join(gotA, "\n") != strings.Join(a, "\n") || strings.Join(gotB, "\n") != strings.Join(b, "\n") {
		t.Fatalf("script does not rebuild the texts:\na   %q\ngot %q\nb   %q\ngot %q", a, gotA, b, gotB)
	}
}

func kept(ops []diffOp) int {
	n := 0
	for _, op := range ops {
		if op.kind == ' ' {
			n++
		}
	}
	return n
}

func TestDiffLinesRebuildsBothTexts(t *testing.T) {
	tests := []struct{ a, b string }{
		{"", ""},
		{"a", ""},
		{"", "a"},
		{"a b c", "a b c"},
		{"a b c", "c b a"},
		{"} } } x } }", "} } y } }"},
		{"a x b x c x", "x a x b x c"},
	}
	for _, tc := range tests {
		a, b := strings.Fields(tc.a), strings.Fields(tc.b)
		checkScript(t, a, b, diffLines(a, b))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		a, b := randomLines(rng, rng.IntN(40)), randomLines(rng, rng.IntN(40))
		checkScript(t, a, b, diffLines(a, b))
	}
}

func randomLines(rng *rand.Rand, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = string(rune('a' + rng.IntN(6)))
	}
	return out
}

func TestDiffLinesKeepsEverythingButAChangedLine(t *testing.T) {
	// Formatting changes a few lines among many that repeat ("}", "").
	var a []string
	for i := range 200 {
		a = append(a, fmt.Sprintf("job \"j%d\" {", i), "  nodes = 1", "}", "")
	}
	b := append([]string(nil), a...)
	b[401] = "  nodes   = 1"
	ops := diffLines(a, b)
	checkScript(t, a, b, ops)
	if kept(ops) != len(a)-1 {
		t.Errorf("kept %d lines, want %d", kept(ops), len(a)-1)
	}
}

// TestUnifiedDiffOfALargeFileNeedsLinearMemory diffs 8000 lines that
// all change (no line is common, the worst case) and half of which change.
// The quadratic table took 256 MB here (4 GB at 32 000 lines).
func TestUnifiedDiffOfALargeFileNeedsLinearMemory(t *testing.T) {
	const n = 8000
	var old, allNew, halfNew strings.Builder
	for i := range n {
		fmt.Fprintf(&old, "attr_%d = %d\n", i, i)
		fmt.Fprintf(&allNew, "  attr_%d = %d\n", i, i)
		if i%2 == 0 {
			fmt.Fprintf(&halfNew, "attr_%d = %d\n", i, i)
		} else {
			fmt.Fprintf(&halfNew, "attr_%d   = %d\n", i, i)
		}
	}
	for name, changed := range map[string]string{"every line": allNew.String(), "every other line": halfNew.String()} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		d := UnifiedDiff("big.hcl", []byte(old.String()), []byte(changed))
		runtime.ReadMemStats(&after)
		if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 32<<20 {
			t.Errorf("%s: diffing %d lines allocated %d MB", name, n, allocated>>20)
		}
		if strings.Count(d, "\n+") < n/2 {
			t.Errorf("%s: diff has too few insertions", name)
		}
	}
}

func BenchmarkUnifiedDiff32000Lines(b *testing.B) {
	var old, changed strings.Builder
	for i := range 32000 {
		fmt.Fprintf(&old, "attr_%d = %d\n", i, i)
		if i%3 == 0 {
			fmt.Fprintf(&changed, "attr_%d   = %d\n", i, i)
		} else {
			fmt.Fprintf(&changed, "attr_%d = %d\n", i, i)
		}
	}
	a, c := []byte(old.String()), []byte(changed.String())
	for b.Loop() {
		UnifiedDiff("big.hcl", a, c)
	}
}

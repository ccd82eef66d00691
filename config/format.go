package config

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
)

// Format returns src in canonical layout (hclwrite's, as terraform fmt).
// A file that does not parse is not formatted: the diagnostics say where
// it is broken, since reformatting broken input could move code around.
// Like Load, it refuses a text nested deeper than the parser's stack
// allows, and reports at most 20 diagnostics and a count of the rest.
func Format(src []byte, filename string) ([]byte, hcl.Diagnostics) {
	if off := nestingTooDeep(src, syntaxConfig); off >= 0 {
		return nil, hcl.Diagnostics{nestingDiagnostic(src, off, filename, filename)}
	}
	_, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		sortDiagnostics(diags)
		return nil, capPerFile(diags)
	}
	return hclwrite.Format(src), nil
}

// UnifiedDiff is a unified diff of two texts, with three lines of context,
// headed by the file name: what `gpulayer fmt --diff` prints. It returns ""
// when they are equal.
func UnifiedDiff(name string, old, new []byte) string {
	if bytes.Equal(old, new) {
		return ""
	}
	a, b := splitLines(old), splitLines(new)
	ops := diffLines(a, b)
	var out strings.Builder
	fmt.Fprintf(&out, "--- old/%s\n+++ new/%s\n", name, name)
	const context = 3
	// Walk the edit script, emitting hunks around runs of changes.
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(0, i-context)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			// A run of equal lines longer than twice the context ends the hunk.
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*context {
				end = min(end+context, len(ops))
				break
			}
			end = run
		}
		aStart, bStart, aLen, bLen := ops[start].aLine, ops[start].bLine, 0, 0
		for _, op := range ops[start:end] {
			if op.kind != '+' {
				aLen++
			}
			if op.kind != '-' {
				bLen++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen))
		for _, op := range ops[start:end] {
			out.WriteByte(op.kind)
			out.WriteString(op.text)
			out.WriteByte('\n')
		}
		i = end
	}
	return out.String()
}

func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

func splitLines(b []byte) []string {
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

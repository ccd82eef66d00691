package config

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// A literal written out is decoded without evaluating it (literal): its
// value must be the one evaluating gives, byte for byte, and everything
// else (interpolation, references, calls, null) must take the general
// path, where references are checked and diagnostics made.
func TestLiteralIsTheValueEvaluationGives(t *testing.T) {
	for _, src := range []string{
		`"10.0.0.1"`, `""`, `"caf\u0065\u0301"`, `"e\u0301"`, `"tab\tand \"quotes\""`, `"$${not} %%{this}"`,
		`8`, `0.5`, `1e3`, `true`, `false`,
	} {
		expr, diags := hclsyntax.ParseExpression([]byte(src), "t.hcl", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("%s: %s", src, diags)
		}
		got, ok := literal(expr)
		if !ok {
			t.Errorf("%s: not taken as a literal", src)
			continue
		}
		want, diags := expr.Value(nil)
		if diags.HasErrors() {
			t.Fatalf("%s: %s", src, diags)
		}
		if !got.RawEquals(want) {
			t.Errorf("%s: literal %#v, evaluated %#v", src, got, want)
		}
	}
	for _, src := range []string{
		`"${var.x}"`, `"a${"b"}"`, `"${"b"}"`, `"%{if true}x%{endif}"`, `var.x`, `null`, `upper("x")`, `[1]`, `{a = 1}`, `-1`,
	} {
		expr, diags := hclsyntax.ParseExpression([]byte(src), "t.hcl", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("%s: %s", src, diags)
		}
		if v, ok := literal(expr); ok {
			t.Errorf("%s: taken as the literal %#v", src, v)
		}
	}
}

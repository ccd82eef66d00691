package config

import (
	"io"
	"path/filepath"
	"testing"
)

// BenchmarkLoadQuickstart measures a whole Load of the quickstart: reading
// and parsing three files, variables, locals, every block and the checks.
func BenchmarkLoadQuickstart(b *testing.B) {
	dir := filepath.Join("..", "examples", "quickstart")
	for b.Loop() {
		if _, diags := Load(dir, LoadOptions{}); diags.HasErrors() {
			b.Fatal(diags)
		}
	}
}

// BenchmarkRenderThreeMistakes measures rendering three diagnostics with
// their source lines.
func BenchmarkRenderThreeMistakes(b *testing.B) {
	cfg, diags := Load(filepath.Join(fixtures, "three_mistakes"), LoadOptions{})
	for b.Loop() {
		if err := WriteDiagnostics(io.Discard, diags, cfg.Files, RenderOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadChainOfLocals loads 5000 locals, each referring to the next
// one declared: evaluation order must cost the references, not the square
// of the number of locals (before, every pass over the pending locals
// resolved one and rebuilt the object of all of them).
func BenchmarkLoadChainOfLocals(b *testing.B) {
	dir := b.TempDir()
	writeFile(b, dir, "main.hcl", chainOfLocals(5000))
	for b.Loop() {
		if _, diags := Load(dir, LoadOptions{}); diags.HasErrors() {
			b.Fatal(diags)
		}
	}
}

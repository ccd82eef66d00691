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

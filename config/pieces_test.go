package config

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Parsed in pieces, every configuration gpulayer has (fixtures, examples,
// the formatter's inputs), cut at every top-level block, gives the tree
// parsing it whole gives, or is refused and then parsed whole (a nested
// block's "}" at the start of a line cuts it inside a block); and a file
// whose "}" lines are inside heredocs or comments, has a top-level
// argument or a syntax error, is refused.
func TestParsingInPiecesGivesTheWholeFilesTreeOrIsRefused(t *testing.T) {
	var paths []string
	for _, pattern := range []string{"../testdata/config/*/*.hcl", "../examples/*/*.hcl", "testdata/fmt/*.hcl", "testdata/fuzz/*/*.hcl"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, m...)
	}
	if len(paths) < 20 {
		t.Fatalf("only %d configurations found", len(paths))
	}
	pieced, split := 0, 0
	for _, path := range paths {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if samePieces(t, path, src) {
			pieced++
			split += splitBlocks(src)
		}
	}
	if pieced < len(paths)/2 {
		t.Errorf("only %d of %d configurations were parsed in pieces", pieced, len(paths))
	}
	// In pieces of 1 byte, every block over two lines is split.
	if split < len(paths) {
		t.Errorf("only %d blocks were split in %d configurations", split, len(paths))
	}
	// Blocks with no line between them, a "}" line with trailing blanks
	// and CRLF, a block of one line: cut, and the same.
	for _, src := range []string{
		"fleet \"f\" {\n}\nfleet \"g\" {\n  region = \"r\"\n}\n",
		// Split blocks: after a whole block, with arguments after nested
		// blocks, at the end of the file, and followed by a comment.
		"policy \"p\" { rank = \"spread\" }\n\nfleet \"g\" {\n  host \"a\" {\n    zone = \"z\"\n  }\n  region = \"r\"\n  host \"b\" {\n  }\n}\n",
		"fleet \"f\" {\r\n  host \"a\" {\r\n  }\r\n}\r\n# end\n",
		"fleet \"f\" {\r\n  region = \"r\"\r\n} \t\r\n\r\npolicy \"p\" { rank = \"spread\" }\nfleet \"g\" {\n}",
	} {
		if !samePieces(t, src, []byte(src)) {
			t.Errorf("%q: not parsed in pieces", src)
		}
	}
	refused := map[string]string{
		"a heredoc holding a block's end":        "locals {\n  x = <<EOT\n}\nfleet \"f\" {\n}\nEOT\n}\n",
		"a comment holding a block's end":        "/*\nfleet \"f\" {\n}\n*/\nfleet \"g\" {\n}\n",
		"a top-level argument":                   "fleet \"f\" {\n}\nx = 1\nfleet \"g\" {\n}\nx = 2\n",
		"a syntax error after a cut":             "fleet \"f\" {\n}\nfleet \"g\" {\n  host \"a\" { address = }\n}\n",
		"an unclosed last block":                 "fleet \"f\" {\n}\nfleet \"g\" {\n",
		"an argument set twice in a split block": "fleet \"f\" {\n  region = \"r\"\n  host \"a\" {\n  }\n  region = \"s\"\n}\n",
		"a nested block's end in a heredoc":      "fleet \"f\" {\n  x = <<EOT\n  }\nEOT\n}\n",
		// A comment after the "{" leaves the block's header unended.
		"a comment after a split block's \"{\"": "fleet \"g\" { # hosts\n  host \"a\" {\n  }\n}\n",
		"a split block's header in a comment":   "/* fleet \"f\" {\n*/\nfleet \"g\" {\n  host \"a\" {\n  }\n}\n",
	}
	for name, src := range refused {
		if _, ok := parseInPieces([]byte(src), "main.hcl", 1, nil); ok {
			t.Errorf("%s: parsed in pieces", name)
		}
	}
}

// splitBlocks is how many top-level blocks of src are split when it is
// cut in pieces of 1 byte.
func splitBlocks(src []byte) int {
	n := 0
	for _, p := range cutPieces(src, "main.hcl", 1) {
		if p.kind == pieceHeader {
			n++
		}
	}
	return n
}

// samePieces checks that src parsed in pieces of one top-level block each
// is src parsed whole, and says whether it was parsed in pieces.
func samePieces(t *testing.T, name string, src []byte) bool {
	t.Helper()
	pieces, ok := parseInPieces(src, name, 1, nil)
	if !ok {
		// Always safe: the file is then parsed whole.
		return false
	}
	whole, diags := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
	if len(diags) > 0 {
		t.Errorf("%s: parsed in pieces, but parsed whole it has diagnostics: %s", name, diags.Error())
	}
	if !reflect.DeepEqual(pieces.Body, whole.Body) {
		t.Errorf("%s: the tree parsed in pieces differs from the whole file's", name)
	}
	return true
}

// A configuration large enough to be parsed in pieces loads like one that
// is not, and its diagnostics still name the block they are in.
func TestALargeConfigurationLoadsFromPiecesAndRendersItsDiagnostics(t *testing.T) {
	var src strings.Builder
	src.WriteString("policy \"p\" {\n  group_locality = \"zone\"\n}\n\n")
	for f := 0; src.Len() < 2*piecesFrom; f++ {
		fmt.Fprintf(&src, "fleet \"f%d\" {\n  region = \"r\"\n", f)
		for h := range 50 {
			fmt.Fprintf(&src, "  host \"h%d-%d\" {\n    address = \"10.0.%d.%d\"\n    zone    = \"z%d\"\n  }\n", f, h, f%250, h+1, h%2)
		}
		src.WriteString("}\n\n")
	}
	src.WriteString("job \"train\" {\n  policy        = policy.q\n  nodes         = 2\n  gpus_per_node = 8\n  command       = [\"python\", \"train.py\"]\n}\n")
	dir := t.TempDir()
	writeFile(t, dir, "main.hcl", src.String())
	cfg, diags := Load(dir, LoadOptions{})
	if len(diags) != 1 || !strings.Contains(diags[0].Summary, "Unknown policy") {
		t.Fatalf("diagnostics %v, want the unknown policy alone", diags)
	}
	var out bytes.Buffer
	if err := WriteDiagnostics(&out, diags, cfg.Files, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `, in job "train":`) || !strings.Contains(out.String(), "policy.q") {
		t.Errorf("the diagnostic renders without its block or line:\n%s", out.String())
	}
	// Without the mistake, every host is there.
	writeFile(t, dir, "main.hcl", strings.Replace(src.String(), "policy.q", "policy.p", 1))
	cfg, diags = Load(dir, LoadOptions{})
	if len(diags) > 0 {
		t.Fatalf("diagnostics: %v", diags)
	}
	names := map[string]bool{}
	for _, h := range cfg.Hosts() {
		names[h.Name] = true
	}
	last := fmt.Sprintf("h%d-49", len(cfg.Fleets)-1)
	if want := strings.Count(src.String(), "  host \""); len(names) != want || !names["h0-0"] || !names[last] {
		t.Errorf("%d hosts loaded, want %d, h0-0 and %s among them", len(names), want, last)
	}
}

// FuzzParseInPieces: whatever the text, parsed in pieces it is either
// refused or the tree parsing it whole gives.
func FuzzParseInPieces(f *testing.F) {
	for _, src := range []string{
		"fleet \"f\" {\n}\nfleet \"g\" {\n  region = \"r\"\n}\n",
		// Split blocks: after a whole block, with arguments after nested
		// blocks, at the end of the file, and followed by a comment.
		"policy \"p\" { rank = \"spread\" }\n\nfleet \"g\" {\n  host \"a\" {\n    zone = \"z\"\n  }\n  region = \"r\"\n  host \"b\" {\n  }\n}\n",
		"fleet \"f\" {\r\n  host \"a\" {\r\n  }\r\n}\r\n# end\n",
		"locals {\n  x = <<EOT\n}\nfleet \"f\" {\n}\nEOT\n}\n",
		"/*\nfleet \"f\" {\n}\n*/\nfleet \"g\" {\n}\n",
		"job \"j\" {\n  command = [\"a\", \"${x}\n}\n\"]\n}\njob \"k\" {\n}\n",
	} {
		f.Add([]byte(src))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		if nestingTooDeep(src, syntaxConfig) >= 0 {
			return // refused before parsing, as Load does
		}
		samePieces(t, "main.hcl", src)
	})
}

// A configuration whose fleets are split across pieces, their literal
// hosts taken as they are parsed (literalHosts), loads as it does parsed
// whole: the same hosts, in the same order, with the same diagnostics,
// whatever else the hosts hold (a port, labels, a variable, an address
// that is not one, a name used twice).
func TestLiteralHostsLoadAsTheirBlocksDecode(t *testing.T) {
	var src strings.Builder
	src.WriteString("variable \"zone\" {\n  default = \"z9\"\n}\n\n")
	for f := range 2 {
		fmt.Fprintf(&src, "fleet \"f%d\" {\n  region = \"r%d\"\n  labels = { team = \"t\" }\n", f, f)
		for h := range 1500 {
			fmt.Fprintf(&src, "  host \"h%d-%d\" {\n    address       = \"10.%d.%d.%d\"\n    zone          = \"z%d\"\n    network_group = \"g%d\"\n  }\n", f, h, f, h/250, h%250, h%2, h%8)
			switch h % 100 {
			case 7:
				fmt.Fprintf(&src, "  host \"p%d-%d\" {\n    address = \"10.9.%d.%d:2222\"\n    region  = \"r9\"\n  }\n", f, h, f, h%250)
			case 8:
				fmt.Fprintf(&src, "  host \"l%d-%d\" {\n    address = \"10.8.%d.%d\"\n    labels  = { rack = \"r%d\" }\n  }\n", f, h, f, h%250, h)
			case 9:
				fmt.Fprintf(&src, "  host \"v%d-%d\" {\n    address = \"10.7.%d.%d\"\n    zone    = var.zone\n  }\n", f, h, f, h%250)
			}
		}
		src.WriteString("}\n\n")
	}
	clean := src.String()
	broken := strings.Replace(clean, "\"10.0.1.3\"", "\"10.0.1.3:port\"", 1) +
		"fleet \"f2\" {\n  host \"h0-5\" {\n    address = \"10.6.0.1\"\n  }\n}\n"
	if n := 0; true {
		for _, p := range cutPieces([]byte(clean), "main.hcl", pieceSize(len(clean))) {
			if p.kind == pieceHeader {
				n++
			}
		}
		if n != 2 {
			t.Fatalf("%d fleets split, want 2", n)
		}
	}
	literal := map[*hclsyntax.Body]*literalHost{}
	if _, ok := parseInPieces([]byte(clean), "main.hcl", pieceSize(len(clean)), literal); !ok || len(literal) < 2900 {
		t.Fatalf("parsed in pieces: %v, %d literal hosts", ok, len(literal))
	}
	for name, text := range map[string]string{"clean": clean, "broken": broken} {
		dir := t.TempDir()
		writeFile(t, dir, "main.hcl", text)
		pieces, piecesDiags := Load(dir, LoadOptions{})
		defer func(from int) { piecesFrom = from }(piecesFrom)
		piecesFrom = math.MaxInt
		whole, wholeDiags := Load(dir, LoadOptions{})
		piecesFrom = 32 << 10
		if piecesDiags.Error() != wholeDiags.Error() {
			t.Errorf("%s: diagnostics\n%s\nparsed whole\n%s", name, piecesDiags.Error(), wholeDiags.Error())
		}
		if name == "broken" && len(wholeDiags) != 2 {
			t.Errorf("broken: %d diagnostics, want 2: %s", len(wholeDiags), wholeDiags.Error())
		}
		pieces.Files, whole.Files = nil, nil
		if !reflect.DeepEqual(pieces, whole) {
			t.Errorf("%s: the configuration loaded differs from the one parsed whole", name)
		}
		if len(whole.Hosts()) < 3000 {
			t.Errorf("%s: %d hosts loaded", name, len(whole.Hosts()))
		}
	}
}

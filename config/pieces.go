package config

import (
	"bytes"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// A native-syntax file of at least piecesFrom bytes is parsed in pieces
// (parseInPieces), each a run of whole top-level blocks of about
// pieceBytes, or a quarter of the file where that is less, so that even a
// file of a few hundred hosts has pieces for two parsers; smaller files
// are parsed whole.
const (
	piecesFrom = 32 << 10
	pieceBytes = 64 << 10
	// parsers is how many pieces are parsed at once, at most: each holds
	// its piece's tokens while it parses, so more would raise the peak of
	// memory that parsing in pieces lowers.
	parsers = 2
)

// pieceSize is the size of the pieces a file of n bytes is parsed in.
func pieceSize(n int) int {
	return min(pieceBytes, n/4)
}

// parseInPieces parses a large native-syntax file a run of top-level
// blocks of about size bytes at a time, each piece at its own position in
// the file, up to parsers pieces at once, and joins their blocks into one
// body: what parsing it whole gives, without holding the tokens of the
// whole file at once. The HCL lexer keeps a 96-byte token for every few
// bytes of what it parses, in one slice grown by copying, beside the tree
// it builds: a configuration of 5,000 hosts (0.6 MiB) held 12 MiB of
// tokens at once, and was the plan's peak of memory. Smaller slices are
// also copied less as they grow, and a second core parses while the
// first does (the plan's longest step before placing, with the facts
// document read beside it).
//
// A piece starts after a line that is only "}" (the end of a top-level
// block as gpulayer fmt writes it). Such a line can also be inside a
// heredoc or a comment; the piece before it then ends inside that heredoc
// or comment, which the parser reports. So ok is false, and the file must
// be parsed whole, when any piece has a diagnostic, or a top-level
// argument (the whole file's parse checks those for duplicates across
// pieces). When ok, the pieces parsed cleanly, each ending where the
// whole file's lexer is between top-level items, so their blocks are the
// whole file's.
//
// The file has no Nav: the caller parses it whole again should it have a
// diagnostic to render with the block it is in.
func parseInPieces(src []byte, filename string, size int) (f *hcl.File, ok bool) {
	// The pieces and where each starts in the file; an empty src is one
	// empty piece.
	type piece struct {
		start, end int
		pos        hcl.Pos
		body       *hclsyntax.Body
	}
	var pieces []piece
	pos := hcl.InitialPos
	for start := 0; ; {
		end := pieceEnd(src, start, size)
		pieces = append(pieces, piece{start: start, end: end, pos: pos})
		if end == len(src) {
			break
		}
		pos = hcl.Pos{Line: pos.Line + bytes.Count(src[start:end], []byte("\n")), Column: 1, Byte: end}
		start = end
	}
	// Each parser takes the next piece not yet taken; a piece that is
	// refused stops the others from taking more.
	var next, refused atomic.Int32
	parse := func() {
		for {
			k := int(next.Add(1)) - 1
			if k >= len(pieces) || refused.Load() != 0 {
				return
			}
			p := &pieces[k]
			parsed, diags := hclsyntax.ParseConfig(src[p.start:p.end], filename, p.pos)
			pb, isBody := parsed.Body.(*hclsyntax.Body)
			if len(diags) > 0 || !isBody || len(pb.Attributes) > 0 {
				refused.Store(1)
				return
			}
			p.body = pb
		}
	}
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), parsers, len(pieces)) - 1 {
		wg.Go(parse)
	}
	parse()
	wg.Wait()
	if refused.Load() != 0 {
		return nil, false
	}
	body := &hclsyntax.Body{Attributes: hclsyntax.Attributes{}, Blocks: hclsyntax.Blocks{}}
	for k, p := range pieces {
		body.Blocks = append(body.Blocks, p.body.Blocks...)
		if k == 0 {
			body.SrcRange = p.body.SrcRange
		}
		body.SrcRange.End, body.EndRange = p.body.SrcRange.End, p.body.EndRange
	}
	return &hcl.File{Body: body, Bytes: src}, true
}

// pieceEnd is where the piece starting at start ends: after the first
// line that is only "}" (spaces, tabs or a carriage return may follow) at
// least size bytes on, or at the end of src.
func pieceEnd(src []byte, start, size int) int {
	for i := start + max(size-1, 0); i < len(src); {
		k := bytes.Index(src[i:], []byte("\n}"))
		if k < 0 {
			break
		}
		j := i + k + 2
		for j < len(src) && (src[j] == ' ' || src[j] == '\t' || src[j] == '\r') {
			j++
		}
		if j < len(src) && src[j] == '\n' {
			return j + 1
		}
		i = i + k + 1
	}
	return len(src)
}

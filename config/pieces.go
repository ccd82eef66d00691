package config

import (
	"bytes"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// A native-syntax file of at least piecesFrom bytes is parsed in pieces of
// about pieceBytes, each a run of whole top-level blocks (parseInPieces):
// smaller files, almost all, are parsed whole.
const (
	piecesFrom = 256 << 10
	pieceBytes = 64 << 10
)

// parseInPieces parses a large native-syntax file a run of top-level
// blocks of about size bytes at a time, each piece at its own position in the file, and joins
// their blocks into one body: what parsing it whole gives, without holding
// the tokens of the whole file at once. The HCL lexer keeps a 96-byte
// token for every few bytes of what it parses, in one slice grown by
// copying, beside the tree it builds: a configuration of 5,000 hosts
// (0.6 MiB) held 12 MiB of tokens at once, and was the plan's peak of
// memory.
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
	body := &hclsyntax.Body{Attributes: hclsyntax.Attributes{}, Blocks: hclsyntax.Blocks{}}
	pos := hcl.InitialPos
	// Each piece ends after a cut or at the end of src; an empty src is
	// one empty piece.
	for start := 0; ; {
		end := pieceEnd(src, start, size)
		piece, diags := hclsyntax.ParseConfig(src[start:end], filename, pos)
		pb, isBody := piece.Body.(*hclsyntax.Body)
		if len(diags) > 0 || !isBody || len(pb.Attributes) > 0 {
			return nil, false
		}
		body.Blocks = append(body.Blocks, pb.Blocks...)
		if start == 0 {
			body.SrcRange = pb.SrcRange
		}
		body.SrcRange.End, body.EndRange = pb.SrcRange.End, pb.EndRange
		pos = hcl.Pos{Line: pos.Line + bytes.Count(src[start:end], []byte("\n")), Column: 1, Byte: end}
		if end == len(src) {
			break
		}
		start = end
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

package config

import (
	"bytes"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// A native-syntax file of at least piecesFrom bytes is parsed in pieces
// (parseInPieces), each a run of whole top-level blocks, or of a large
// block's arguments and nested blocks, of about pieceBytes, or a quarter
// of the file where that is less, so that even a file of a few hundred
// hosts has pieces for two parsers; smaller files are parsed whole.
const (
	pieceBytes = 64 << 10
	// parsers is how many pieces are parsed at once, at most: each holds
	// its piece's tokens while it parses, so more would raise the peak of
	// memory that parsing in pieces lowers.
	parsers = 2
)

// piecesFrom is a variable for tests, which load configurations parsed
// whole to compare.
var piecesFrom = 32 << 10

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
// block as gpulayer fmt writes it), or inside a large block (cutPieces)
// after its header or a line that is only "  }". Such a line can also be
// inside a heredoc or a comment; the piece before it then ends inside
// that heredoc or comment, which the parser reports. So ok is false, and
// the file must be parsed whole, when any piece has a diagnostic, a
// top-level argument, or an argument of a split block that another of its
// pieces sets too (the whole file's parse checks those for duplicates
// across pieces), or when a split block's header does not end with the
// block's own "{". When ok, the pieces parsed cleanly, each ending where
// the whole file's lexer is between items of the body it is in, so their
// blocks and arguments are the whole file's.
//
// The file has no Nav: the caller parses it whole again should it have a
// diagnostic to render with the block it is in.
//
// Where literal is not nil, the host blocks of a split fleet block that
// hold nothing but strings written out (literalHost) have their
// arguments dropped from the tree as soon as their piece is parsed, and
// literal holds their values instead, by body: the loader's literal hosts
// (loader.host). A syntax tree is ten times what these values are, and
// the trees of a fleet of thousands of hosts are most of what loading
// its configuration holds at once. The tree is then not the whole file's.
func parseInPieces(src []byte, filename string, size int, literal map[*hclsyntax.Body]*literalHost) (f *hcl.File, ok bool) {
	pieces := cutPieces(src, filename, size)
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
			text := src[p.start:p.end]
			if p.kind == pieceHeader {
				// The header closed at once: a block with an empty body,
				// whose body and closing brace are set when joining.
				text = append(bytes.Clone(text), '}')
			}
			parsed, diags := hclsyntax.ParseConfig(text, filename, p.pos)
			pb, isBody := parsed.Body.(*hclsyntax.Body)
			if len(diags) > 0 || !isBody || (p.kind != pieceInner && len(pb.Attributes) > 0) {
				refused.Store(1)
				return
			}
			p.body = pb
			if literal != nil && p.kind == pieceInner && p.fleet {
				p.literal = literalHosts(pb)
			}
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
	var split *hclsyntax.Block // the block whose body is being joined
	for k, p := range pieces {
		switch p.kind {
		case pieceBlocks:
			body.Blocks = append(body.Blocks, p.body.Blocks...)
			if k == 0 {
				body.SrcRange = p.body.SrcRange
			}
			body.SrcRange.End, body.EndRange = p.body.SrcRange.End, p.body.EndRange
		case pieceHeader:
			// The blocks before the last are whole; the last is the
			// split block, its "{" the one that ends the header.
			n := len(p.body.Blocks)
			if n == 0 || len(p.body.Blocks[n-1].Body.Blocks) > 0 || p.body.Blocks[n-1].OpenBraceRange.End.Byte != p.open+1 {
				return nil, false
			}
			body.Blocks = append(body.Blocks, p.body.Blocks...)
			if k == 0 {
				body.SrcRange = p.body.SrcRange
			}
			split = p.body.Blocks[n-1]
			if p.fleet && split.Type != "fleet" {
				return nil, false // its host blocks were taken as a fleet's
			}
			split.CloseBraceRange = p.close
			split.Body = &hclsyntax.Body{
				Attributes: hclsyntax.Attributes{},
				Blocks:     hclsyntax.Blocks{},
				SrcRange:   hcl.RangeBetween(split.OpenBraceRange, p.close),
				EndRange:   hcl.Range{Filename: p.close.Filename, Start: p.close.End, End: p.close.End},
			}
		case pieceInner:
			for name, a := range p.body.Attributes {
				if _, dup := split.Body.Attributes[name]; dup {
					// Parsed whole, "Attribute redefined".
					return nil, false
				}
				split.Body.Attributes[name] = a
			}
			split.Body.Blocks = append(split.Body.Blocks, p.body.Blocks...)
		}
	}
	for _, p := range pieces {
		for b, h := range p.literal {
			literal[b] = h
		}
	}
	return &hcl.File{Body: body, Bytes: src}, true
}

// literalHost is a host block holding only address, region, zone and
// network_group, each a string written out (literal), a valid name and
// an address splitAddress takes: what the loader needs of it, which it
// takes as decoding the block would (loader.host).
type literalHost struct {
	// values are literalHostArgs' values, where set.
	values [len(literalHostArgs)]string
	set    [len(literalHostArgs)]bool
}

// literalHostArgs are the arguments a literalHost may have, address
// first.
var literalHostArgs = [...]string{"address", "region", "zone", "network_group"}

// literalHosts takes the literal hosts of the blocks of body, a fleet's,
// dropping their arguments from the tree.
func literalHosts(body *hclsyntax.Body) map[*hclsyntax.Body]*literalHost {
	hosts := map[*hclsyntax.Body]*literalHost{}
	for _, b := range body.Blocks {
		if b.Type != "host" || len(b.Labels) != 1 || !ValidName(b.Labels[0]) || len(b.Body.Blocks) > 0 {
			continue
		}
		h := &literalHost{}
		for name, a := range b.Body.Attributes {
			k := slices.Index(literalHostArgs[:], name)
			v, ok := literal(a.Expr)
			if k < 0 || !ok || v.Type() != cty.String {
				h = nil
				break
			}
			h.values[k], h.set[k] = v.AsString(), true
		}
		if h == nil || !h.set[0] {
			continue
		}
		if _, _, err := splitAddress(h.values[0]); err != nil {
			continue
		}
		b.Body.Attributes = nil
		hosts[b.Body] = h
	}
	return hosts
}

// Kinds of piece.
const (
	// pieceBlocks is a run of whole top-level blocks.
	pieceBlocks = iota
	// pieceHeader is the first line of a top-level block split across
	// pieces (splitBlock), up to its "{" and the newline after it,
	// perhaps after whole blocks on the same lines.
	pieceHeader
	// pieceInner is part of the body of a split block: a run of its
	// arguments and whole nested blocks.
	pieceInner
)

// piece is a part of a file parsed on its own, and where it starts.
type piece struct {
	start, end int
	pos        hcl.Pos
	kind       int
	// open is the offset of the header's "{", and close the range of the
	// split block's "}" (pieceHeader).
	open  int
	close hcl.Range
	// fleet says the piece is part of a split block whose header reads
	// as a fleet's (pieceHeader, pieceInner), and literal are its
	// literal hosts (pieceInner).
	fleet   bool
	literal map[*hclsyntax.Body]*literalHost
	body    *hclsyntax.Body
}

// cutPieces cuts src into pieces of about size bytes: runs of whole
// top-level blocks, each ending after a line that is only "}" (the end of
// a top-level block as gpulayer fmt writes it). A top-level block of
// twice size or more (a fleet of a thousand hosts is 150 KiB) is split
// (splitBlock), so that no piece holds the tokens of a whole fleet. A run
// of blocks, and the file, may end with text that holds no block; an
// empty src is one empty piece.
func cutPieces(src []byte, filename string, size int) []piece {
	c := &cutter{src: src, filename: filename, pos: hcl.InitialPos}
	runStart := 0
	for start := 0; ; {
		end := lineEnd(src, start, 1, "\n}")
		if end-start >= 2*size && c.splitBlock(src[:end], start, size, runStart) {
			runStart = end
		} else if end-runStart >= size || end == len(src) {
			c.add(runStart, end, pieceBlocks)
			runStart = end
		}
		if end == len(src) {
			if runStart < end || c.pieces[len(c.pieces)-1].kind != pieceBlocks {
				// What follows the last split block: it ends the file's
				// body where parsing it whole ends it.
				c.add(runStart, end, pieceBlocks)
			}
			return c.pieces
		}
		start = end
	}
}

// cutter holds the pieces cut so far, and where the next starts.
type cutter struct {
	src      []byte
	filename string
	pieces   []piece
	pos      hcl.Pos
}

// add adds the piece src[start:end]; start is where the last piece ended.
func (c *cutter) add(start, end, kind int) *piece {
	c.pieces = append(c.pieces, piece{start: start, end: end, pos: c.pos, kind: kind})
	c.pos = hcl.Pos{Line: c.pos.Line + bytes.Count(c.src[start:end], []byte("\n")), Column: 1, Byte: end}
	return &c.pieces[len(c.pieces)-1]
}

// splitBlock adds the pieces of the top-level block that ends src (after
// a line that is only "}"), the run of blocks before it from runStart
// first, when it can be split: its header is what comes before the first
// "{" that ends a line, from start, and its body is cut after lines that
// are only "  }" (the end of a nested block as gpulayer fmt writes it),
// about size bytes apart. Where such a line is inside a heredoc, a
// comment or an expression, a piece ends inside it, which the parser
// reports; what parses cleanly is what parsing it whole gives
// (parseInPieces).
func (c *cutter) splitBlock(src []byte, start, size, runStart int) bool {
	closeAt := bytes.LastIndex(src, []byte("\n}")) + 1
	if closeAt <= start || len(bytes.Trim(src[closeAt+1:], " \t\r")) != 1 || src[len(src)-1] != '\n' {
		// The file's last line, not only "}" or with no newline after it.
		return false
	}
	open := bytes.Index(src[start:closeAt], []byte("{\n"))
	if crlf := bytes.Index(src[start:closeAt], []byte("{\r\n")); crlf >= 0 && (open < 0 || crlf < open) {
		open = crlf
	}
	if open < 0 {
		return false
	}
	open += start
	header := open + bytes.IndexByte(src[open:], '\n') + 1
	if runStart < start {
		c.add(runStart, start, pieceBlocks)
	}
	h := len(c.pieces)
	line := src[bytes.LastIndexByte(src[:open], '\n')+1 : open]
	fleet := bytes.HasPrefix(bytes.TrimLeft(line, " \t"), []byte("fleet "))
	c.add(start, header, pieceHeader).fleet = fleet
	for i := header; i < closeAt; {
		end := lineEnd(src[:closeAt], i, size, "\n  }")
		c.add(i, end, pieceInner).fleet = fleet
		i = end
	}
	// c.pos is now the start of the line of the block's "}".
	c.pieces[h].open = open
	c.pieces[h].close = hcl.Range{
		Filename: c.filename,
		Start:    c.pos,
		End:      hcl.Pos{Line: c.pos.Line, Column: 2, Byte: closeAt + 1},
	}
	c.pos = hcl.Pos{Line: c.pos.Line + 1, Column: 1, Byte: len(src)}
	return true
}

// lineEnd is where the piece starting at start ends: after the first line
// that is only marker without its leading newline (spaces, tabs or a
// carriage return may follow) at least size bytes on, or at the end of
// src.
func lineEnd(src []byte, start, size int, marker string) int {
	for i := start + max(size-1, 0); i < len(src); {
		k := bytes.Index(src[i:], []byte(marker))
		if k < 0 {
			break
		}
		j := i + k + len(marker)
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

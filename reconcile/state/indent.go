package state

import "bytes"

// indenter indents compact JSON, as encoding/json writes it (no space
// outside strings), by two spaces: byte for byte what json.Indent(dst, src,
// "", "  ") writes. json.Indent runs its validating scanner over every
// byte, which cost three times the marshalling itself on a large state
// (issue 19); what is indented here was just marshalled, so only the
// structure outside strings is looked at, and strings are copied whole.
//
// It keeps its place between calls, so a document can be indented in
// pieces: encode splices in the indented facts, which it encodes once.
type indenter struct {
	depth int
	// open is a '{' or '[' just written: its newline waits for the next
	// byte, so that an empty object or array stays "{}" or "[]".
	open bool
}

// append appends src, indented, to dst. A newline outside strings (the
// one encoding/json ends a document with) is written as it is.
func (ind *indenter) append(dst, src []byte) []byte {
	for i := 0; i < len(src); {
		c := src[i]
		if ind.open && c != '}' && c != ']' {
			ind.open = false
			ind.depth++
			dst = appendNewline(dst, ind.depth)
		}
		switch c {
		case '"':
			end := stringEnd(src, i)
			dst = append(dst, src[i:end]...)
			i = end
			continue
		case '{', '[':
			ind.open = true
			dst = append(dst, c)
		case ',':
			dst = append(dst, ',')
			dst = appendNewline(dst, ind.depth)
		case ':':
			dst = append(dst, ':', ' ')
		case '}', ']':
			if ind.open {
				ind.open = false
			} else {
				ind.depth--
				dst = appendNewline(dst, ind.depth)
			}
			dst = append(dst, c)
		default:
			// A number, true, false or null, or the final newline.
			end := i + 1
			for end < len(src) && !isPunct(src[end]) {
				end++
			}
			dst = append(dst, src[i:end]...)
			i = end
			continue
		}
		i++
	}
	return dst
}

func isPunct(c byte) bool {
	switch c {
	case '"', '{', '}', '[', ']', ',', ':':
		return true
	}
	return false
}

// stringEnd is the index just past the string that starts with the quote
// at src[start]: past the first quote after it not escaped by an odd run
// of backslashes (or len(src) for a string that never ends).
func stringEnd(src []byte, start int) int {
	for i := start + 1; i < len(src); {
		q := bytes.IndexByte(src[i:], '"')
		if q < 0 {
			return len(src)
		}
		q += i
		backslashes := 0
		for k := q - 1; k > start && src[k] == '\\'; k-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
	return len(src)
}

const spaces = "                                                                " // 64

func appendNewline(dst []byte, depth int) []byte {
	dst = append(dst, '\n')
	for n := 2 * depth; n > 0; n -= len(spaces) {
		dst = append(dst, spaces[:min(n, len(spaces))]...)
	}
	return dst
}

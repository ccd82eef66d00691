package iostreams

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Sanitize makes text that came from outside (a machine's hostname, zone,
// labels, GPU names, an error from a remote command) safe to print on a
// terminal. Each of these is replaced by U+FFFD, one per byte or rune, so
// what is left keeps its place:
//
//   - control characters: C0 (ESC starts ANSI sequences), DEL and C1 (0x9b
//     is CSI in 8 bits), so a hostile machine cannot move the cursor,
//     rewrite earlier lines or set the window title;
//   - bytes that are not UTF-8, which a terminal may read as C1 controls;
//   - invisible format characters (Unicode category Cf): the bidi marks,
//     embeddings, overrides and isolates that reorder what is shown (LRM,
//     RLM, ALM, LRE..RLO, LRI..PDI), zero-width spaces and joiners (ZWSP,
//     ZWNJ, ZWJ, word joiner, BOM), soft hyphens and tag characters, and
//     the line and paragraph separators, so a name cannot hide or disguise
//     text.
//
// Tabs and newlines are kept only when keepNewlines is true. The result is
// always valid UTF-8; text with nothing to replace is returned as is, and
// plain ASCII is checked a byte at a time.
func Sanitize(s string, keepNewlines bool) string {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if isUnsafeASCII(c, keepNewlines) {
				return sanitizeFrom(s, i, keepNewlines)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if size == 1 || isUnsafe(r) {
			// size 1 above ASCII is a byte that is not UTF-8.
			return sanitizeFrom(s, i, keepNewlines)
		}
		i += size
	}
	return s
}

// sanitizeFrom is Sanitize of s whose first i bytes need no change.
func sanitizeFrom(s string, i int, keepNewlines bool) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		if c := s[i]; c < utf8.RuneSelf {
			if isUnsafeASCII(c, keepNewlines) {
				b.WriteRune(utf8.RuneError)
			} else {
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if size == 1 || isUnsafe(r) {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// isUnsafeASCII reports the C0 controls and DEL, except tab and newline
// when they are kept.
func isUnsafeASCII(c byte, keepNewlines bool) bool {
	if c >= 0x20 && c != 0x7f {
		return false
	}
	return !keepNewlines || c != '\n' && c != '\t'
}

// isUnsafe reports the runes above ASCII that Sanitize replaces: C1
// controls, format characters and the line and paragraph separators.
func isUnsafe(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}

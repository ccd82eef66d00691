package iostreams

import (
	"strings"
	"unicode"
)

// Sanitize makes text that came from outside (a machine's hostname, zone,
// labels, GPU names, an error from a remote command) safe to print on a
// terminal: control bytes, including ESC that starts ANSI sequences, are
// replaced by U+FFFD so a hostile machine cannot move the cursor, rewrite
// earlier lines or set the window title. Tabs and newlines are kept only when
// keepNewlines is true.
func Sanitize(s string, keepNewlines bool) string {
	clean := true
	for _, r := range s {
		if isUnsafe(r, keepNewlines) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if isUnsafe(r, keepNewlines) {
			b.WriteRune('\uFFFD')
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isUnsafe(r rune, keepNewlines bool) bool {
	if keepNewlines && (r == '\n' || r == '\t') {
		return false
	}
	if r == unicode.ReplacementChar {
		return false
	}
	// C0, DEL, C1 controls and the bidi overrides that reorder what is shown.
	if unicode.IsControl(r) {
		return true
	}
	switch r {
	case '\u202a', '\u202b', '\u202c', '\u202d', '\u202e', '\u2066', '\u2067', '\u2068', '\u2069':
		return true
	}
	return false
}

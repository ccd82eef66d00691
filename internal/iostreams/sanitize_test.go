package iostreams

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestSanitizeStripsTerminalControl(t *testing.T) {
	cases := []struct {
		name, in string
		keepNL   bool
		want     string
	}{
		{"plain", "europe-west1-b", false, "europe-west1-b"},
		{"ansi", "zone\x1b[2J\x1b]0;pwned\x07", false, "zone\uFFFD[2J\uFFFD]0;pwned\uFFFD"},
		{"newline dropped", "a\nb\tc", false, "a\uFFFDb\uFFFDc"},
		{"newline kept", "a\nb\tc\r", true, "a\nb\tc\uFFFD"},
		{"c1 and bidi", "x\u009by\u202ez", false, "x\uFFFDy\uFFFDz"},
		{"unicode kept", "NVIDIA H100 80GB HBM3 – ünïcode", false, "NVIDIA H100 80GB HBM3 – ünïcode"},
		{"replacement character kept", "a\uFFFDb", false, "a\uFFFDb"},
		{"del", "a\x7fb", false, "a\uFFFDb"},
		// A lone 0x9b is CSI to a terminal in 8-bit mode: it must not pass
		// because nothing else in the text needs replacing.
		{"8-bit CSI alone", "\x9b", false, "\uFFFD"},
		{"8-bit CSI in a sequence", "mlx5_0\x9b2J", false, "mlx5_0\uFFFD2J"},
		{"invalid bytes only", "\xff\xfe\xc0", false, "\uFFFD\uFFFD\uFFFD"},
		{"truncated sequence", "GPU\xe2\x80", false, "GPU\uFFFD\uFFFD"},
		{"encoded surrogate", "\xed\xa0\x80", false, "\uFFFD\uFFFD\uFFFD"},
		{"lrm rlm alm", "a\u200eb\u200fc\u061cd", false, "a\uFFFDb\uFFFDc\uFFFDd"},
		{"embeddings and isolates", "\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069", false, strings.Repeat("\uFFFD", 8)},
		{"zero-width", "z\u200bw\u200cs\u200dp\u2060\ufeff", false, "z\uFFFDw\uFFFDs\uFFFDp\uFFFD\uFFFD"},
		{"soft hyphen and tags", "a\u00adb\U000E0041", false, "a\uFFFDb\uFFFD"},
		{"line and paragraph separators", "a\u2028b\u2029c", true, "a\uFFFDb\uFFFDc"},
	}
	for _, c := range cases {
		if got := Sanitize(c.in, c.keepNL); got != c.want {
			t.Errorf("%s: Sanitize(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

func TestColorOnlyOnTerminalWithoutNoColor(t *testing.T) {
	s, _, _, _ := Test()
	s.noColor = false
	if s.ColorEnabled() {
		t.Fatal("colour on for a non-terminal")
	}
	s.SetStdoutTTY(true)
	if !s.ColorEnabled() {
		t.Fatal("colour off on a terminal")
	}
	s.DisableColor()
	if s.ColorEnabled() {
		t.Fatal("colour on after --no-color")
	}
	t.Setenv("NO_COLOR", "")
	if System().ColorEnabled() {
		t.Fatal("colour on with NO_COLOR set")
	}
}

// FuzzSanitize holds Sanitize's promise over arbitrary bytes, not runes: a
// byte that is not UTF-8 decodes as U+FFFD, which a check over runes
// would let pass although the terminal receives the raw byte.
func FuzzSanitize(f *testing.F) {
	for _, seed := range []string{"", "europe-west1-b", "\x9b", "\x1b[2J", "a\nb\tc\r", "\xe2\x80", "\u202e\u200b\ufeff", "ü\uFFFD", "\xc2\x9b"} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	f.Fuzz(func(t *testing.T, in []byte, keepNewlines bool) {
		out := Sanitize(string(in), keepNewlines)
		if !utf8.ValidString(out) {
			t.Fatalf("Sanitize(%q) = %q is not UTF-8", in, out)
		}
		for i := 0; i < len(out); i++ {
			if c := out[i]; c < 0x20 && !(keepNewlines && (c == '\n' || c == '\t')) || c == 0x7f {
				t.Fatalf("Sanitize(%q) = %q holds byte %#x", in, out, c)
			}
		}
		for _, r := range out {
			if unicode.IsControl(r) && r != '\n' && r != '\t' || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
				t.Fatalf("Sanitize(%q) = %q holds %U", in, out, r)
			}
		}
		// One replacement per byte or rune replaced: everything keeps its
		// place, and text that needs nothing comes back as it was.
		if utf8.RuneCountInString(out) != utf8.RuneCount(in) {
			t.Fatalf("Sanitize(%q) = %q: %d runes from %d", in, out, utf8.RuneCountInString(out), utf8.RuneCount(in))
		}
		if again := Sanitize(out, keepNewlines); again != out {
			t.Fatalf("Sanitize is not idempotent: %q, then %q", out, again)
		}
		if !strings.ContainsRune(out, utf8.RuneError) && out != string(in) {
			t.Fatalf("Sanitize(%q) = %q changed text without replacing anything", in, out)
		}
	})
}

func BenchmarkSanitizeCleanASCII(b *testing.B) {
	s := "gpu-node-0042.europe-west1-b.c.my-project.internal"
	for b.Loop() {
		if Sanitize(s, false) != s {
			b.Fatal("changed clean text")
		}
	}
}

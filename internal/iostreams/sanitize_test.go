package iostreams

import "testing"

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

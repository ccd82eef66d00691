package ssh

import (
	"os/exec"
	"testing"
)

func TestQuoteLeavesSafeWordsAlone(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "''"},
		{"nvidia-smi", "nvidia-smi"},
		{"/usr/bin/python3", "/usr/bin/python3"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"$(reboot)", "'$(reboot)'"},
		{"a=b", "'a=b'"},
		{"~", "'~'"},
	} {
		if got := Quote(tc.in); got != tc.want {
			t.Errorf("Quote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestQuoteRoundTripsThroughSh(t *testing.T) {
	for _, s := range []string{
		"", " ", "plain", "two words", "'", "''", `"`, `\`, "$HOME", "`id`", "$(id)",
		"a;b", "a|b", "a&b", "*", "?", "[a]", "{a,b}", "~root", "-n", "line1\nline2",
		"tab\there", "glob*'quote'$var\\", "ünïcödé", "\x01\x1b[31m",
	} {
		out, err := exec.Command("/bin/sh", "-c", "printf %s "+Quote(s)).Output()
		if err != nil {
			t.Fatalf("sh with %q: %v", s, err)
		}
		if string(out) != s {
			t.Errorf("sh read Quote(%q) back as %q", s, out)
		}
	}
}

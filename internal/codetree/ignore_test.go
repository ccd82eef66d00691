package codetree

import "testing"

// TestRulesFollowGitignore pins the gitignore rules the code block
// documents: last match wins, negation, directory-only, anchoring, **.
func TestRulesFollowGitignore(t *testing.T) {
	patterns := []string{"# comment", "*.log", "!keep.log", "build/", "/top.txt", "docs/*.md", "**/cache", "a/**/z", "data/**", `\#hash`}
	var rs Rules
	for _, p := range patterns {
		rs.AddPattern(p)
	}
	for _, tc := range []struct {
		path string
		dir  bool
		want bool
	}{
		{"x.log", false, true},
		{"sub/x.log", false, true},
		{"keep.log", false, false},
		{"sub/keep.log", false, false},
		{"build", true, true},
		{"build", false, false}, // a file named build is not a directory
		{"sub/build", true, true},
		{"top.txt", false, true},
		{"sub/top.txt", false, false},
		{"docs/a.md", false, true},
		{"docs/sub/a.md", false, false},
		{"x/y/cache", true, true},
		{"cache", false, true},
		{"a/z", false, true},
		{"a/b/c/z", false, true},
		{"b/a/z", false, false},
		{"data", true, false},
		{"data/x", false, true},
		{"#hash", false, true},
		{"comment", false, false},
	} {
		if got := rs.Ignored(tc.path, tc.dir); got != tc.want {
			t.Errorf("Ignored(%q, dir=%v) = %v, want %v", tc.path, tc.dir, got, tc.want)
		}
	}
}

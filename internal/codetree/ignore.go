package codetree

import (
	"bufio"
	"io"
	"regexp"
	"strings"
)

// rule is one gitignore pattern, compiled. Git's rules (gitignore(5)):
// the last matching pattern wins; "!" re-includes; a trailing "/" matches
// only directories; a pattern with a "/" at its start or in its middle is
// anchored at the source's root, one without matches a name at any depth;
// "**" spans directories. A file whose directory is excluded cannot be
// re-included: the walk never enters an excluded directory.
type rule struct {
	re      *regexp.Regexp
	negate  bool
	dirOnly bool
}

// Rules are the ignore patterns of a tree, in the order they apply.
type Rules struct{ rules []rule }

// Add appends the patterns of one gitignore-syntax text (a file, or the
// exclude list one per line); later patterns win over earlier ones.
func (rs *Rules) Add(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64*1024)
	for sc.Scan() {
		rs.AddPattern(sc.Text())
	}
	return sc.Err()
}

// AddPattern appends one pattern; blank lines and comments add nothing.
func (rs *Rules) AddPattern(p string) {
	p = strings.TrimRight(p, "\r")
	// Trailing spaces are ignored unless escaped with a backslash.
	for strings.HasSuffix(p, " ") && !strings.HasSuffix(p, "\\ ") {
		p = p[:len(p)-1]
	}
	if p == "" || strings.HasPrefix(p, "#") {
		return
	}
	var r rule
	switch {
	case strings.HasPrefix(p, "!"):
		r.negate, p = true, p[1:]
	case strings.HasPrefix(p, "\\!"), strings.HasPrefix(p, "\\#"):
		p = p[1:]
	}
	if strings.HasSuffix(p, "/") {
		r.dirOnly, p = true, strings.TrimRight(p, "/")
	}
	if p == "" {
		return
	}
	anchored := strings.Contains(p, "/")
	p = strings.TrimPrefix(p, "/")
	prefix := "^(?:.*/)?"
	if anchored {
		prefix = "^"
	}
	re, err := regexp.Compile(prefix + globRegexp(p) + "$")
	if err != nil {
		return // a pattern git would not match either
	}
	r.re = re
	rs.rules = append(rs.rules, r)
}

// Ignored says whether the slash-separated path, relative to the root, is
// excluded; dir says it names a directory.
func (rs *Rules) Ignored(path string, dir bool) bool {
	ignored := false
	for _, r := range rs.rules {
		if r.dirOnly && !dir {
			continue
		}
		if r.re.MatchString(path) {
			ignored = !r.negate
		}
	}
	return ignored
}

// globRegexp converts a glob to a regular expression body: "*" and "?"
// stay within one path segment, "**" as a whole segment spans any number
// of them.
func globRegexp(p string) string {
	var b strings.Builder
	segs := strings.Split(p, "/")
	for i, s := range segs {
		last := i == len(segs)-1
		if s == "**" {
			switch {
			case last && i == 0:
				b.WriteString(".*")
			case last:
				b.WriteString(".*") // "a/**": everything inside a
			default:
				b.WriteString("(?:[^/]*/)*") // "**/" and "/**/": zero or more directories
			}
			continue
		}
		b.WriteString(segmentRegexp(s))
		if !last {
			b.WriteString("/")
		}
	}
	return b.String()
}

func segmentRegexp(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '*':
			for i+1 < len(s) && s[i+1] == '*' {
				i++ // "**" inside a segment is "*"
			}
			b.WriteString("[^/]*")
		case '?':
			b.WriteString("[^/]")
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteString(regexp.QuoteMeta(string(s[i])))
			}
		case '[':
			end := strings.IndexByte(s[i+1:], ']')
			if end < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := s[i+1 : i+1+end]
			i += end + 1
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	return b.String()
}

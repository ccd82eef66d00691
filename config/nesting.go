package config

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
)

// maxNesting is how deep an expression may nest. The HCL parser, the JSON
// parser and expression evaluation all recurse once per level with no limit
// of their own, so 120 KB of "[" used to end the process with a stack
// overflow that no recover can catch. Real configurations nest a handful of
// levels; 128 leaves room for any of them.
const maxNesting = 128

// syntax is how a text is read: as a configuration file, as one expression
// (a --var value), or as a string template (a string of a JSON file).
type syntax uint8

const (
	syntaxConfig syntax = iota
	syntaxExpression
	syntaxTemplate
)

// frameKind is what opened a level of nesting.
type frameKind uint8

const (
	frameBody    frameKind = iota // the top of a file: code, an item per line
	frameExpr                     // the top of a --var value: code
	frameText                     // the top of a JSON string: a template
	frameParen                    // ( )
	frameBrack                    // [ ]
	frameBrace                    // { }: a block body or an object, an item per line
	frameInterp                   // ${ } or %{ } in a template: code
	frameQuoted                   // "..." template
	frameHeredoc                  // <<ID ... ID template
)

func (k frameKind) isTemplate() bool {
	return k == frameText || k == frameQuoted || k == frameHeredoc
}

// frame is one open level. chain counts what can wrap the expression
// being read at this level without a bracket: operators, "." and "[" steps,
// calls and groups that ended (a+b+c is as deep a tree as ((a+b)+c)); in a
// template, the %{if} and %{for} directives still open. A comma, or a new
// line where lines separate items, starts a new item and clears it.
type frame struct {
	kind   frameKind
	chain  int
	marker []byte // a heredoc's closing identifier
}

// nestingScanner measures nesting by bytes, without lexing into tokens: the
// HCL lexer allocates about 500 bytes per token, so measuring with it would
// cost gigabytes on exactly the files this check exists to reject. It
// errs towards counting too much wherever it is unsure whether bytes are
// code or text, since only an undercount is dangerous.
type nestingScanner struct {
	src   []byte
	stack []frame
	depth int // open frames above the bottom plus every frame's chain
}

// nestingTooDeep returns the offset in src where nesting first exceeds
// maxNesting, or -1.
func nestingTooDeep(src []byte, how syntax) int {
	s := &nestingScanner{src: src}
	switch how {
	case syntaxConfig:
		s.stack = []frame{{kind: frameBody}}
	case syntaxExpression:
		s.stack = []frame{{kind: frameExpr}}
	default:
		s.stack = []frame{{kind: frameText}}
	}
	return s.scan()
}

func (s *nestingScanner) top() *frame { return &s.stack[len(s.stack)-1] }

func (s *nestingScanner) push(f frame) { s.stack = append(s.stack, f); s.depth++ }

func (s *nestingScanner) pop() {
	f := s.top()
	s.depth -= f.chain + 1
	s.stack = s.stack[:len(s.stack)-1]
	if f.kind != frameInterp && !s.top().kind.isTemplate() {
		// What ended can be wrapped like any operand, and an index step
		// wraps what it follows: a[b][c] is as deep as ((a[b])[c]).
		s.extend(1)
	}
}

func (s *nestingScanner) extend(n int) {
	f := s.top()
	if f.chain+n < 0 {
		n = -f.chain
	}
	f.chain += n
	s.depth += n
}

func (s *nestingScanner) scan() int {
	src := s.src
	for i := 0; i < len(src); {
		var next int
		if s.top().kind.isTemplate() {
			next = s.template(i)
		} else {
			next = s.code(i)
		}
		if s.depth > maxNesting {
			return i
		}
		if next <= i { // cannot happen; never loop for ever on a bug
			next = i + 1
		}
		i = next
	}
	return -1
}

// code reads one thing at src[i] in code and returns where the next starts.
func (s *nestingScanner) code(i int) int {
	src := s.src
	c := src[i]
	switch {
	case c == '#' || (c == '/' && at(src, i+1, '/')):
		for i < len(src) && src[i] != '\n' {
			i++
		}
		return i
	case c == '/' && at(src, i+1, '*'):
		for i += 2; i < len(src) && !(src[i] == '*' && at(src, i+1, '/')); i++ {
		}
		return i + 2
	case c == '"':
		s.push(frame{kind: frameQuoted})
	case c == '<' && at(src, i+1, '<'):
		if marker, body := heredocStart(src, i); body > 0 {
			s.push(frame{kind: frameHeredoc, marker: marker})
			return body
		}
		s.extend(2)
		return i + 2
	case c == '(':
		s.push(frame{kind: frameParen})
	case c == '[':
		s.push(frame{kind: frameBrack})
	case c == '{':
		s.push(frame{kind: frameBrace})
	case c == ')' || c == ']' || c == '}':
		if k := s.top().kind; (c == ')' && k == frameParen) || (c == ']' && k == frameBrack) ||
			(c == '}' && (k == frameBrace || k == frameInterp)) {
			s.pop()
		}
		// An unmatched closer is left to the parser to report; not popping
		// for it keeps the count at least as deep as the parser goes.
	case c == ',':
		s.extend(-s.top().chain)
	case c == '\n':
		if k := s.top().kind; k == frameBody || k == frameBrace {
			s.extend(-s.top().chain)
		}
	case c == '=' && !at(src, i+1, '=') && !at(src, i+1, '>'):
		// An assignment, not an operator: it wraps nothing.
	case isOperatorByte(c):
		s.extend(1)
	}
	return i + 1
}

// template reads one thing at src[i] in a template and returns where the
// next starts.
func (s *nestingScanner) template(i int) int {
	src := s.src
	f := s.top()
	if f.kind == frameHeredoc && (i == 0 || src[i-1] == '\n') {
		if end, ok := heredocEnd(src, i, f.marker); ok {
			s.pop()
			return end
		}
	}
	c := src[i]
	switch {
	case c == '\\' && f.kind == frameQuoted:
		return i + 2
	case (c == '"' || c == '\n') && f.kind == frameQuoted:
		// A quoted template cannot span lines; the HCL lexer goes back to
		// code at the newline, and so do we.
		s.pop()
		if c == '\n' {
			return i // read the newline as code
		}
	case (c == '$' || c == '%') && at(src, i+1, c) && at(src, i+2, '{'):
		return i + 3 // $${ and %%{ are literal
	case c == '$' && at(src, i+1, '{'):
		s.push(frame{kind: frameInterp})
		return i + 2
	case c == '%' && at(src, i+1, '{'):
		switch directiveKeyword(src, i+2) {
		case "if", "for":
			s.extend(1)
		case "endif", "endfor":
			s.extend(-1)
		}
		s.push(frame{kind: frameInterp})
		return i + 2
	}
	return i + 1
}

func at(src []byte, i int, c byte) bool { return i < len(src) && src[i] == c }

// isOperatorByte is a byte of an operator or of a traversal step; each one
// may wrap the expression before it in one more level of the tree.
func isOperatorByte(c byte) bool {
	switch c {
	case '+', '-', '*', '/', '%', '!', '<', '>', '=', '&', '|', '?', '.':
		return true
	}
	return false
}

func isIdentByte(c byte, first bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c >= utf8.RuneSelf:
		return true
	case first:
		return false
	}
	return c >= '0' && c <= '9' || c == '-'
}

// heredocStart recognises <<ID or <<-ID followed by a newline at src[i],
// as the HCL lexer does, and returns the identifier and where the
// template begins; body is 0 when there is no heredoc.
func heredocStart(src []byte, i int) (marker []byte, body int) {
	j := i + 2
	if at(src, j, '-') {
		j++
	}
	start := j
	for j < len(src) && isIdentByte(src[j], j == start) {
		j++
	}
	if j == start {
		return nil, 0
	}
	marker = src[start:j]
	if at(src, j, '\r') {
		j++
	}
	if !at(src, j, '\n') {
		return nil, 0
	}
	return marker, j + 1
}

// heredocEnd reports whether the line at src[i] closes a heredoc: blanks,
// then the marker not followed by more of an identifier. The HCL lexer
// wants nothing else on the line; ending on less is the safe direction.
func heredocEnd(src []byte, i int, marker []byte) (end int, ok bool) {
	for i < len(src) && (src[i] == ' ' || src[i] == '\t') {
		i++
	}
	if len(src)-i < len(marker) || string(src[i:i+len(marker)]) != string(marker) {
		return 0, false
	}
	i += len(marker)
	if i < len(src) && isIdentByte(src[i], false) {
		return 0, false
	}
	return i, true
}

// directiveKeyword is the word after %{ (and an optional ~ and blanks).
func directiveKeyword(src []byte, i int) string {
	for i < len(src) && (src[i] == '~' || src[i] == ' ' || src[i] == '\t') {
		i++
	}
	start := i
	for i < len(src) && src[i] >= 'a' && src[i] <= 'z' {
		i++
	}
	return string(src[start:i])
}

// jsonNestingTooDeep is nestingTooDeep for HCL's JSON syntax: the depth of
// arrays and objects and, with hclStrings, of what HCL parses in strings at
// evaluation time: every string value as a template, and the value of a
// "type" property as an expression too (a variable's type constraint; no
// other string is parsed as an expression, and counting every "/" and "."
// of ordinary text as an operator would refuse long paths and prose).
func jsonNestingTooDeep(src []byte, hclStrings bool) int {
	depth := 0
	var prev byte // the last byte outside strings that is not a blank
	key := ""     // the last property name read
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '[', '{':
			depth++
			if depth > maxNesting {
				return i
			}
		case ']', '}':
			depth = max(0, depth-1)
		case '"':
			end, escaped := jsonStringEnd(src, i)
			isKey := at(src, skipBlanks(src, end), ':')
			if isKey {
				key = string(src[i+1 : max(i+1, end-1)])
			} else if hclStrings && jsonStringTooDeep(src[i:end], escaped, prev == ':' && key == "type") {
				return i
			}
			i = end - 1
		}
		prev = c
	}
	return -1
}

func skipBlanks(src []byte, i int) int {
	for i < len(src) && (src[i] == ' ' || src[i] == '\t' || src[i] == '\r' || src[i] == '\n') {
		i++
	}
	return i
}

// jsonStringEnd returns the end of the string literal starting at src[i]
// (after its closing quote, or len(src)) and whether it holds escapes.
func jsonStringEnd(src []byte, i int) (end int, escaped bool) {
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped
		}
	}
	return len(src), escaped
}

// jsonStringTooDeep checks one JSON string literal, quotes included, as a
// template and, with asExpression, as an expression.
func jsonStringTooDeep(lit []byte, escaped, asExpression bool) bool {
	text := lit[1:]
	if len(text) > 0 && text[len(text)-1] == '"' {
		text = text[:len(text)-1]
	}
	if escaped {
		var s string
		if json.Unmarshal(lit, &s) != nil {
			return false // the JSON parser reports it
		}
		text = []byte(s)
	}
	if nestingUpperBound(text) <= maxNesting {
		return false
	}
	return nestingTooDeep(text, syntaxTemplate) >= 0 || (asExpression && nestingTooDeep(text, syntaxExpression) >= 0)
}

// nestingUpperBound counts the bytes that can add a level; a text with
// no more of them than the limit cannot be too deep, which spares the
// scan of most strings.
func nestingUpperBound(text []byte) int {
	n := 0
	for _, c := range text {
		if c == '(' || c == '[' || c == '{' || c == '"' || isOperatorByte(c) {
			n++
		}
	}
	return n
}

// nestingDiagnostic is the error for src nesting too deep at offset.
func nestingDiagnostic(src []byte, offset int, filename, what string) *hcl.Diagnostic {
	pos := positionAt(src, offset)
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Nesting too deep",
		Detail: fmt.Sprintf("%s nests brackets, braces, parentheses, string templates and operators more than %d levels deep at line %d; gpulayer reads at most %d. Split the expression, for example into locals.",
			what, maxNesting, pos.Line, maxNesting),
		Subject: &hcl.Range{Filename: filename, Start: pos, End: hcl.Pos{Line: pos.Line, Column: pos.Column + 1, Byte: pos.Byte + 1}},
	}
}

// positionAt is the line and column (in characters, from 1) of a byte
// offset of src.
func positionAt(src []byte, offset int) hcl.Pos {
	offset = max(0, min(offset, len(src)))
	line, lineStart := 1, 0
	for i, c := range src[:offset] {
		if c == '\n' {
			line, lineStart = line+1, i+1
		}
	}
	return hcl.Pos{Line: line, Column: utf8.RuneCount(src[lineStart:offset]) + 1, Byte: offset}
}

package config

import (
	"errors"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// sensitiveMark is the cty mark on the values of sensitive variables. cty
// carries marks through operators, conditionals and function calls, so
// whatever is computed from such a value carries it too, and the code that
// writes a diagnostic can tell that the value must not be shown.
type sensitiveMark struct{}

// redacted is what a diagnostic says in place of a sensitive value.
const redacted = "(sensitive value)"

// minRedactedRaw is the shortest sensitive text that is also redacted
// where it appears unquoted. Shorter ones would cut common words out of
// every sentence; they are still redacted wherever they are quoted, which
// is how diagnostics show values.
const minRedactedRaw = 4

// secrets is what one Load knows must never be printed: the texts of
// sensitive values (every value given for a sensitive variable, and every
// attribute value computed from one), and the ranges of files where such
// a value is written.
type secrets struct {
	texts  map[string]bool
	ranges []hcl.Range
}

func newSecrets() *secrets { return &secrets{texts: map[string]bool{}} }

// any reports whether there is anything to hide.
func (s *secrets) any() bool { return len(s.texts) > 0 || len(s.ranges) > 0 }

// addValue records the strings and numbers inside v.
func (s *secrets) addValue(v cty.Value) {
	v, _ = v.UnmarkDeep()
	_ = cty.Walk(v, func(_ cty.Path, e cty.Value) (bool, error) {
		if e.IsNull() || !e.IsKnown() {
			return false, nil
		}
		switch e.Type() {
		case cty.String:
			s.addText(e.AsString())
		case cty.Number:
			s.addText(e.AsBigFloat().Text('f', -1))
		}
		return true, nil
	})
}

func (s *secrets) addText(t string) {
	if t != "" {
		s.texts[t] = true
	}
}

// addRange records where a sensitive value is written in a file.
func (s *secrets) addRange(r hcl.Range) {
	if r.Filename != "" && r.End.Byte > r.Start.Byte {
		s.ranges = append(s.ranges, r)
	}
}

// redact replaces every sensitive text in text, longest first so that a
// secret containing another is replaced whole.
func (s *secrets) redact(text string) string {
	if len(s.texts) == 0 {
		return text
	}
	texts := make([]string, 0, len(s.texts))
	for t := range s.texts {
		texts = append(texts, t)
	}
	sort.Slice(texts, func(i, j int) bool {
		if len(texts[i]) != len(texts[j]) {
			return len(texts[i]) > len(texts[j])
		}
		return texts[i] < texts[j]
	})
	for _, t := range texts {
		text = strings.ReplaceAll(text, strconv.Quote(t), redacted)
		if len(t) >= minRedactedRaw {
			text = strings.ReplaceAll(text, t, redacted)
		}
	}
	return text
}

// scrub redacts the summary and detail of every diagnostic, and drops the
// expression and evaluation context that hcl's own renderer would use to
// print "with var.x as ..." (it skips a marked value, but not one nested in
// an object or a list).
func (s *secrets) scrub(diags hcl.Diagnostics) {
	if !s.any() {
		return
	}
	for _, d := range diags {
		d.Summary = s.redact(d.Summary)
		d.Detail = s.redact(d.Detail)
		d.Expression, d.EvalContext = nil, nil
	}
}

// mask returns files with every range where a sensitive value is written
// shown as asterisks, one per character so that the columns of
// diagnostics still point at the right place. Files without such a range
// are shared, not copied; files itself is not changed.
func (s *secrets) mask(files map[string]*hcl.File) map[string]*hcl.File {
	if len(s.ranges) == 0 {
		return files
	}
	byFile := map[string][]hcl.Range{}
	for _, r := range s.ranges {
		byFile[r.Filename] = append(byFile[r.Filename], r)
	}
	out := make(map[string]*hcl.File, len(files))
	for name, f := range files {
		rs := byFile[name]
		if len(rs) == 0 || f == nil {
			out[name] = f
			continue
		}
		c := *f
		c.Bytes = maskRanges(f.Bytes, rs)
		out[name] = &c
	}
	return out
}

func maskRanges(src []byte, rs []hcl.Range) []byte {
	sort.Slice(rs, func(i, j int) bool { return rs[i].Start.Byte < rs[j].Start.Byte })
	out := make([]byte, 0, len(src))
	pos := 0
	for _, r := range rs {
		start, end := max(pos, min(r.Start.Byte, len(src))), min(r.End.Byte, len(src))
		if start >= end {
			continue
		}
		out = append(out, src[pos:start]...)
		for i := start; i < end; {
			c, size := utf8.DecodeRune(src[i:end])
			switch c {
			case '\n', '\r':
				out = append(out, byte(c))
			default:
				out = append(out, '*')
			}
			i += size
		}
		pos = end
	}
	return append(out, src[pos:]...)
}

// sensitiveArgs wraps f so that an error it returns for a call with a
// sensitive argument does not quote the argument, as tonumber does
// ("cannot convert "hunter2" to number"). The result keeps the arguments'
// marks, so it is as sensitive as they were.
func sensitiveArgs(f function.Function) function.Function {
	params := f.Params()
	for i := range params {
		params[i].AllowMarked = true
	}
	var varParam *function.Parameter
	if vp := f.VarParam(); vp != nil {
		vp.AllowMarked = true
		varParam = vp
	}
	return function.New(&function.Spec{
		Description: f.Description(),
		Params:      params,
		VarParam:    varParam,
		Type: func(args []cty.Value) (cty.Type, error) {
			plain, marks := unmarkArgs(args)
			ty, err := f.ReturnTypeForValues(plain)
			if err != nil && len(marks) > 0 {
				return cty.NilType, redactedCallError(err)
			}
			return ty, err
		},
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			plain, marks := unmarkArgs(args)
			v, err := f.Call(plain)
			if err != nil {
				if len(marks) > 0 {
					return cty.NilVal, redactedCallError(err)
				}
				return cty.NilVal, err
			}
			return v.WithMarks(marks), nil
		},
	})
}

func unmarkArgs(args []cty.Value) ([]cty.Value, cty.ValueMarks) {
	plain := make([]cty.Value, len(args))
	all := cty.ValueMarks{}
	for i, a := range args {
		var marks cty.ValueMarks
		plain[i], marks = a.UnmarkDeep()
		for m := range marks {
			all[m] = struct{}{}
		}
	}
	return plain, all
}

// redactedCallError keeps which argument was wrong and drops why, since
// the why may quote it.
func redactedCallError(err error) error {
	const msg = "the value is sensitive, so why it is invalid is not shown"
	var ae function.ArgError
	if errors.As(err, &ae) {
		return function.NewArgErrorf(ae.Index, msg)
	}
	return errors.New(msg)
}

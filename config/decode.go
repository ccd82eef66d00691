package config

import (
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
)

// decoder evaluates the attributes of one kind of block in one scope and
// collects every problem instead of stopping at the first.
type decoder struct {
	scope *scope
	ctx   *hcl.EvalContext
	diags hcl.Diagnostics
	// secrets collects the values computed from sensitive variables; nil
	// where nothing can refer to a variable.
	secrets *secrets
	// sensitive holds the ranges of attributes whose value was computed
	// from a sensitive variable: a diagnostic about such a value, added
	// after it was evaluated, gets a detail that does not quote it.
	sensitive map[hcl.Range]bool
	// unknown holds the ranges of attributes whose value was not known
	// (isUnknown).
	unknown map[hcl.Range]bool
}

func newDecoder(s *scope, funcs map[string]function.Function) *decoder {
	return &decoder{scope: s, ctx: s.evalContext(funcs), sensitive: map[hcl.Range]bool{}, unknown: map[hcl.Range]bool{}}
}

// duplicateBlock is the error for a second block of a kind its owner (a job,
// a policy) holds at most one of; first is where the one kept is.
func duplicateBlock(owner, kind string, first hcl.Range, again *hcl.Block) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Duplicate " + kind + " block",
		Detail:   "A " + owner + " has at most one " + kind + " block; the first is at " + first.String() + ".",
		Subject:  again.DefRange.Ptr(),
	}
}

func (d *decoder) add(diags ...*hcl.Diagnostic) {
	for _, diag := range diags {
		if diag.Subject != nil && d.sensitive[*diag.Subject] {
			diag.Detail = "The value is computed from a sensitive variable, so it is not shown here."
		}
	}
	d.diags = append(d.diags, diags...)
}

// object is the value a block is referred to by (ssh.lab, policy.tight):
// its attributes' decoded values, those computed from a sensitive variable
// marked again, so that what refers to them is as sensitive, and those
// that were not known unknown again, so that what refers to them is not
// checked against a default the block does not have.
func (d *decoder) object(attrs hcl.Attributes, vals map[string]cty.Value) cty.Value {
	for name, v := range vals {
		if d.isUnknown(attrs[name]) {
			v = cty.UnknownVal(v.Type())
		}
		if d.isSensitive(attrs[name]) {
			v = v.Mark(sensitiveMark{})
		}
		vals[name] = v
	}
	return cty.ObjectVal(vals)
}

// isSensitive reports whether attr's value was computed from a sensitive
// variable.
func (d *decoder) isSensitive(attr *hcl.Attribute) bool {
	return attr != nil && d.sensitive[attr.Expr.Range()]
}

// eval checks the references of attr, evaluates it and converts it to ty.
// ok is false when the attribute is absent, null (which means "unset", as
// in Terraform), wrong, or not wholly known: unknown because of an earlier
// error, or computed from a variable that validate was given no value for
// (see isUnknown).
func (d *decoder) eval(attr *hcl.Attribute, ty cty.Type) (v cty.Value, ok bool) {
	v, ok = d.evalKnown(attr, ty)
	if !ok || !v.IsWhollyKnown() {
		if ok {
			d.unknown[attr.Expr.Range()] = true
		}
		return cty.NilVal, false
	}
	return v, true
}

// evalKnown is eval for a value that may hold unknown parts, such as a map
// whose keys are written out and whose values come from a variable not
// given yet: ok when the value itself is known.
func (d *decoder) evalKnown(attr *hcl.Attribute, ty cty.Type) (v cty.Value, ok bool) {
	if attr == nil {
		return cty.NilVal, false
	}
	if lit, ok := literal(attr.Expr); ok {
		v = lit
	} else {
		diags, fine := d.scope.check(attr.Expr)
		d.add(diags...)
		if !fine {
			return cty.NilVal, false
		}
		v, diags = attr.Expr.Value(d.ctx)
		d.add(diags...)
		if diags.HasErrors() || v.IsNull() {
			return cty.NilVal, false
		}
		if v.ContainsMarked() && d.secrets != nil {
			d.secrets.addValue(v)
			d.sensitive[attr.Expr.Range()] = true
		}
		v, _ = v.UnmarkDeep()
	}
	cv, err := convert.Convert(v, ty)
	if err != nil {
		d.add(&hcl.Diagnostic{
			Severity:    hcl.DiagError,
			Summary:     "Incorrect attribute value type",
			Detail:      fmt.Sprintf("Inappropriate value for attribute %q: %s.", attr.Name, err),
			Subject:     attr.Expr.Range().Ptr(),
			Expression:  attr.Expr,
			EvalContext: d.ctx,
		})
		return cty.NilVal, false
	}
	if cv.IsNull() {
		return cty.NilVal, false
	}
	// Converted first: an unknown's type may be known all the same
	// (var.hosts is a list without its value), and the wrong type is wrong
	// whatever the value.
	if !cv.IsKnown() {
		d.unknown[attr.Expr.Range()] = true
		return cty.NilVal, false
	}
	return cv, true
}

// literal is the value of expr when it is a literal written out: a number
// or bool, or a quoted string without interpolation, which is what a large
// configuration's host blocks hold (address, zone, network group). It is
// the value Value would give (a quoted string's literal part is the string
// already unescaped and normalized; a template of that one part gives it
// again), without walking the expression for references it has none of,
// evaluating the template into a buffer, or unmarking the result: most of
// what decoding a host cost. ok is false for anything else, and for a null
// or unknown literal, which take the general path and its diagnostics.
func literal(expr hcl.Expression) (v cty.Value, ok bool) {
	if t, isTemplate := expr.(*hclsyntax.TemplateExpr); isTemplate {
		if !t.IsStringLiteral() {
			return cty.NilVal, false
		}
		expr = t.Parts[0]
	}
	lit, isLiteral := expr.(*hclsyntax.LiteralValueExpr)
	if !isLiteral || lit.Val.IsNull() || !lit.Val.IsKnown() || lit.Val.IsMarked() {
		return cty.NilVal, false
	}
	return lit.Val, true
}

// isUnknown reports whether attr's value was not known when it was
// evaluated, so that a check of it was skipped: one that depends on it,
// such as whether a required value is there, must be skipped too.
func (d *decoder) isUnknown(attr *hcl.Attribute) bool {
	return attr != nil && d.unknown[attr.Expr.Range()]
}

func (d *decoder) str(attrs hcl.Attributes, name string, dst *string) bool {
	v, ok := d.eval(attrs[name], cty.String)
	if ok {
		*dst = v.AsString()
	}
	return ok
}

func (d *decoder) boolean(attrs hcl.Attributes, name string, dst *bool) bool {
	v, ok := d.eval(attrs[name], cty.Bool)
	if ok {
		*dst = v.True()
	}
	return ok
}

// integer reads a whole number no smaller than lowest.
func (d *decoder) integer(attrs hcl.Attributes, name string, lowest int64, dst *int) bool {
	attr := attrs[name]
	v, ok := d.eval(attr, cty.Number)
	if !ok {
		return false
	}
	bf := v.AsBigFloat()
	if !bf.IsInt() {
		d.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Incorrect attribute value type",
			Detail:   fmt.Sprintf("Inappropriate value for attribute %q: a whole number is required, got %s.", name, bf.Text('g', -1)),
			Subject:  attr.Expr.Range().Ptr(),
		})
		return false
	}
	const highest = 1 << 31
	if bf.Cmp(big.NewFloat(float64(lowest))) < 0 || bf.Cmp(big.NewFloat(highest)) >= 0 {
		d.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for " + name,
			Detail:   fmt.Sprintf("%s must be at least %d, got %s.", name, lowest, bf.Text('g', -1)),
			Subject:  attr.Expr.Range().Ptr(),
		})
		if bf.Cmp(big.NewFloat(highest)) >= 0 {
			d.diags[len(d.diags)-1].Detail = fmt.Sprintf("%s must be less than %d, got %s.", name, int64(highest), bf.Text('g', -1))
		}
		return false
	}
	n, _ := bf.Int64()
	*dst = int(n)
	return true
}

// exitCodes reads a list of process exit statuses, 0 to 255.
func (d *decoder) exitCodes(attrs hcl.Attributes, name string, dst *[]int) bool {
	attr := attrs[name]
	v, ok := d.eval(attr, cty.List(cty.Number))
	if !ok {
		return false
	}
	var out []int
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		var bad string
		switch {
		case e.IsNull():
			bad = "null"
		case !e.AsBigFloat().IsInt():
			bad = e.AsBigFloat().Text('g', -1)
		default:
			n, _ := e.AsBigFloat().Int64()
			if n < 0 || n > 255 {
				bad = e.AsBigFloat().Text('g', -1)
			} else {
				out = append(out, int(n))
			}
		}
		if bad != "" {
			d.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid value for " + name,
				Detail:   fmt.Sprintf("%s lists exit statuses, whole numbers from 0 to 255; got %s.", name, bad),
				Subject:  attr.Expr.Range().Ptr(),
			})
			return false
		}
	}
	*dst = out
	return true
}

func (d *decoder) strList(attrs hcl.Attributes, name string, dst *[]string) bool {
	v, ok := d.eval(attrs[name], cty.List(cty.String))
	if !ok || !d.noNullElement(attrs[name], v) {
		return false
	}
	out := make([]string, 0, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		out = append(out, e.AsString())
	}
	*dst = out
	return true
}

func (d *decoder) strMap(attrs hcl.Attributes, name string, dst *map[string]string) bool {
	v, ok := d.eval(attrs[name], cty.Map(cty.String))
	if !ok || !d.noNullElement(attrs[name], v) {
		return false
	}
	*dst = goStringMap(v)
	return true
}

// noNullElement reports whether no element of v, a list or map of
// strings, is null, and says which one is where one is: a null converts
// to any element type, but a command word or a label must be a string.
func (d *decoder) noNullElement(attr *hcl.Attribute, v cty.Value) bool {
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		if !e.IsNull() {
			continue
		}
		var which string
		if k.Type() == cty.String {
			which = fmt.Sprintf("element %q", k.AsString())
		} else { // a list's index
			which = "element " + k.AsBigFloat().Text('f', -1)
		}
		d.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Incorrect attribute value type",
			Detail:   fmt.Sprintf("Inappropriate value for attribute %q: %s is null; each element must be a string.", attr.Name, which),
			Subject:  attr.Expr.Range().Ptr(),
		})
		return false
	}
	return true
}

// goStringMap is a known map(string) as Go has it.
func goStringMap(v cty.Value) map[string]string {
	out := make(map[string]string, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		out[k.AsString()] = e.AsString()
	}
	return out
}

// enum reads a string that must be one of allowed, listing them when not.
func (d *decoder) enum(attrs hcl.Attributes, name string, allowed []string, dst *string) bool {
	var s string
	if !d.str(attrs, name, &s) {
		return false
	}
	for _, a := range allowed {
		if s == a {
			*dst = s
			return true
		}
	}
	detail := fmt.Sprintf("%q is not a valid %s; allowed values are %s.%s", s, name, quotedList(allowed), didYouMean(s, allowed))
	if d.isSensitive(attrs[name]) {
		detail = fmt.Sprintf("The value, computed from a sensitive variable and not shown here, is not a valid %s; allowed values are %s.", name, quotedList(allowed))
	}
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Invalid value for " + name,
		Detail:   detail,
		Subject:  attrs[name].Expr.Range().Ptr(),
	})
	return false
}

// duration reads a Go duration string such as "30s" or "2m30s".
func (d *decoder) duration(attrs hcl.Attributes, name string, dst *time.Duration) bool {
	var s string
	if !d.str(attrs, name, &s) {
		return false
	}
	dur, err := time.ParseDuration(s)
	if err != nil || dur < 0 {
		d.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid duration for " + name,
			Detail:   fmt.Sprintf("%q is not a duration; write a number with a unit, such as \"30s\", \"2m\" or \"1h30m\".", s),
			Subject:  attrs[name].Expr.Range().Ptr(),
		})
		return false
	}
	*dst = dur
	return true
}

// reference reads an attribute that must name a block directly, such as
// `policy = policy.tight`, and returns the name.
func (d *decoder) reference(attrs hcl.Attributes, name, root, noun string) (string, bool) {
	attr := attrs[name]
	if attr == nil {
		return "", false
	}
	ns := d.scope.roots[root]
	tr, diags := hcl.AbsTraversalForExpr(attr.Expr)
	if diags.HasErrors() || len(tr) != 2 || tr.RootName() != root {
		detail := fmt.Sprintf("The %s argument takes a reference to %s block, such as %s.%s.", name, noun, root, exampleName(ns))
		if v, vd := attr.Expr.Value(nil); !vd.HasErrors() && v.Type() == cty.String && v.IsKnown() && !v.IsNull() {
			ref := root + "." + strings.TrimPrefix(v.AsString(), root+".")
			if strings.HasSuffix(attr.Expr.Range().Filename, ".json") {
				// JSON syntax writes a reference as a string.
				detail += fmt.Sprintf(" Did you mean %q?", ref)
			} else {
				detail += fmt.Sprintf(" Did you mean %s, without quotes?", ref)
			}
		}
		d.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  fmt.Sprintf("Invalid %s reference", name),
			Detail:   detail,
			Subject:  attr.Expr.Range().Ptr(),
		})
		return "", false
	}
	step, isAttr := tr[1].(hcl.TraverseAttr)
	if !isAttr {
		d.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  fmt.Sprintf("Invalid %s reference", name),
			Detail:   fmt.Sprintf("Write the reference as %s.<name>.", root),
			Subject:  attr.Expr.Range().Ptr(),
		})
		return "", false
	}
	if !ns.names[step.Name] {
		d.add(undeclared(ns, step.Name, tr.SourceRange()))
		return "", false
	}
	return step.Name, true
}

package config

import (
	"fmt"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// namespace is one root of a reference (var, local, ssh, policy): the noun
// a diagnostic uses for it and the names declared under it.
type namespace struct {
	noun   string // "input variable", "policy"
	plural string // "input variables", "policies"
	names  map[string]bool
	values map[string]cty.Value
}

// scope is what the expressions of one kind of block may refer to. Each
// block kind sees only what is resolved before it: variables, then locals,
// then ssh blocks and policies, then fleets and jobs.
type scope struct {
	roots map[string]*namespace
	order []string // root names, for "Did you mean" and listing
}

func newScope() *scope { return &scope{roots: map[string]*namespace{}} }

// with returns a copy of s that also knows the given root.
func (s *scope) with(root string, ns *namespace) *scope {
	c := &scope{roots: map[string]*namespace{}, order: append([]string(nil), s.order...)}
	for k, v := range s.roots {
		c.roots[k] = v
	}
	c.roots[root] = ns
	c.order = append(c.order, root)
	sort.Strings(c.order)
	return c
}

// evalContext builds the hcl.EvalContext of s: every root as an object of
// its values, with the shared function table.
func (s *scope) evalContext(funcs map[string]function.Function) *hcl.EvalContext {
	vars := make(map[string]cty.Value, len(s.roots))
	for root, ns := range s.roots {
		if len(ns.values) == 0 {
			vars[root] = cty.EmptyObjectVal
			continue
		}
		vars[root] = cty.ObjectVal(ns.values)
	}
	return &hcl.EvalContext{Variables: vars, Functions: funcs}
}

// check reports every reference in expr that names an unknown root or an
// undeclared name, with a suggestion. It returns false when expr must not
// be evaluated, so that one typo yields one diagnostic and not a cascade.
func (s *scope) check(expr hcl.Expression) (hcl.Diagnostics, bool) {
	var diags hcl.Diagnostics
	for _, tr := range expr.Variables() {
		root := tr.RootName()
		rootRange := tr[0].SourceRange()
		ns, ok := s.roots[root]
		if !ok {
			detail := fmt.Sprintf("There is nothing named %q here.", root)
			if dym := didYouMean(root, s.order); dym != "" {
				detail += dym
			} else if len(s.order) > 0 {
				detail += fmt.Sprintf(" References here start with %s.", quotedList(s.order))
			}
			if len(s.order) == 0 {
				detail = "Nothing can be referred to here; write a literal value."
			} else if _, known := knownRoots[root]; known {
				detail = fmt.Sprintf("%s cannot be referred to here; references here start with %s.", knownRoots[root], quotedList(s.order))
			}
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Unknown reference",
				Detail:   detail,
				Subject:  rootRange.Ptr(),
			})
			continue
		}
		if len(tr) < 2 {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Incomplete reference",
				Detail:   fmt.Sprintf("A reference to %s needs a name, such as %s.%s.", root, root, exampleName(ns)),
				Subject:  tr.SourceRange().Ptr(),
			})
			continue
		}
		var name string
		switch step := tr[1].(type) {
		case hcl.TraverseAttr:
			name = step.Name
		case hcl.TraverseIndex:
			if step.Key.Type() == cty.String && step.Key.IsKnown() && !step.Key.IsNull() {
				name = step.Key.AsString()
			}
		}
		if name == "" {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid reference",
				Detail:   fmt.Sprintf("A reference to %s takes a name, such as %s.%s.", root, root, exampleName(ns)),
				Subject:  tr.SourceRange().Ptr(),
			})
			continue
		}
		if ns.names[name] {
			continue
		}
		diags = append(diags, undeclared(ns, name, hcl.RangeBetween(rootRange, tr[1].SourceRange())))
	}
	return diags, !diags.HasErrors()
}

// knownRoots names the roots that exist somewhere in the language, for a
// better sentence when one is used where it is not available.
var knownRoots = map[string]string{
	"var":    "Input variables",
	"local":  "Local values",
	"ssh":    "ssh blocks",
	"policy": "Policies",
}

// undeclared is the diagnostic for a name that no block declares.
func undeclared(ns *namespace, name string, rng hcl.Range) *hcl.Diagnostic {
	detail := fmt.Sprintf("No %s %q is declared.", ns.noun, name)
	if dym := didYouMean(name, sortedKeys(ns.names)); dym != "" {
		detail += dym
	} else if len(ns.names) > 0 {
		detail += fmt.Sprintf(" Declared %s: %s.", ns.plural, quotedList(sortedKeys(ns.names)))
	} else {
		detail += fmt.Sprintf(" No %s are declared.", ns.plural)
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Unknown " + ns.noun,
		Detail:   detail,
		Subject:  rng.Ptr(),
	}
}

func exampleName(ns *namespace) string {
	if names := sortedKeys(ns.names); len(names) > 0 {
		return names[0]
	}
	return "name"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

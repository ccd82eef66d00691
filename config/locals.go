package config

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// localValues evaluates the attributes of every locals block. A local may
// refer to input variables and to other locals; they are evaluated in
// dependency order, and a cycle is reported once with every local in it.
func (l *loader) localValues(blocks hcl.Blocks) {
	l.locals = &namespace{noun: "local value", plural: "local values", names: map[string]bool{}, values: map[string]cty.Value{}}
	attrs := map[string]*hcl.Attribute{}
	var order []string
	for _, b := range blocks {
		as, diags := b.Body.JustAttributes()
		l.add(diags...)
		for _, name := range sortedAttributeNames(as) {
			a := as[name]
			if prev, dup := attrs[name]; dup {
				l.add(duplicate("local value", name, prev.NameRange, a.NameRange))
				continue
			}
			attrs[name] = a
			order = append(order, name)
			l.locals.names[name] = true
		}
	}
	d := l.decoder(newScope().with("var", l.vars).with("local", l.locals))
	// Kahn's algorithm: a local is evaluated once every local it refers to
	// is, so the work grows with the references, not with the square of
	// the number of locals (a chain of 40 000 took minutes).
	deps := map[string][]string{} // the declared locals each refers to
	waiting := map[string]int{}   // how many of those are not evaluated yet
	dependents := map[string][]string{}
	var ready []string
	for _, name := range order {
		deps[name] = localReferences(attrs[name], l.locals.names)
		waiting[name] = len(deps[name])
		for _, dep := range deps[name] {
			dependents[dep] = append(dependents[dep], name)
		}
		if waiting[name] == 0 {
			ready = append(ready, name)
		}
	}
	varObj := objectOf(l.vars)
	for len(ready) > 0 {
		name := ready[0]
		ready = ready[1:]
		// Each local sees only the locals it refers to: building the
		// object of every local for each of them would be quadratic too.
		seen := make(map[string]cty.Value, len(deps[name]))
		for _, dep := range deps[name] {
			seen[dep] = l.locals.values[dep]
		}
		d.ctx = &hcl.EvalContext{Variables: map[string]cty.Value{"var": varObj, "local": cty.ObjectVal(seen)}, Functions: l.funcs}
		l.locals.values[name] = l.evalLocal(d, attrs[name])
		for _, next := range dependents[name] {
			if waiting[next]--; waiting[next] == 0 {
				ready = append(ready, next)
			}
		}
	}
	var blocked []string
	for _, name := range order {
		if _, done := l.locals.values[name]; !done {
			blocked = append(blocked, name)
		}
	}
	if len(blocked) > 0 {
		l.reportCycle(attrs, blocked)
		for _, name := range blocked {
			l.locals.values[name] = cty.DynamicVal
		}
	}
	l.add(d.diags...)
	// The Config's copy is unmarked: its users read values, and the
	// variables' Sensitive field says which are secret.
	l.cfg.Locals = make(map[string]cty.Value, len(l.locals.values))
	for name, v := range l.locals.values {
		l.cfg.Locals[name], _ = v.UnmarkDeep()
	}
}

// localReferences lists, once each, the declared locals that attr refers
// to.
func localReferences(attr *hcl.Attribute, declared map[string]bool) []string {
	var refs []string
	seen := map[string]bool{}
	for _, tr := range attr.Expr.Variables() {
		if tr.RootName() != "local" || len(tr) < 2 {
			continue
		}
		step, ok := tr[1].(hcl.TraverseAttr)
		if !ok || !declared[step.Name] || seen[step.Name] {
			continue
		}
		seen[step.Name] = true
		refs = append(refs, step.Name)
	}
	return refs
}

// objectOf is the value a namespace is referred to by.
func objectOf(ns *namespace) cty.Value {
	if len(ns.values) == 0 {
		return cty.EmptyObjectVal
	}
	return cty.ObjectVal(ns.values)
}

// evalLocal evaluates one local; a failed one becomes unknown so that what
// refers to it is not reported again.
func (l *loader) evalLocal(d *decoder, attr *hcl.Attribute) cty.Value {
	diags, ok := d.scope.check(attr.Expr)
	d.add(diags...)
	if !ok {
		return cty.DynamicVal
	}
	v, diags := attr.Expr.Value(d.ctx)
	d.add(diags...)
	if diags.HasErrors() {
		return cty.DynamicVal
	}
	if v.ContainsMarked() {
		d.secrets.addValue(v)
	}
	return v
}

func (l *loader) reportCycle(attrs map[string]*hcl.Attribute, names []string) {
	sort.Strings(names)
	const listed = 10 // a generated cycle can hold thousands
	refs := make([]string, 0, listed+1)
	for _, n := range names[:min(len(names), listed)] {
		refs = append(refs, "local."+n)
	}
	if len(names) > listed {
		refs = append(refs, fmt.Sprintf("and %d more", len(names)-listed))
	}
	first := attrs[names[0]]
	if len(names) == 1 {
		l.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Cycle in local values",
			Detail:   fmt.Sprintf("local.%s refers to itself, so it cannot be evaluated.", names[0]),
			Subject:  first.NameRange.Ptr(),
		})
		return
	}
	l.add(&hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Cycle in local values",
		Detail: fmt.Sprintf("%s depend on each other, so none of them can be evaluated. Break the cycle by writing one of them without the others.",
			strings.Join(refs, ", ")),
		Subject: first.NameRange.Ptr(),
	})
}

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
	d := newDecoder(newScope().with("var", l.vars).with("local", l.locals), l.funcs)
	pending := append([]string(nil), order...)
	for len(pending) > 0 {
		var blocked []string
		for _, name := range pending {
			if !l.dependenciesResolved(attrs[name]) {
				blocked = append(blocked, name)
				continue
			}
			d.ctx = d.scope.evalContext(l.funcs)
			l.locals.values[name] = l.evalLocal(d, attrs[name])
		}
		if len(blocked) == len(pending) {
			l.reportCycle(attrs, blocked)
			for _, name := range blocked {
				l.locals.values[name] = cty.DynamicVal
			}
			break
		}
		pending = blocked
	}
	l.add(d.diags...)
	l.cfg.Locals = l.locals.values
}

// dependenciesResolved reports whether every declared local that attr
// refers to has a value. Undeclared ones do not block: evaluation reports
// them.
func (l *loader) dependenciesResolved(attr *hcl.Attribute) bool {
	for _, tr := range attr.Expr.Variables() {
		if tr.RootName() != "local" || len(tr) < 2 {
			continue
		}
		step, ok := tr[1].(hcl.TraverseAttr)
		if !ok || !l.locals.names[step.Name] {
			continue
		}
		if _, done := l.locals.values[step.Name]; !done {
			return false
		}
	}
	return true
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
	return v
}

func (l *loader) reportCycle(attrs map[string]*hcl.Attribute, names []string) {
	sort.Strings(names)
	refs := make([]string, len(names))
	for i, n := range names {
		refs[i] = "local." + n
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

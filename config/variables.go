package config

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// envVarPrefix names the environment variables that set input variables:
// GPULAYER_VAR_zone=europe-west4-a sets var.zone.
const envVarPrefix = "GPULAYER_VAR_"

var variableSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "type"},
		{Name: "default"},
		{Name: "description"},
		{Name: "sensitive"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "validation"}},
}

var validationSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "condition", Required: true},
		{Name: "error_message", Required: true},
	},
}

// typeKeywords are the words a type constraint starts with.
var typeKeywords = []string{"any", "bool", "list", "map", "number", "object", "set", "string", "tuple"}

// validationRule is a `validation` block of a variable.
type validationRule struct {
	condition    hcl.Expression
	errorMessage hcl.Expression
	declRange    hcl.Range
}

// variableValue is a value given for a variable, and where it came from.
type variableValue struct {
	value cty.Value
	// rng is where the value is written: an attribute of a variable file,
	// or a synthetic range naming the flag or environment variable.
	rng    hcl.Range
	source string // "--var", "GPULAYER_VAR_zone", a file name
}

// variables declares the input variables, gives each its value by
// Terraform's precedence (default < environment < *.auto.vars.hcl in
// lexical order < --var-file and --var in command-line order), converts
// it to the declared type and runs its validation rules.
func (l *loader) variables(blocks hcl.Blocks) {
	l.vars = &namespace{noun: "input variable", plural: "input variables", names: map[string]bool{}, values: map[string]cty.Value{}}
	decls := map[string]*Variable{}
	declared := map[string]hcl.Range{}
	rules := map[string][]validationRule{}
	literal := newDecoder(newScope(), nil)
	for _, b := range blocks {
		name, ok := l.declare(declared, "variable", true, b)
		if !ok {
			continue
		}
		v := &Variable{Name: name, Type: cty.DynamicPseudoType, DeclRange: b.DefRange}
		content, diags := b.Body.Content(variableSchema)
		l.add(diags...)
		if attr := content.Attributes["type"]; attr != nil {
			ty, diags := typeexpr.TypeConstraint(attr.Expr)
			if kw := hcl.ExprAsKeyword(attr.Expr); kw != "" && diags.HasErrors() {
				for _, d := range diags {
					d.Detail += didYouMean(kw, typeKeywords)
				}
			}
			l.add(diags...)
			if !diags.HasErrors() {
				v.Type = ty
			}
		}
		literal.str(content.Attributes, "description", &v.Description)
		literal.boolean(content.Attributes, "sensitive", &v.Sensitive)
		if attr := content.Attributes["default"]; attr != nil {
			if v.Sensitive {
				l.secrets.addRange(attr.Expr.Range())
			}
			v.HasDefault = true
			v.Value = cty.NullVal(v.Type)
			diags, ok := literal.scope.check(attr.Expr)
			l.add(diags...)
			if ok {
				val, diags := attr.Expr.Value(nil)
				l.add(diags...)
				if !diags.HasErrors() {
					l.setValue(v, variableValue{value: val, rng: attr.Expr.Range(), source: "default"})
				}
			}
			if !v.set { // reported above; do not also call it required
				v.Value, v.set = cty.DynamicVal, true
			}
		}
		for _, vb := range content.Blocks {
			vc, diags := vb.Body.Content(validationSchema)
			l.add(diags...)
			if vc.Attributes["condition"] != nil && vc.Attributes["error_message"] != nil {
				rules[name] = append(rules[name], validationRule{
					condition:    vc.Attributes["condition"].Expr,
					errorMessage: vc.Attributes["error_message"].Expr,
					declRange:    vb.DefRange,
				})
			}
		}
		decls[name] = v
		l.vars.names[name] = true
		l.cfg.Variables = append(l.cfg.Variables, v)
	}
	l.add(literal.diags...)
	sort.Slice(l.cfg.Variables, func(i, j int) bool { return l.cfg.Variables[i].Name < l.cfg.Variables[j].Name })

	l.environmentValues(decls)
	l.autoVarFiles(decls)
	l.commandLineValues(decls)

	for _, v := range l.cfg.Variables {
		if !v.HasValue() && l.opts.UnsetVariablesUnknown {
			v.Value = cty.UnknownVal(v.Type)
			l.vars.values[v.Name] = v.Value
			if v.Sensitive {
				l.vars.values[v.Name] = v.Value.Mark(sensitiveMark{})
			}
			continue
		}
		if !v.HasValue() {
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "No value for required variable",
				Detail: fmt.Sprintf("The variable %q has no default and was given no value. Set it with --var %s=VALUE, in a --var-file or an *.auto.vars.hcl file, or with the environment variable %s%s.",
					v.Name, v.Name, envVarPrefix, v.Name),
				Subject: v.DeclRange.Ptr(),
			})
			l.vars.values[v.Name] = cty.DynamicVal
			continue
		}
		l.vars.values[v.Name] = v.Value
		if v.Sensitive {
			l.vars.values[v.Name] = v.Value.Mark(sensitiveMark{})
		}
	}
	for _, v := range l.cfg.Variables {
		l.validate(v, rules[v.Name])
	}
}

// setValue converts a given value to the variable's type and records it.
func (l *loader) setValue(v *Variable, given variableValue) {
	val, _ := given.value.UnmarkDeep()
	if v.Sensitive {
		l.secrets.addValue(val)
	}
	cv, err := convert.Convert(val, v.Type)
	if err != nil {
		l.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for variable",
			Detail:   fmt.Sprintf("The value for variable %q from %s is not a %s: %s.", v.Name, given.source, typeexpr.TypeString(v.Type), err),
			Subject:  given.rng.Ptr(),
		})
		v.Value, v.set = cty.DynamicVal, true
		return
	}
	v.Value, v.set, v.valueRange = cv, true, given.rng
}

// valueFromString turns the text of --var or GPULAYER_VAR_x into a value:
// as-is for a variable of a primitive type, parsed as an HCL expression for
// a list, map or object, as Terraform does.
func (l *loader) valueFromString(v *Variable, text, source string) {
	rng := hcl.Range{Filename: fmt.Sprintf("<value for var.%s>", v.Name), Start: hcl.InitialPos, End: hcl.InitialPos}
	if v.Sensitive {
		l.secrets.addText(text)
	}
	if v.Type == cty.DynamicPseudoType || v.Type.IsPrimitiveType() {
		l.setValue(v, variableValue{value: cty.StringVal(text), rng: rng, source: source})
		return
	}
	if off := nestingTooDeep([]byte(text), syntaxExpression); off >= 0 {
		l.add(nestingDiagnostic([]byte(text), off, rng.Filename, fmt.Sprintf("The value for variable %q from %s", v.Name, source)))
		v.Value, v.set = cty.DynamicVal, true
		return
	}
	expr, diags := hclsyntax.ParseExpression([]byte(text), rng.Filename, hcl.InitialPos)
	if !diags.HasErrors() {
		var val cty.Value
		val, diags = expr.Value(nil)
		if !diags.HasErrors() {
			l.setValue(v, variableValue{value: val, rng: rng, source: source})
			return
		}
	}
	l.add(&hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Invalid value for variable",
		Detail: fmt.Sprintf("The value for variable %q from %s is not a valid %s expression: %s.",
			v.Name, source, typeexpr.TypeString(v.Type), diags[0].Detail),
		Subject: rng.Ptr(),
	})
	v.Value, v.set = cty.DynamicVal, true
}

func (l *loader) environmentValues(decls map[string]*Variable) {
	env := append([]string(nil), l.opts.Environ...)
	sort.Strings(env)
	for _, kv := range env {
		key, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(key, envVarPrefix) {
			continue
		}
		// Undeclared names are ignored: the environment is shared with
		// other configurations, as in Terraform.
		if v := decls[strings.TrimPrefix(key, envVarPrefix)]; v != nil {
			l.valueFromString(v, value, key)
		}
	}
}

func (l *loader) autoVarFiles(decls map[string]*Variable) {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return // readFiles has reported it
	}
	for _, e := range entries { // ReadDir sorts by name
		if !e.IsDir() && isAutoVarsFile(e.Name()) {
			l.varFile(decls, filepath.Join(l.dir, e.Name()), hcl.DiagWarning)
		}
	}
}

func (l *loader) commandLineValues(decls map[string]*Variable) {
	for _, arg := range l.opts.Vars {
		if arg.File != "" {
			l.varFile(decls, arg.File, hcl.DiagError)
			continue
		}
		name, value, ok := strings.Cut(arg.Assignment, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid --var option",
				Detail:   fmt.Sprintf("The option --var %q is not a name and a value separated by an equals sign; write it as --var name=value.", arg.Assignment),
			})
			continue
		}
		v := decls[name]
		if v == nil {
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Value for undeclared variable",
				Detail: fmt.Sprintf("--var sets %q, but no variable %q is declared.%s Declare it with a variable block, or remove the option.",
					name, name, didYouMean(name, sortedKeys(decls))),
			})
			continue
		}
		l.valueFromString(v, value, "--var")
	}
}

// varFile reads name = value lines. An undeclared name is a warning in a
// file found automatically and an error in one named on the command line.
func (l *loader) varFile(decls map[string]*Variable, path string, undeclaredSeverity hcl.DiagnosticSeverity) {
	f, diags := l.parseFile(path, "Cannot read variable file")
	l.add(diags...)
	if f == nil || diags.HasErrors() {
		return
	}
	attrs, diags := f.Body.JustAttributes()
	l.add(diags...)
	literal := newDecoder(newScope(), nil)
	for _, name := range sortedAttributeNames(attrs) {
		attr := attrs[name]
		v := decls[name]
		if v != nil && v.Sensitive {
			l.secrets.addRange(attr.Expr.Range())
		}
		if v == nil {
			l.add(&hcl.Diagnostic{
				Severity: undeclaredSeverity,
				Summary:  "Value for undeclared variable",
				Detail: fmt.Sprintf("%s sets %q, but no variable %q is declared.%s",
					filepath.Base(path), name, name, didYouMean(name, sortedKeys(decls))),
				Subject: attr.NameRange.Ptr(),
			})
			continue
		}
		diags, ok := literal.scope.check(attr.Expr)
		l.add(diags...)
		if !ok {
			continue
		}
		val, diags := attr.Expr.Value(nil)
		l.add(diags...)
		if diags.HasErrors() {
			continue
		}
		l.setValue(v, variableValue{value: val, rng: attr.Expr.Range(), source: filepath.Base(path)})
	}
}

// sortedAttributeNames orders attributes by position, as written.
func sortedAttributeNames(attrs hcl.Attributes) []string {
	names := sortedKeys(attrs)
	sort.SliceStable(names, func(i, j int) bool {
		return attrs[names[i]].Range.Start.Byte < attrs[names[j]].Range.Start.Byte
	})
	return names
}

// validate runs the validation rules of v. Each condition sees the input
// variables and the functions. The references of every condition are
// checked; a condition is evaluated only when v's value is known, and counts
// only when its result is: as in Terraform, a rule cannot judge a value
// that is not there yet (a variable validate was given no value for, or one
// whose value was already reported wrong).
func (l *loader) validate(v *Variable, rules []validationRule) {
	// Read before the loop: a failed rule makes the value unknown for what
	// refers to the variable, not for the variable's other rules.
	known := l.vars.values[v.Name].IsWhollyKnown()
	d := l.decoder(newScope().with("var", l.vars))
	for _, r := range rules {
		diags, ok := d.scope.check(r.condition)
		l.add(diags...)
		if !ok || !known {
			continue
		}
		cond, diags := r.condition.Value(d.ctx)
		l.add(diags...)
		if diags.HasErrors() {
			continue
		}
		cond, _ = cond.UnmarkDeep() // true or false says nothing of the value
		if !cond.IsKnown() {
			continue // computed from another variable that is not known
		}
		cond, err := convert.Convert(cond, cty.Bool)
		if err != nil || cond.IsNull() {
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid validation condition",
				Detail:   "The condition of a validation rule must be true or false.",
				Subject:  r.condition.Range().Ptr(),
			})
			continue
		}
		if cond.True() {
			continue
		}
		msg := "The value does not pass its validation rule."
		m, diags := r.errorMessage.Value(d.ctx)
		switch {
		case diags.HasErrors() || m.Type() != cty.String || !m.IsWhollyKnown() || m.IsNull():
			l.add(diags...)
		case m.ContainsMarked():
			// As Terraform does: the message would show the value.
			msg = "The error message of the validation rule includes a sensitive value, so it is not shown."
		default:
			msg = m.AsString()
		}
		// What refers to the variable is not checked again with a value
		// already known to be wrong.
		l.vars.values[v.Name] = cty.DynamicVal
		subject := r.condition.Range()
		if v.valueRange.Filename != "" {
			subject = v.valueRange
		}
		l.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for variable",
			Detail: fmt.Sprintf("%s\n\nThis was checked by the validation rule at %s:%d.",
				msg, r.condition.Range().Filename, r.condition.Range().Start.Line),
			Subject: subject.Ptr(),
		})
	}
	l.add(d.diags...)
}

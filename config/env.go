package config

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// shellVariables are names that are valid but that sh keeps for itself:
// the launch script (reconcile/launch) exports a job's env with
// `export NAME=value` in the machine's sh, and the program runs under a
// small sh that leads its session, so a value for one of these either
// ends the script or never reaches the program. Each says why.
var shellVariables = map[string]string{
	"IFS":    "sh does not pass IFS to the programs it starts, and the launch script's own shell would split words on it",
	"PWD":    "sh sets PWD to the working directory itself; set workdir instead",
	"OPTIND": "sh sets OPTIND to 1 when it starts, and dash refuses a value that is not a number",
	// bash is sh on Fedora, RHEL and their kin; in it these are read-only,
	// and exporting one ends the script.
	"UID":           readOnlyInBash,
	"EUID":          readOnlyInBash,
	"PPID":          readOnlyInBash,
	"SHELLOPTS":     readOnlyInBash,
	"BASHOPTS":      readOnlyInBash,
	"BASH_VERSINFO": readOnlyInBash,
}

const readOnlyInBash = "it is read-only in bash, which is sh on some systems, so exporting it would end the launch script"

// launchScriptPrefix starts the names of the launch script's own shell
// variables (gpulayer_port, gpulayer_log, ...): a job's variable of such a
// name would replace one of them.
const launchScriptPrefix = "gpulayer_"

// validEnvName reports whether name is a POSIX name, [A-Za-z_][A-Za-z0-9_]*:
// the only names sh can export. Another name is dropped (`BAD NAME`) or
// arrives as a different variable (`A=B` arrives as A).
func validEnvName(name string) bool {
	for i, r := range name {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_'
		if !letter && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return name != ""
}

// EnvNameProblem is the summary and the reason why name cannot be the
// name of a job's environment variable; both empty when it can be. A
// saved plan's job environments are checked with it too.
// gpulayer's own variables (MASTER_ADDR, GPULAYER_RUN_ID, ...) are not
// refused: they win over the job's (docs/apply.md).
func EnvNameProblem(name string) (summary, reason string) {
	switch {
	case !validEnvName(name):
		reason = "a name is a letter or an underscore, then letters, digits and underscores ([A-Za-z_][A-Za-z0-9_]*); sh cannot export any other name"
		if strings.Contains(name, "=") {
			reason += fmt.Sprintf(", and this one would arrive as the variable %q", name[:strings.Index(name, "=")])
		}
		return "Invalid environment variable name", reason
	case shellVariables[name] != "":
		return "Reserved environment variable name", shellVariables[name]
	case strings.HasPrefix(name, launchScriptPrefix):
		return "Reserved environment variable name", "names that start with " + launchScriptPrefix + " are the launch script's own shell variables, which a job's variable would replace"
	}
	return "", ""
}

// env reads a job's env attribute into dst. Its names are checked even
// where some values are not known, since a name is wrong whatever its
// value.
func (d *decoder) env(attrs hcl.Attributes, dst *map[string]string) {
	attr := attrs["env"]
	v, ok := d.evalKnown(attr, cty.Map(cty.String))
	if !ok {
		return
	}
	d.checkEnvNames(attr, v)
	if !d.noNullElement(attr, v) {
		return
	}
	if !v.IsWhollyKnown() {
		d.unknown[attr.Expr.Range()] = true
		return
	}
	*dst = goStringMap(v)
}

// checkEnvNames reports each name of env, the converted value of attr,
// that a job's process could not get. env may hold unknown values (of a
// variable validate was not given): its names are known all the same.
func (d *decoder) checkEnvNames(attr *hcl.Attribute, env cty.Value) {
	for it := env.ElementIterator(); it.Next(); {
		k, _ := it.Element()
		name := k.AsString()
		summary, reason := EnvNameProblem(name)
		if summary == "" {
			continue
		}
		subject, literal := literalKeyRange(attr.Expr, name)
		detail := fmt.Sprintf("%q cannot be the name of an environment variable: %s. Rename it.", name, reason)
		if !literal && d.isSensitive(attr) {
			// The name may be the secret itself (env = var.token_env).
			detail = fmt.Sprintf("A name in %s, computed from a sensitive variable and not shown here, cannot be the name of an environment variable: %s.", attr.Name, reason)
		}
		// Appended as is: add would replace the detail of a sensitive
		// attribute's range with one that does not say what is wrong.
		d.diags = append(d.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  summary,
			Detail:   detail,
			Subject:  subject.Ptr(),
		})
	}
}

// literalKeyRange is the range of the key name where expr is an object
// written out (`{ NAME = "x" }`, in native or JSON syntax) that spells it
// as a literal; otherwise, where the map is built by a function or comes
// from a local, the range of expr itself.
func literalKeyRange(expr hcl.Expression, name string) (hcl.Range, bool) {
	pairs, diags := hcl.ExprMap(expr)
	if diags.HasErrors() {
		return expr.Range(), false
	}
	for _, p := range pairs {
		// With no EvalContext only a literal key evaluates.
		k, diags := p.Key.Value(nil)
		if !diags.HasErrors() && k.Type() == cty.String && k.IsKnown() && !k.IsNull() && k.AsString() == name {
			return p.Key.Range(), true
		}
	}
	return expr.Range(), false
}

package config

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

var torchrunSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "args"}}}

// torchrunOwned are the torchrun options gpulayer sets itself
// (reconcile/launch Argv), in torch 1.x's underscore spelling, with why a
// job may not set them. family options are refused with any ending
// (--rdzv_backend, --rdzv_endpoint, ... and those torch adds later).
var torchrunOwned = []struct {
	name   string
	family bool
	why    string
}{
	{name: "nnodes", why: "it is the job's nodes"},
	{name: "nproc_per_node", why: "it is the job's gpus_per_node (1 for a CPU-only job)"},
	{name: "node_rank", why: "each node gets its own rank"},
	{name: "master_addr", why: "it is node 0's address"},
	{name: "master_port", why: "it is the job's master_port, or the port node 0 picked"},
	{name: "max_restarts", why: "it is 0: torchrun's static rendezvous cannot restart workers across nodes, so gpulayer replaces a failed job as a whole"},
	{name: "rdzv", family: true, why: "every node joins a static rendezvous on node 0 (master_addr and master_port)"},
	{name: "standalone", why: "every node joins a static rendezvous on node 0 (master_addr and master_port)"},
	{name: "no_python", why: "it is given when the command does not start with python or python3"},
}

// TorchrunArgProblem is why arg cannot be one of a job's torchrun args
// ("" when it can): an option gpulayer sets itself, in either spelling
// (torch 2 takes --nproc-per-node and --nproc_per_node alike), with or
// without =VALUE, or abbreviated as Python's argparse allows (--nproc
// would be taken for --nproc_per_node). A saved plan's args are checked
// with it too.
func TorchrunArgProblem(arg string) string {
	if !strings.HasPrefix(arg, "--") || arg == "--" {
		return ""
	}
	name, _, _ := strings.Cut(arg[2:], "=")
	norm := strings.ReplaceAll(name, "-", "_")
	if norm == "" {
		return ""
	}
	for _, o := range torchrunOwned {
		switch {
		case norm == o.name || (o.family && strings.HasPrefix(norm, o.name)):
			return fmt.Sprintf("%s is an option gpulayer sets itself: %s", "--"+name, o.why)
		case strings.HasPrefix(o.name, norm):
			return fmt.Sprintf("%s abbreviates --%s, an option gpulayer sets itself: %s", "--"+name, o.name, o.why)
		}
	}
	return ""
}

// torchrunBlocks reads a job's torchrun block (at most one) into j.
func (l *loader) torchrunBlocks(d *decoder, j *Job, blocks hcl.Blocks, launcher *hcl.Attribute) {
	for i, b := range blocks {
		if i > 0 {
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate torchrun block",
				Detail: fmt.Sprintf("Job %q already has a torchrun block at %s:%d; a job has at most one. Put every argument in its args.",
					j.Name, blocks[0].DefRange.Filename, blocks[0].DefRange.Start.Line),
				Subject: b.DefRange.Ptr(),
			})
			continue
		}
		content, diags := b.Body.Content(torchrunSchema)
		l.add(diags...)
		d.torchrunArgs(content.Attributes["args"], &j.TorchrunArgs)
		if j.Launcher != LauncherTorchrun && !d.isUnknown(launcher) {
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagWarning,
				Summary:  "torchrun block of a job that does not use torchrun",
				Detail: fmt.Sprintf("Job %q runs with launcher %q, so its torchrun block is not used. Remove the block, or set launcher = %q.",
					j.Name, j.Launcher, LauncherTorchrun),
				Subject: b.DefRange.Ptr(),
			})
		}
	}
}

// torchrunArgs reads args into dst, refusing each option gpulayer sets
// itself at the element where the list is written out, else at args. The
// elements that are known are checked even where others are not (a
// variable validate was given no value).
func (d *decoder) torchrunArgs(attr *hcl.Attribute, dst *[]string) {
	v, ok := d.evalKnown(attr, cty.List(cty.String))
	if !ok || !d.noNullElement(attr, v) {
		return
	}
	var elems []hcl.Expression
	if exprs, diags := hcl.ExprList(attr.Expr); !diags.HasErrors() && len(exprs) == v.LengthInt() {
		elems = exprs
	}
	fine := true
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		if !e.IsKnown() {
			continue
		}
		why := TorchrunArgProblem(e.AsString())
		if why == "" {
			continue
		}
		fine = false
		subject, detail := attr.Expr.Range(), capitalize(why)+". Remove it from torchrun args."
		literal := false // the element's text is in the file, not from a variable
		if i, _ := k.AsBigFloat().Int64(); elems != nil {
			subject, literal = elems[i].Range(), len(elems[i].Variables()) == 0
		}
		if !literal && d.isSensitive(attr) {
			detail = "An argument, computed from a sensitive variable and not shown here, is an option gpulayer sets itself (--nnodes, --nproc_per_node, --node_rank, --master_addr, --master_port, --max_restarts, --rdzv_*, --standalone or --no_python). Remove it from torchrun args."
		}
		// Appended as is: add would replace the detail of a sensitive
		// attribute's range with one that does not say what is wrong.
		d.diags = append(d.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Reserved torchrun argument",
			Detail:   detail,
			Subject:  subject.Ptr(),
		})
	}
	if !fine {
		return
	}
	if !v.IsWhollyKnown() {
		d.unknown[attr.Expr.Range()] = true
		return
	}
	out := make([]string, 0, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		out = append(out, e.AsString())
	}
	*dst = out
}

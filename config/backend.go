package config

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Backend kinds: where state is kept (docs/state.md, docs/gitops.md).
const (
	BackendLocal = "local" // the default: .gpulayer/state.json beside the configuration
	BackendGCS   = "gcs"   // a Cloud Storage bucket
)

// Backend is the configuration's `backend "KIND"` block; nil when it has
// none (the local file).
type Backend struct {
	Kind string `json:"kind"`
	// Bucket and Prefix place the state at gs://BUCKET/PREFIX/default.json.
	Bucket string `json:"bucket,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	// Endpoint overrides the storage API's endpoint (emulators, tests).
	Endpoint  string    `json:"endpoint,omitempty"`
	DeclRange hcl.Range `json:"-"`
}

var backendSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "bucket"}, {Name: "prefix"}, {Name: "endpoint"},
}}

// backends reads the backend block: at most one, of a known kind.
func (l *loader) backends(blocks hcl.Blocks) {
	if len(blocks) == 0 {
		return
	}
	d := l.decoder(newScope().with("var", l.vars).with("local", l.locals))
	for i, b := range blocks {
		if i > 0 {
			l.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate backend block",
				Detail: fmt.Sprintf("A configuration keeps its state in one place; a backend block is already declared at %s:%d.",
					blocks[0].DefRange.Filename, blocks[0].DefRange.Start.Line),
				Subject: b.DefRange.Ptr()})
			continue
		}
		kind := b.Labels[0]
		if kind != BackendGCS && kind != BackendLocal {
			l.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown backend",
				Detail:  fmt.Sprintf("Backend %q is not one gpulayer has; want \"gcs\" (a Cloud Storage bucket) or \"local\" (the default, a file beside the configuration).", kind),
				Subject: b.LabelRanges[0].Ptr()})
			continue
		}
		be := &Backend{Kind: kind, DeclRange: b.DefRange}
		content, diags := b.Body.Content(backendSchema)
		l.add(diags...)
		a := content.Attributes
		d.str(a, "bucket", &be.Bucket)
		d.str(a, "prefix", &be.Prefix)
		d.str(a, "endpoint", &be.Endpoint)
		switch {
		case kind == BackendLocal && len(a) > 0:
			for name, attr := range a {
				l.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unsupported argument",
					Detail:  fmt.Sprintf("The local backend takes no %s; its file is .gpulayer/state.json beside the configuration, or --state FILE.", name),
					Subject: attr.NameRange.Ptr()})
			}
		case kind == BackendGCS && a["bucket"] == nil:
			l.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing required argument",
				Detail: "The gcs backend needs the bucket that holds the state.", Subject: b.DefRange.Ptr()})
		case kind == BackendGCS:
			// A bucket that is not known (a variable validate was given no
			// value for) may be a fine one; a null one is no bucket.
			if err := checkBucket(be.Bucket); err != nil && !d.isUnknown(a["bucket"]) {
				l.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid bucket name",
					Detail: capitalize(err.Error()) + ".", Subject: a["bucket"].Expr.Range().Ptr()})
			}
			if strings.Contains(be.Prefix, "//") || strings.Contains(be.Prefix, "..") {
				l.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid prefix",
					Detail: fmt.Sprintf("prefix %q holds an empty or .. path segment; write it as \"team/prod\".", be.Prefix), Subject: a["prefix"].Expr.Range().Ptr()})
			}
		}
		l.cfg.Backend = be
	}
	l.add(d.diags...)
}

// checkBucket checks a Cloud Storage bucket name as the service does:
// 3-63 characters, lower-case letters, digits, '-', '_' and '.', starting
// and ending with a letter or digit.
func checkBucket(name string) error {
	if len(name) < 3 || len(name) > 63 {
		return fmt.Errorf("bucket %q must be 3 to 63 characters long", name)
	}
	for i, r := range name {
		alnum := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		if !alnum && ((i == 0 || i == len(name)-1) || (r != '-' && r != '_' && r != '.')) {
			return fmt.Errorf("bucket %q may hold only lower-case letters, digits, '-', '_' and '.', and must start and end with a letter or digit", name)
		}
	}
	return nil
}

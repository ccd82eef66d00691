package config

import (
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// MaxMaxWait bounds a policy's max_wait: a wait is for machines that are
// expected to free soon, and a week is no longer "soon"; a larger value
// is more likely a typo ("15h" for "15m") than a plan.
const MaxMaxWait = 7 * 24 * time.Hour

// maxWait decodes a policy's max_wait: a duration, only under prefer (a
// required level already waits for as long as it takes; any has no
// tighter group to wait for), at most MaxMaxWait.
func maxWait(d *decoder, a hcl.Attributes, p *Policy) {
	if !d.duration(a, "max_wait", &p.MaxWait) {
		return
	}
	rng := a["max_wait"].Expr.Range().Ptr()
	switch {
	case p.GroupLocality != LocalityPrefer:
		d.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "max_wait needs group_locality = \"prefer\"",
			Detail: fmt.Sprintf("max_wait is how long a job waits for a tighter group before it is placed at a looser level; under group_locality %q the job %s. Remove max_wait, or set group_locality = \"prefer\".",
				p.GroupLocality, map[bool]string{true: "ignores location", false: "already waits for its level for as long as it takes"}[p.GroupLocality == LocalityAny]),
			Subject: rng,
		})
		p.MaxWait = 0
	case p.MaxWait > MaxMaxWait:
		d.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for max_wait",
			Detail:   fmt.Sprintf("max_wait is at most 168h (a week); got %s.", p.MaxWait),
			Subject:  rng,
		})
		p.MaxWait = 0
	}
}

package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

var gcpSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "project", Required: true}, {Name: "zone", Required: true},
	{Name: "machine_type", Required: true}, {Name: "image", Required: true},
	{Name: "accelerator_type"}, {Name: "accelerator_count"}, {Name: "disk_size_gb"},
	{Name: "spot"}, {Name: "network"}, {Name: "subnetwork"}, {Name: "service_account"},
	{Name: "tags"}, {Name: "metadata"}, {Name: "labels"}, {Name: "placement"},
	{Name: "endpoint"},
}}

var (
	// gcpZone is every Compute Engine zone's form: a region
	// ("europe-west1", "northamerica-northeast2") and a letter.
	gcpZone = regexp.MustCompile(`^[a-z]+-[a-z]+[0-9]+-[a-z]$`)
	// gcpProject is a project id: 6 to 30 lower-case letters, digits and
	// hyphens, starting with a letter, optionally under a domain
	// ("example.com:my-project").
	gcpProject = regexp.MustCompile(`^([a-z0-9.-]+:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$`)
	// gcpName is a resource name (machine type, accelerator type, network
	// tag): RFC 1035 label.
	gcpName = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)
	// gcpLabelKey and gcpLabelValue are Compute Engine's label rules,
	// restricted to ASCII.
	gcpLabelKey   = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
	gcpLabelValue = regexp.MustCompile(`^[a-z0-9_-]{0,63}$`)
)

// GCPLabelFleet and GCPLabelLineage are the labels gpulayer puts on every
// machine it creates; a configuration may not set them.
const (
	GCPLabelFleet   = "gpulayer-fleet"
	GCPLabelLineage = "gpulayer-lineage"
)

func (l *loader) gcp(d *decoder, fleet string, b *hcl.Block) *GCP {
	g := &GCP{DeclRange: b.DefRange}
	content, diags := b.Body.Content(gcpSchema)
	l.add(diags...)
	a := content.Attributes
	bad := func(name, summary, detail string) {
		d.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  summary,
			Detail:   detail,
			Subject:  a[name].Expr.Range().Ptr(),
		})
	}
	if d.str(a, "project", &g.Project) && !gcpProject.MatchString(g.Project) {
		bad("project", "Invalid GCP project", fmt.Sprintf("%q is not a project id: 6 to 30 lower-case letters, digits and hyphens, starting with a letter and not ending with a hyphen (the id, not the project's display name or number).", g.Project))
	}
	if !d.str(a, "zone", &g.Zone) {
		l.locationUnknown = true
	} else if !gcpZone.MatchString(g.Zone) {
		bad("zone", "Invalid GCP zone", fmt.Sprintf("%q is not a zone: a zone is a region and a letter, such as \"europe-west1-b\" or \"us-central1-a\" (gcloud compute zones list).", g.Zone))
		l.locationUnknown = true
	}
	if d.str(a, "machine_type", &g.MachineType) && !gcpName.MatchString(g.MachineType) {
		bad("machine_type", "Invalid machine type", fmt.Sprintf("%q is not a machine type name, such as \"a2-highgpu-4g\" (lower-case letters, digits and hyphens; the name, not a URL).", g.MachineType))
	}
	if d.str(a, "image", &g.Image) && strings.TrimSpace(g.Image) == "" {
		bad("image", "Invalid image", "The image is empty; name one, such as \"projects/deeplearning-platform-release/global/images/family/pytorch-latest-gpu\".")
	}
	hasType := d.str(a, "accelerator_type", &g.AcceleratorType)
	if hasType && !gcpName.MatchString(g.AcceleratorType) {
		bad("accelerator_type", "Invalid accelerator type", fmt.Sprintf("%q is not an accelerator type name, such as \"nvidia-tesla-t4\" or \"nvidia-l4\".", g.AcceleratorType))
	}
	hasCount := d.integer(a, "accelerator_count", 1, &g.AcceleratorCount)
	switch {
	case hasType && !hasCount && a["accelerator_count"] == nil:
		bad("accelerator_type", "accelerator_type without accelerator_count", "Set accelerator_count, the number of GPUs of this type to attach to each machine, or remove accelerator_type to use the machine type's own GPUs.")
	case hasCount && !hasType && a["accelerator_type"] == nil:
		bad("accelerator_count", "accelerator_count without accelerator_type", "Set accelerator_type, the kind of GPU to attach (such as \"nvidia-tesla-t4\"), or remove accelerator_count.")
	}
	if d.integer(a, "disk_size_gb", 10, &g.DiskSizeGB) && g.DiskSizeGB > 65536 {
		bad("disk_size_gb", "Invalid value for disk_size_gb", fmt.Sprintf("disk_size_gb must be at most 65536 (64 TB), got %d.", g.DiskSizeGB))
	}
	d.boolean(a, "spot", &g.Spot)
	d.str(a, "network", &g.Network)
	d.str(a, "subnetwork", &g.Subnetwork)
	d.str(a, "service_account", &g.ServiceAccount)
	if d.strList(a, "tags", &g.Tags) {
		for _, t := range g.Tags {
			if !gcpName.MatchString(t) {
				bad("tags", "Invalid network tag", fmt.Sprintf("%q is not a network tag: 1 to 63 lower-case letters, digits and hyphens, starting with a letter.", t))
				break
			}
		}
	}
	d.strMap(a, "metadata", &g.Metadata)
	if d.strMap(a, "labels", &g.Labels) {
		for _, k := range sortedKeys(g.Labels) {
			v := g.Labels[k]
			switch {
			case k == GCPLabelFleet || k == GCPLabelLineage:
				bad("labels", "Reserved label", fmt.Sprintf("gpulayer sets the label %q on every machine it creates, to find them again; remove it from labels.", k))
			case !gcpLabelKey.MatchString(k):
				bad("labels", "Invalid label key", fmt.Sprintf("Label key %q is not valid on GCP: up to 63 lower-case letters, digits, '_' and '-', starting with a letter.", k))
			case !gcpLabelValue.MatchString(v):
				bad("labels", "Invalid label value", fmt.Sprintf("The value of label %q is not valid on GCP: up to 63 lower-case letters, digits, '_' and '-'.", k))
			default:
				continue
			}
			break
		}
	}
	d.enum(a, "placement", []string{GCPPlacementCompact, GCPPlacementSpread}, &g.Placement)
	if d.str(a, "endpoint", &g.Endpoint) {
		if u, err := url.Parse(g.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("endpoint", "Invalid endpoint", fmt.Sprintf("%q is not an http or https URL, such as \"http://127.0.0.1:8080/\".", g.Endpoint))
		}
	}
	// Machines are named <fleet>-<i>: the fleet's name must make valid
	// instance names.
	if !gcpName.MatchString(fleet+"-0") || len(fleet) > 55 {
		d.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Fleet name not usable on GCP",
			Detail:   fmt.Sprintf("gpulayer names a gcp fleet's machines %q, %q, ...; GCP instance names allow lower-case letters, digits and hyphens, starting with a letter, so rename fleet %q (at most 55 characters).", fleet+"-0", fleet+"-1", fleet),
			Subject:  b.DefRange.Ptr(),
		})
	}
	return g
}

// SpecHash is the hash of what a machine is created from and cannot change
// without being created again (docs/language.md, "What needs a new
// machine"): a machine whose recorded hash differs is replaced. Tags,
// metadata and labels are not part of it: they apply to machines created
// from then on.
func (g *GCP) SpecHash() string {
	h := sha256.New()
	for _, v := range []string{
		g.Project, g.Zone, g.MachineType, g.Image, g.AcceleratorType,
		strconv.Itoa(g.AcceleratorCount), strconv.Itoa(g.DiskSizeGB), strconv.FormatBool(g.Spot),
		g.Network, g.Subnetwork, g.ServiceAccount, g.Placement,
	} {
		// Length-prefixed, so that no two lists of values hash alike.
		fmt.Fprintf(h, "%d:%s;", len(v), v)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

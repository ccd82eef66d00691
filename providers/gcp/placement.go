package gcp

import (
	"context"
	"fmt"
	"net/http"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"

	"github.com/gpulayer/gpulayer/config"
)

// policyName is the resource policy of a fleet with placement: one per
// fleet, shared by its machines, so that compact places them together.
func policyName(fleet string) string { return "gpulayer-" + fleet }

// region is a zone's region: the zone without its last "-x".
func region(zone string) string {
	for i := len(zone) - 1; i >= 0; i-- {
		if zone[i] == '-' {
			return zone[:i]
		}
	}
	return zone
}

// Spread places machines across availability domains; Compute Engine
// allows 2 to 8 of them.
const (
	minDomains = 2
	maxDomains = 8
)

// ensurePolicy returns the URL of fleet's placement policy, creating it if
// it does not exist, or "" when the fleet declares no placement. A policy
// created by a concurrent Create (409) is as good as one this call made.
func (p *Provider) ensurePolicy(ctx context.Context, c *clients, fleet *config.Fleet) (string, error) {
	g := fleet.GCP
	if g.Placement != config.GCPPlacementCompact && g.Placement != config.GCPPlacementSpread {
		return "", nil
	}
	name, reg := policyName(fleet.Name), region(g.Zone)
	url := fmt.Sprintf("projects/%s/regions/%s/resourcePolicies/%s", g.Project, reg, name)
	action := fmt.Sprintf("find placement policy %q", name)
	get := &computepb.GetResourcePolicyRequest{Project: g.Project, Region: reg, ResourcePolicy: name}
	_, err := retried(ctx, p, action, g, func(ctx context.Context) (*computepb.ResourcePolicy, error) { return c.policies.Get(ctx, get) })
	if err == nil {
		return url, nil
	}
	if httpStatus(err) != http.StatusNotFound {
		return "", apiError(err, action, g)
	}
	group := &computepb.ResourcePolicyGroupPlacementPolicy{}
	if g.Placement == config.GCPPlacementCompact {
		group.Collocation = proto.String("COLLOCATED")
	} else {
		group.AvailabilityDomainCount = proto.Int32(int32(min(max(fleet.Count, minDomains), maxDomains)))
	}
	action = fmt.Sprintf("create %s placement policy %q", g.Placement, name)
	insert := &computepb.InsertResourcePolicyRequest{
		Project: g.Project, Region: reg,
		ResourcePolicyResource: &computepb.ResourcePolicy{
			Name:                 proto.String(name),
			Description:          proto.String("gpulayer placement of fleet " + fleet.Name),
			GroupPlacementPolicy: group,
		},
	}
	op, err := retried(ctx, p, action, g, func(ctx context.Context) (*compute.Operation, error) { return c.policies.Insert(ctx, insert) })
	if httpStatus(err) == http.StatusConflict {
		return url, nil
	}
	if err != nil {
		return "", apiError(err, action, g)
	}
	done, err := p.waitRegion(ctx, c, action, g, reg, op.Proto())
	if err != nil {
		return "", apiError(err, action, g)
	}
	if err := operationError(done, action, g); err != nil && !alreadyExists(done) {
		return "", err
	}
	return url, nil
}

// alreadyExists reports whether an operation failed only because its
// resource exists: two Creates raced to make the same policy.
func alreadyExists(op *computepb.Operation) bool {
	errs := op.GetError().GetErrors()
	for _, e := range errs {
		if e.GetCode() != "RESOURCE_ALREADY_EXISTS" {
			return false
		}
	}
	return len(errs) > 0
}

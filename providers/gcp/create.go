package gcp

import (
	"context"
	"fmt"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// Create creates machine name, waits for Compute Engine to say it is done,
// and returns its record with the fleet's SpecHash.
func (p *Provider) Create(ctx context.Context, fleet *config.Fleet, name, lineage string) (state.Machine, error) {
	c, err := p.clientsFor(ctx, fleet)
	if err != nil {
		return state.Machine{}, err
	}
	g := fleet.GCP
	policy, err := p.ensurePolicy(ctx, c, fleet)
	if err != nil {
		return state.Machine{}, err
	}
	action := fmt.Sprintf("create machine %q", name)
	req := &computepb.InsertInstanceRequest{
		Project: g.Project, Zone: g.Zone,
		InstanceResource: instance(fleet, name, lineage, policy),
	}
	op, err := retried(ctx, p, action, g, func(ctx context.Context) (*compute.Operation, error) { return c.instances.Insert(ctx, req) })
	if err != nil {
		return state.Machine{}, apiError(err, action, g)
	}
	done, err := p.waitZone(ctx, c, action, g, op.Proto())
	if err != nil {
		return state.Machine{}, apiError(err, action, g)
	}
	if err := operationError(done, action, g); err != nil {
		return state.Machine{}, err
	}
	m, found, err := p.Describe(ctx, fleet, name)
	if err != nil {
		return state.Machine{}, err
	}
	if !found {
		return state.Machine{}, fmt.Errorf("gcp: machine %q in project %q, zone %q: created, but Compute Engine does not find it; run apply again to recreate it", name, g.Project, g.Zone)
	}
	m.SpecHash = g.SpecHash()
	return m, nil
}

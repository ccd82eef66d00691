package gcp

import (
	"context"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"

	"github.com/gpulayer/gpulayer/config"
)

// wait polls an operation until it is DONE, every p.poll, and returns it.
// A DONE operation may still have failed: the caller checks its error
// field (operationError), since the HTTP status of the call that started
// it only said the request was accepted. A poll refused with a rate limit
// is made again after a pause (retried), as any call.
func (p *Provider) wait(ctx context.Context, op *computepb.Operation, action string, g *config.GCP, get func(context.Context, string) (*computepb.Operation, error)) (*computepb.Operation, error) {
	t := time.NewTimer(p.poll)
	defer t.Stop()
	for op.GetStatus() != computepb.Operation_DONE {
		select {
		case <-ctx.Done():
			return op, ctx.Err()
		case <-t.C:
		}
		name := op.GetName()
		next, err := retried(ctx, p, action, g, func(ctx context.Context) (*computepb.Operation, error) { return get(ctx, name) })
		if err != nil {
			if ctx.Err() != nil {
				return op, ctx.Err()
			}
			return op, err
		}
		op = next
		t.Reset(p.poll)
	}
	return op, nil
}

// waitZone waits for an operation in fleet g's zone.
func (p *Provider) waitZone(ctx context.Context, c *clients, action string, g *config.GCP, op *computepb.Operation) (*computepb.Operation, error) {
	return p.wait(ctx, op, action, g, func(ctx context.Context, name string) (*computepb.Operation, error) {
		return c.zoneOps.Get(ctx, &computepb.GetZoneOperationRequest{Project: g.Project, Zone: g.Zone, Operation: name})
	})
}

// waitRegion waits for an operation in region reg of fleet g's project.
func (p *Provider) waitRegion(ctx context.Context, c *clients, action string, g *config.GCP, reg string, op *computepb.Operation) (*computepb.Operation, error) {
	return p.wait(ctx, op, action, g, func(ctx context.Context, name string) (*computepb.Operation, error) {
		return c.regionOps.Get(ctx, &computepb.GetRegionOperationRequest{Project: g.Project, Region: reg, Operation: name})
	})
}

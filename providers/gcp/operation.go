package gcp

import (
	"context"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
)

// wait polls an operation until it is DONE, every p.poll, and returns it.
// A DONE operation may still have failed: the caller checks its error
// field (operationError), since the HTTP status of the call that started
// it only said the request was accepted.
func (p *Provider) wait(ctx context.Context, op *computepb.Operation, get func(context.Context, string) (*computepb.Operation, error)) (*computepb.Operation, error) {
	t := time.NewTimer(p.poll)
	defer t.Stop()
	for op.GetStatus() != computepb.Operation_DONE {
		select {
		case <-ctx.Done():
			return op, ctx.Err()
		case <-t.C:
		}
		next, err := get(ctx, op.GetName())
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

func (p *Provider) waitZone(ctx context.Context, c *clients, project, zone string, op *computepb.Operation) (*computepb.Operation, error) {
	return p.wait(ctx, op, func(ctx context.Context, name string) (*computepb.Operation, error) {
		return c.zoneOps.Get(ctx, &computepb.GetZoneOperationRequest{Project: project, Zone: zone, Operation: name})
	})
}

func (p *Provider) waitRegion(ctx context.Context, c *clients, project, region string, op *computepb.Operation) (*computepb.Operation, error) {
	return p.wait(ctx, op, func(ctx context.Context, name string) (*computepb.Operation, error) {
		return c.regionOps.Get(ctx, &computepb.GetRegionOperationRequest{Project: project, Region: region, Operation: name})
	})
}

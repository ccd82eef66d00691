package gcp

import (
	"context"
	"fmt"
	"net/http"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"

	"github.com/gpulayer/gpulayer/config"
)

// Delete deletes machine name and waits until Compute Engine says it is
// gone. A machine already gone, before or during the call, is not an
// error: the goal is its absence.
func (p *Provider) Delete(ctx context.Context, fleet *config.Fleet, name string) error {
	c, err := p.clientsFor(ctx, fleet)
	if err != nil {
		return err
	}
	g := fleet.GCP
	action := fmt.Sprintf("delete machine %q", name)
	req := &computepb.DeleteInstanceRequest{Project: g.Project, Zone: g.Zone, Instance: name}
	op, err := retried(ctx, p, action, g, func(ctx context.Context) (*compute.Operation, error) { return c.instances.Delete(ctx, req) })
	if httpStatus(err) == http.StatusNotFound {
		return nil
	}
	if err != nil {
		return apiError(err, action, g)
	}
	done, err := p.waitZone(ctx, c, action, g, op.Proto())
	if err != nil {
		return apiError(err, action, g)
	}
	if err := operationError(done, action, g); err != nil && done.GetHttpErrorStatusCode() != http.StatusNotFound {
		return err
	}
	return nil
}

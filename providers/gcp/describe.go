package gcp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/iterator"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// Describe returns Compute Engine's record of machine name, with the host
// keys its guest agent published.
func (p *Provider) Describe(ctx context.Context, fleet *config.Fleet, name string) (state.Machine, bool, error) {
	c, err := p.clientsFor(ctx, fleet)
	if err != nil {
		return state.Machine{}, false, err
	}
	g := fleet.GCP
	action := fmt.Sprintf("describe machine %q", name)
	req := &computepb.GetInstanceRequest{Project: g.Project, Zone: g.Zone, Instance: name}
	inst, err := retried(ctx, p, action, g, func(ctx context.Context) (*computepb.Instance, error) { return c.instances.Get(ctx, req) })
	if httpStatus(err) == http.StatusNotFound {
		return state.Machine{}, false, nil
	}
	if err != nil {
		return state.Machine{}, false, apiError(err, action, g)
	}
	m := record(fleet.Name, g.Zone, inst)
	if m.HostKeys, err = p.hostKeys(ctx, c, g, name); err != nil {
		return state.Machine{}, false, err
	}
	return m, true, nil
}

// List returns the machines labelled with fleet's name and lineage, in
// name order. It does not read host keys: Describe does, for the machines
// gpulayer connects to.
func (p *Provider) List(ctx context.Context, fleet *config.Fleet, lineage string) ([]state.Machine, error) {
	c, err := p.clientsFor(ctx, fleet)
	if err != nil {
		return nil, err
	}
	g := fleet.GCP
	action := fmt.Sprintf("list machines of fleet %q", fleet.Name)
	filter := fmt.Sprintf("labels.%s = %q AND labels.%s = %q", config.GCPLabelFleet, fleet.Name, config.GCPLabelLineage, lineage)
	// A page refused with a rate limit starts the listing again from the
	// first page: a listing is only reads, and page tokens need not
	// outlive the pause.
	out, err := retried(ctx, p, action, g, func(ctx context.Context) ([]state.Machine, error) {
		it := c.instances.List(ctx, &computepb.ListInstancesRequest{Project: g.Project, Zone: g.Zone, Filter: &filter})
		var out []state.Machine
		for {
			inst, err := it.Next()
			if errors.Is(err, iterator.Done) {
				return out, nil
			}
			if err != nil {
				return nil, err
			}
			// The filter is the API's to apply; checked again so that a
			// server that ignored it cannot hand another state's
			// machines to this one.
			if inst.GetLabels()[config.GCPLabelFleet] != fleet.Name || inst.GetLabels()[config.GCPLabelLineage] != lineage {
				continue
			}
			out = append(out, record(fleet.Name, g.Zone, inst))
		}
	})
	if err != nil {
		return nil, apiError(err, action, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// hostKeyQuery is where the guest agent publishes host keys.
const hostKeyQuery = "hostkeys/"

var (
	// keyType is an SSH key algorithm name ("ssh-ed25519",
	// "ecdsa-sha2-nistp256", "sk-ssh-ed25519@openssh.com").
	keyType = regexp.MustCompile(`^[a-z0-9][a-z0-9@.-]{0,63}$`)
)

// maxKeyBlob bounds a host key's base64 (an RSA 16384 key is about 2800
// characters).
const maxKeyBlob = 8192

// validKey reports whether a published host key is a key type and a
// base64 blob, nothing that could smuggle text into known_hosts.
func validKey(typ, blob string) bool {
	if !keyType.MatchString(typ) || len(blob) < 16 || len(blob) > maxKeyBlob {
		return false
	}
	_, err := base64.StdEncoding.DecodeString(blob)
	return err == nil
}

// hostKeys returns the SSH host keys the machine's guest agent published,
// in authorized_keys form, sorted. None yet (404: the agent has not run,
// or the image has none) is not an error. Entries that are not a key type
// and a base64 blob are dropped: they come from the machine, which gpulayer
// does not trust until it has pinned its keys.
func (p *Provider) hostKeys(ctx context.Context, c *clients, g *config.GCP, name string) ([]string, error) {
	q := hostKeyQuery
	action := fmt.Sprintf("read host keys of machine %q", name)
	req := &computepb.GetGuestAttributesInstanceRequest{Project: g.Project, Zone: g.Zone, Instance: name, QueryPath: &q}
	attrs, err := retried(ctx, p, action, g, func(ctx context.Context) (*computepb.GuestAttributes, error) {
		return c.instances.GetGuestAttributes(ctx, req)
	})
	if httpStatus(err) == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, apiError(err, action, g)
	}
	var keys []string
	for _, item := range attrs.GetQueryValue().GetItems() {
		if !validKey(item.GetKey(), item.GetValue()) {
			continue
		}
		keys = append(keys, item.GetKey()+" "+item.GetValue())
	}
	sort.Strings(keys)
	return keys, nil
}

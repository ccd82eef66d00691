package gcp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"google.golang.org/api/option"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/providers"
)

// EndpointEnv names the environment variable that points every gcp fleet
// without its own endpoint at another Compute Engine API (an emulator, a
// test server).
const EndpointEnv = "GPULAYER_GCP_ENDPOINT"

// DefaultPollInterval is how often an operation is polled: Compute Engine
// operations take seconds to minutes, and each poll is a billed API call.
const DefaultPollInterval = 2 * time.Second

// Options configure a Provider.
type Options struct {
	// Endpoint is the Compute Engine API's base URL; "" means EndpointEnv,
	// else Google's. A fleet's own endpoint wins over both.
	Endpoint string
	// PollInterval is the pause between polls of an operation; 0 means
	// DefaultPollInterval.
	PollInterval time.Duration
	// RateLimitBackoff is the first pause before a call Compute Engine
	// refused with a rate limit is made again (it doubles after each
	// refusal); 0 means DefaultRateLimitBackoff.
	RateLimitBackoff time.Duration
	// RateLimitAttempts bounds the calls made of one request that keeps
	// being rate limited, the first included; 0 means
	// DefaultRateLimitAttempts.
	RateLimitAttempts int
}

// Provider is the GCP provider. Its methods are safe for concurrent use.
type Provider struct {
	endpoint string
	poll     time.Duration
	backoff  time.Duration // first pause after a rate-limited call
	attempts int           // calls of one request while it is rate limited

	mu      sync.Mutex
	clients map[string]*clients // by endpoint, "" for Google's
	closed  bool
}

var _ providers.Provider = (*Provider)(nil)

// New returns a provider. It connects lazily, on a fleet's first call, so
// that a configuration without gcp fleets needs no credentials.
func New(ctx context.Context, opts Options) (*Provider, error) {
	if opts.Endpoint == "" {
		opts.Endpoint = os.Getenv(EndpointEnv)
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.RateLimitBackoff <= 0 {
		opts.RateLimitBackoff = DefaultRateLimitBackoff
	}
	if opts.RateLimitAttempts <= 0 {
		opts.RateLimitAttempts = DefaultRateLimitAttempts
	}
	return &Provider{endpoint: opts.Endpoint, poll: opts.PollInterval, backoff: opts.RateLimitBackoff, attempts: opts.RateLimitAttempts,
		clients: map[string]*clients{}}, nil
}

// clients are the API clients of one endpoint.
type clients struct {
	instances *compute.InstancesClient
	zoneOps   *compute.ZoneOperationsClient
	regionOps *compute.RegionOperationsClient
	policies  *compute.ResourcePoliciesClient
}

func (c *clients) close() error {
	// Checked one by one: a nil *Client in an interface is not a nil
	// interface.
	var errs []error
	if c.instances != nil {
		errs = append(errs, c.instances.Close())
	}
	if c.zoneOps != nil {
		errs = append(errs, c.zoneOps.Close())
	}
	if c.regionOps != nil {
		errs = append(errs, c.regionOps.Close())
	}
	if c.policies != nil {
		errs = append(errs, c.policies.Close())
	}
	return errors.Join(errs...)
}

// clientsFor returns the clients of fleet's endpoint, making them on first
// use.
func (p *Provider) clientsFor(ctx context.Context, fleet *config.Fleet) (*clients, error) {
	if fleet == nil || fleet.GCP == nil {
		return nil, providers.ErrNoProvider
	}
	endpoint := p.endpoint
	if fleet.GCP.Endpoint != "" {
		endpoint = fleet.GCP.Endpoint
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("gcp provider is closed")
	}
	if c, ok := p.clients[endpoint]; ok {
		return c, nil
	}
	var opts []option.ClientOption
	if endpoint != "" {
		// The client appends "/compute/v1/..." to the endpoint: trimmed so
		// that a trailing slash cannot make paths start with "//", which
		// not every emulator or proxy cleans.
		opts = append(opts, option.WithEndpoint(strings.TrimRight(endpoint, "/")), option.WithoutAuthentication())
	}
	c := &clients{}
	var err error
	if c.instances, err = compute.NewInstancesRESTClient(ctx, opts...); err == nil {
		if c.zoneOps, err = compute.NewZoneOperationsRESTClient(ctx, opts...); err == nil {
			if c.regionOps, err = compute.NewRegionOperationsRESTClient(ctx, opts...); err == nil {
				c.policies, err = compute.NewResourcePoliciesRESTClient(ctx, opts...)
			}
		}
	}
	if err != nil {
		c.close()
		where := "Google's Compute Engine API (Application Default Credentials: run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS)"
		if endpoint != "" {
			where = fmt.Sprintf("Compute Engine API at %s", endpoint)
		}
		return nil, fmt.Errorf("gcp: connect to %s: %w", where, err)
	}
	p.clients[endpoint] = c
	return c, nil
}

// Close closes every client the provider made.
func (p *Provider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	for endpoint, c := range p.clients {
		errs = append(errs, c.close())
		delete(p.clients, endpoint)
	}
	return errors.Join(errs...)
}

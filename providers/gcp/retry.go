package gcp

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gpulayer/gpulayer/config"
)

// Compute Engine refuses a call it is asked too often (HTTP 429, or 403
// rateLimitExceeded) and accepts the same call a little later: its rate
// limits are per project and per minute. Such a call is made again after a
// pause that doubles each time, up to maxRateLimitPause, at most
// DefaultRateLimitAttempts times in all: with the defaults, about a minute
// of pauses, enough for a limit to refill.
const (
	DefaultRateLimitBackoff  = 2 * time.Second
	DefaultRateLimitAttempts = 6
	maxRateLimitPause        = 32 * time.Second
)

// RateLimitError is a call that Compute Engine still refused with a rate
// limit when the retries ended. Err is its last refusal (Kind RateLimited,
// naming project, zone and machine type); errors.As finds it as well.
type RateLimitError struct {
	Err      *Error
	Attempts int           // calls made, the first included
	Waited   time.Duration // time paused between them
}

func (e *RateLimitError) Error() string {
	return e.Err.text(fmt.Sprintf("gave up after %d attempts over %s", e.Attempts, e.Waited.Round(time.Millisecond)))
}

func (e *RateLimitError) Unwrap() error { return e.Err }

// retried makes a call, and makes it again after a pause each time Compute
// Engine refuses it with a rate limit, until p.attempts calls were made.
// A refused call did nothing, so making it again is safe, inserts
// included. It never pauses past ctx: when ctx ends first, or its deadline
// comes before the next try would, it stops. Any other error is the
// call's, for the caller to classify.
func retried[T any](ctx context.Context, p *Provider, action string, g *config.GCP, call func(context.Context) (T, error)) (T, error) {
	pause := p.backoff
	var waited time.Duration
	for attempt := 1; ; attempt++ {
		v, err := call(ctx)
		if err == nil || ctx.Err() != nil {
			return v, err
		}
		last := httpError(err, action, g)
		if last.Kind != RateLimited {
			return v, err
		}
		d := jitter(pause)
		deadline, bounded := ctx.Deadline()
		if attempt >= p.attempts || bounded && time.Until(deadline) < d {
			return v, &RateLimitError{Err: last, Attempts: attempt, Waited: waited}
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, fmt.Errorf("%w (stopped waiting to retry after %d rate-limited attempts)", apiError(ctx.Err(), action, g), attempt)
		case <-t.C:
		}
		waited += d
		pause = min(2*pause, max(maxRateLimitPause, p.backoff))
	}
}

// jitter is a pause between d/2 and d, so that the machines an apply
// creates at once, refused together, do not all come back together.
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

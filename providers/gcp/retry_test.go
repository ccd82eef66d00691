package gcp_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/providers/gcp"
	"github.com/gpulayer/gpulayer/providers/gcp/gcptest"
)

// fastRetries are retry pauses a test can wait for.
var fastRetries = gcp.Options{RateLimitBackoff: time.Millisecond}

// TestCreateSucceedsAfterRateLimitedInserts: an insert refused twice with
// a rate limit, in either form Compute Engine uses, is made again until it
// is accepted.
func TestCreateSucceedsAfterRateLimitedInserts(t *testing.T) {
	for _, f := range []gcptest.Fault{gcptest.RateLimit, gcptest.RateLimitForbidden} {
		srv := gcptest.Start(t)
		srv.FailInsert(2, f)
		p := newProvider(t, fastRetries)

		m, err := p.Create(bounded(t), fleetAt(srv.URL), "trainers-0", lineage)

		if err != nil {
			t.Fatalf("fault %d: %v", f, err)
		}
		if n := srv.Requests("instances.insert"); n != 3 {
			t.Errorf("fault %d: inserts = %d, want 3 (2 refused, 1 accepted)", f, n)
		}
		if in := srv.Instances(); len(in) != 1 || m.Name != "trainers-0" || m.Status != "RUNNING" {
			t.Errorf("fault %d: instances %d, record %+v", f, len(in), m)
		}
	}
}

// TestCreateThatStaysRateLimitedFailsWithRateLimitError: after its
// bounded attempts, Create gives up, soon, with an error of its own that
// names the project, zone and machine type, says it was rate limited and
// what to try, and created nothing.
func TestCreateThatStaysRateLimitedFailsWithRateLimitError(t *testing.T) {
	srv := gcptest.Start(t)
	srv.FailInsert(100, gcptest.RateLimit)
	p := newProvider(t, gcp.Options{RateLimitBackoff: time.Millisecond, RateLimitAttempts: 4})

	start := time.Now()
	_, err := p.Create(bounded(t), fleetAt(srv.URL), "trainers-0", lineage)
	took := time.Since(start)

	var rl *gcp.RateLimitError
	if !errors.As(err, &rl) {
		t.Fatalf("err = %v (%T), want *gcp.RateLimitError", err, err)
	}
	var gerr *gcp.Error
	if !errors.As(err, &gerr) || gerr.Kind != gcp.RateLimited || gerr.Status != 429 || gerr.Reason != "rateLimitExceeded" {
		t.Errorf("last refusal = %+v, want a *gcp.Error of kind RateLimited, HTTP 429 rateLimitExceeded", gerr)
	}
	if rl.Attempts != 4 || srv.Requests("instances.insert") != 4 {
		t.Errorf("attempts = %d, inserts = %d; want 4 of each", rl.Attempts, srv.Requests("instances.insert"))
	}
	msg := err.Error()
	for _, want := range []string{`"my-project"`, `"us-central1-a"`, `"a2-highgpu-1g"`, `"trainers-0"`, "rate limited", "gave up after 4 attempts", "run the command again in a minute"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if took > 5*time.Second {
		t.Errorf("Create gave up after %v, want the few milliseconds of its pauses", took)
	}
	if n := len(srv.Instances()); n != 0 {
		t.Errorf("instances = %d, want 0", n)
	}
}

// TestRateLimitedPausesEndWithTheContext: a pause before the next try
// never outlasts the context: one that would pass its deadline is not
// taken (the rate limit is the error), and a cancel ends one at once.
func TestRateLimitedPausesEndWithTheContext(t *testing.T) {
	slow := gcp.Options{RateLimitBackoff: 10 * time.Minute}

	srv := gcptest.Start(t)
	srv.FailInsert(100, gcptest.RateLimitForbidden)
	p := newProvider(t, slow)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err := p.Create(ctx, fleetAt(srv.URL), "trainers-0", lineage)
	var rl *gcp.RateLimitError
	if !errors.As(err, &rl) || rl.Attempts != 1 {
		t.Errorf("with a deadline before the next try: err = %v, want a *gcp.RateLimitError after 1 attempt", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("with a deadline before the next try: returned after %v, want at once", d)
	}

	srv = gcptest.Start(t)
	srv.FailInsert(100, gcptest.RateLimit)
	p = newProvider(t, slow)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(200*time.Millisecond, cancel)
	start = time.Now()
	_, err = p.Create(ctx, fleetAt(srv.URL), "trainers-0", lineage)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "rate-limited") {
		t.Errorf("cancelled while pausing: err = %v, want context.Canceled, saying it was rate limited", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("cancelled while pausing: returned after %v, want soon after the 200ms cancel", d)
	}
}

// TestEveryCallRetriesRateLimits: lists, gets, deletes and the polls of
// their operations refused with a rate limit are made again like inserts.
func TestEveryCallRetriesRateLimits(t *testing.T) {
	srv := gcptest.Start(t)
	p := newProvider(t, fastRetries)
	ctx := bounded(t)
	fleet := fleetAt(srv.URL)
	if _, err := p.Create(ctx, fleet, "trainers-0", lineage); err != nil {
		t.Fatal(err)
	}

	polls := srv.Requests("zoneOperations.get")

	srv.FailCalls(2, gcptest.RateLimit)
	if ms, err := p.List(ctx, fleet, lineage); err != nil || len(ms) != 1 {
		t.Errorf("List = %d machines, %v; want 1", len(ms), err)
	}
	srv.FailCalls(2, gcptest.RateLimitForbidden)
	if _, found, err := p.Describe(ctx, fleet, "trainers-0"); err != nil || !found {
		t.Errorf("Describe = found %v, %v; want found", found, err)
	}
	srv.FailCalls(1, gcptest.RateLimit)
	srv.FailPolls(2, gcptest.RateLimit)
	if err := p.Delete(ctx, fleet, "trainers-0"); err != nil {
		t.Errorf("Delete: %v", err)
	}
	if n := len(srv.Instances()); n != 0 {
		t.Errorf("instances after delete = %d, want 0", n)
	}
	if n := srv.Requests("failedCalls"); n != 5 {
		t.Errorf("refused calls = %d, want 5", n)
	}
	// The delete operation ends on its second poll that is answered.
	if n := srv.Requests("zoneOperations.get") - polls; n != 4 {
		t.Errorf("delete polls = %d, want 4 (2 refused, 2 answered)", n)
	}
}

package gcptest

import (
	"fmt"
	"net/http"
	"strings"
)

// Fault is an error Compute Engine gives users, as the fake reproduces it.
type Fault int

// Faults, with the HTTP error and the operation error code Compute Engine
// uses for each.
const (
	// Quota: 403 quotaExceeded; operation QUOTA_EXCEEDED.
	Quota Fault = iota + 1
	// Stockout: 503 ZONE_RESOURCE_POOL_EXHAUSTED; operation
	// ZONE_RESOURCE_POOL_EXHAUSTED.
	Stockout
	// Permission: 403 forbidden; operation PERMISSION_DENIED.
	Permission
	// ImageNotFound: 404 notFound on the image; operation
	// RESOURCE_NOT_FOUND.
	ImageNotFound
	// MachineTypeNotFound: 404 notFound on the machine type; operation
	// RESOURCE_NOT_FOUND.
	MachineTypeNotFound
	// RateLimit: 429 rateLimitExceeded, with the message of a per-minute
	// request quota ("Quota exceeded for quota metric 'Queries'..."), as
	// Compute Engine answers a project that calls too often; operation
	// RATE_LIMIT_EXCEEDED.
	RateLimit
	// RateLimitForbidden: the older form of the same, 403
	// rateLimitExceeded "Rate Limit Exceeded".
	RateLimitForbidden
)

// FailInsert makes the next n instance inserts fail with f's HTTP error.
func (s *Server) FailInsert(n int, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.insertFaults = append(s.insertFaults, f)
	}
}

// FailInsertOperation makes the next n instance inserts answer 200 with an
// operation that ends DONE with f in its error field, creating nothing.
func (s *Server) FailInsertOperation(n int, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.opFaults = append(s.opFaults, f)
	}
}

// FailCalls makes the next n API calls, of any method (polls, gets and
// lists included), answer f's HTTP error without reaching their handler;
// Requests("failedCalls") counts them. With RateLimit, it is a project
// over its API rate limit.
func (s *Server) FailCalls(n int, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.callFaults = append(s.callFaults, f)
	}
}

// FailPolls makes the next n polls of an operation (zone or region) answer
// f's HTTP error; the operation stays as it was.
func (s *Server) FailPolls(n int, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.pollFaults = append(s.pollFaults, f)
	}
}

// Hang makes every unfinished operation, and every later one, stay
// RUNNING for ever.
func (s *Server) Hang() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hang = true
}

// pop takes the first fault of q; the caller holds s.mu.
func pop(q *[]Fault) Fault {
	if len(*q) == 0 {
		return 0
	}
	f := (*q)[0]
	*q = (*q)[1:]
	return f
}

// failure is how a fault reads for an insert of instance name.
type failure struct {
	status  int
	reason  string // HTTP errors[].reason
	code    string // operation errors[].code
	message string
}

func (f Fault) failure(project, zone, name, machineType, image string) failure {
	switch f {
	case Quota:
		return failure{http.StatusForbidden, "quotaExceeded", "QUOTA_EXCEEDED",
			fmt.Sprintf("Quota 'NVIDIA_A100_GPUS' exceeded.  Limit: 0.0 in region %s.", region(zone))}
	case Stockout:
		return failure{http.StatusServiceUnavailable, "ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED",
			fmt.Sprintf("The zone 'projects/%s/zones/%s' does not have enough resources available to fulfill the request.  Try a different zone, or try again later.", project, zone)}
	case Permission:
		return failure{http.StatusForbidden, "forbidden", "PERMISSION_DENIED",
			fmt.Sprintf("Required 'compute.instances.create' permission for 'projects/%s/zones/%s/instances/%s'", project, zone, name)}
	case ImageNotFound:
		return failure{http.StatusNotFound, "notFound", "RESOURCE_NOT_FOUND",
			fmt.Sprintf("The resource '%s' was not found", image)}
	case MachineTypeNotFound:
		return failure{http.StatusNotFound, "notFound", "RESOURCE_NOT_FOUND",
			fmt.Sprintf("The resource 'projects/%s/%s' was not found", project, machineType)}
	case RateLimit:
		return failure{http.StatusTooManyRequests, "rateLimitExceeded", "RATE_LIMIT_EXCEEDED",
			fmt.Sprintf("Quota exceeded for quota metric 'Queries' and limit 'Queries per minute' of service 'compute.googleapis.com' for consumer 'project:%s'.", project)}
	case RateLimitForbidden:
		return failure{http.StatusForbidden, "rateLimitExceeded", "RATE_LIMIT_EXCEEDED", "Rate Limit Exceeded"}
	}
	return failure{http.StatusInternalServerError, "backendError", "INTERNAL_ERROR", "gcptest: unknown fault"}
}

// region is a zone's region: the zone without its last "-x".
func region(zone string) string {
	if i := strings.LastIndexByte(zone, '-'); i > 0 {
		return zone[:i]
	}
	return zone
}

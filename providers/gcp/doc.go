// Package gcp creates, describes, lists and deletes a fleet's machines on
// Google Compute Engine through its REST API (cloud.google.com/go/compute).
//
// Machines carry two labels, the fleet's name and the state's lineage, so
// that List finds every machine gpulayer made for a state, including the
// ones a crashed apply never recorded. Every call is bounded by its context;
// operations are polled until they end and their error field is checked,
// because Compute Engine reports a failed insert (quota, stock-out) in the
// operation, not in the HTTP status.
//
// Errors a person can act on (quota, stock-out, permissions, a wrong image
// or machine type, a rate limit) come back as *Error, which names the
// project, zone and machine type and says what to try. A call refused with
// a rate limit is made again after a pause that doubles, a bounded number
// of times and never past its context; one still refused after that is a
// *RateLimitError. The package does not decide what to create: the planner
// does; it does not retry a create that failed otherwise.
//
// A machine's record carries where it physically runs when Compute Engine
// says (physicalHostTopology, else physicalHost read as the documented
// blockId/subBlockId/hostId); it says so only for some machine types or in
// a compact placement policy, and not always at insert, so List reports it
// afresh on every call.
//
// Package gcptest is an in-process fake of the API for tests.
package gcp

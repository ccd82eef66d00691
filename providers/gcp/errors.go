package gcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/googleapi"

	"github.com/gpulayer/gpulayer/config"
)

// Kind is what went wrong, in the terms of what a person does about it.
type Kind int

// Kinds of Error.
const (
	Other                Kind = iota
	QuotaExceeded             // the project's quota is too low for the request
	Stockout                  // the zone has no capacity left of that kind (ZONE_RESOURCE_POOL_EXHAUSTED)
	PermissionDenied          // the credentials may not do this
	ImageNotFound             // the boot image or family does not exist or cannot be read
	MachineTypeNotInZone      // the machine type is not offered in the zone
	RateLimited               // the project made too many API requests in too short a time (HTTP 429, or 403 rateLimitExceeded)
)

func (k Kind) String() string {
	switch k {
	case QuotaExceeded:
		return "quota exceeded"
	case Stockout:
		return "zone out of capacity"
	case PermissionDenied:
		return "permission denied"
	case ImageNotFound:
		return "image not found"
	case MachineTypeNotInZone:
		return "machine type not available in zone"
	case RateLimited:
		return "rate limited"
	}
	return "request failed"
}

// Error is an error Compute Engine reported, either as the HTTP status of a
// call or as the error field of an operation that ended.
type Error struct {
	Kind    Kind
	Action  string // what gpulayer was doing, such as `create machine "trainers-0"`
	Project string
	Zone    string
	// MachineType and Image are the fleet's, to name in the message.
	MachineType string
	Image       string
	Status      int    // HTTP status; 0 when an operation failed without one
	Reason      string // the API's reason ("quotaExceeded") or operation error code ("QUOTA_EXCEEDED")
	Message     string // the API's message, sanitized: it comes from the network
	Err         error  // the client library's error, if any
}

func (e *Error) Error() string { return e.text("") }

// text is the error's message with detail, if any, before the hint.
func (e *Error) text(detail string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "gcp: %s in project %q, zone %q (machine type %q): %s", e.Action, e.Project, e.Zone, e.MachineType, e.Kind)
	if e.Message != "" {
		fmt.Fprintf(&b, ": %q", e.Message)
	}
	switch {
	case e.Status != 0 && e.Reason != "":
		fmt.Fprintf(&b, " (HTTP %d, %s)", e.Status, e.Reason)
	case e.Status != 0:
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	case e.Reason != "":
		fmt.Fprintf(&b, " (%s)", e.Reason)
	}
	if detail != "" {
		b.WriteString("; ")
		b.WriteString(detail)
	}
	if h := e.hint(); h != "" {
		b.WriteString(". ")
		b.WriteString(h)
		b.WriteString(".")
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// hint says what to try.
func (e *Error) hint() string {
	switch e.Kind {
	case QuotaExceeded:
		return fmt.Sprintf("Request more quota for project %q in the Google Cloud console (IAM & Admin > Quotas), or lower the fleet's count", e.Project)
	case Stockout:
		return fmt.Sprintf("Zone %q has no %s capacity left right now: try another zone, try again later, or use a reservation or spot = true", e.Zone, e.MachineType)
	case PermissionDenied:
		return fmt.Sprintf("The principal of your Application Default Credentials (gcloud auth application-default login, or GOOGLE_APPLICATION_CREDENTIALS) needs roles/compute.instanceAdmin.v1 on project %q, and roles/iam.serviceAccountUser on the service account the machines run as", e.Project)
	case ImageNotFound:
		return fmt.Sprintf("Check the image %q: an image (projects/PROJECT/global/images/NAME) or family (projects/PROJECT/global/images/family/FAMILY) that exists and that you can read (gcloud compute images describe)", e.Image)
	case MachineTypeNotInZone:
		return fmt.Sprintf("See which machine types zone %q offers with `gcloud compute machine-types list --zones %s`, or pick another zone", e.Zone, e.Zone)
	case RateLimited:
		return fmt.Sprintf("Compute Engine limits the API requests project %q makes per minute: run the command again in a minute, create fewer machines at once, or ask for a higher rate quota of compute.googleapis.com (IAM & Admin > Quotas)", e.Project)
	}
	return ""
}

// apiError turns a client library error into an *Error naming fleet's
// project, zone and machine type. A context's error is returned wrapped but
// recognisable (errors.Is), since the caller, not the API, ended the call.
func apiError(err error, action string, g *config.GCP) error {
	if err == nil {
		return nil
	}
	var rl *RateLimitError
	if errors.As(err, &rl) {
		return err // classified where the retries gave up
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("gcp: %s in project %q, zone %q: %w", action, g.Project, g.Zone, err)
	}
	return httpError(err, action, g)
}

// httpError is the *Error of a call that failed: the API's status, reason
// and message when it answered, else the library's error as the message.
func httpError(err error, action string, g *config.GCP) *Error {
	e := newError(action, g)
	e.Err = err
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		e.Status = ge.Code
		e.Message = ge.Message
		for _, item := range ge.Errors {
			if e.Reason == "" {
				e.Reason = item.Reason
			}
			if e.Message == "" {
				e.Message = item.Message
			}
		}
	} else {
		e.Message = err.Error()
	}
	e.finish()
	return e
}

// operationError returns an *Error for a DONE operation that failed, or
// nil. Compute Engine answers an insert with 200 and reports quota and
// stock-outs here.
func operationError(op *computepb.Operation, action string, g *config.GCP) error {
	errs := op.GetError().GetErrors()
	if len(errs) == 0 {
		if c := op.GetHttpErrorStatusCode(); c >= 200 && c <= 299 || c == 0 {
			return nil
		}
	}
	e := newError(action, g)
	e.Status = int(op.GetHttpErrorStatusCode())
	var msgs []string
	for _, item := range errs {
		if e.Reason == "" {
			e.Reason = item.GetCode()
		}
		msgs = append(msgs, item.GetMessage())
	}
	if len(msgs) == 0 {
		msgs = append(msgs, op.GetHttpErrorMessage())
	}
	e.Message = strings.Join(msgs, "; ")
	e.finish()
	return e
}

func newError(action string, g *config.GCP) *Error {
	return &Error{Action: action, Project: g.Project, Zone: g.Zone, MachineType: g.MachineType, Image: g.Image}
}

func (e *Error) finish() {
	e.Message = sanitize(e.Message)
	e.Reason = sanitize(e.Reason)
	e.Kind = kindOf(e.Status, e.Reason, e.Message)
}

// kindOf classifies an error by its reason or code, then its message:
// Compute Engine is not consistent about which of them carries the cause.
// A rate limit first: it is a 403 or a 429 whose message often reads
// "Quota exceeded for quota metric 'Queries'", and unlike a quota it
// passes by itself. Quota before permission (both are 403); permission
// before machine type and image, whose names can appear in a permission's
// message.
func kindOf(status int, reason, message string) Kind {
	r, m := strings.ToLower(reason), strings.ToLower(message)
	switch {
	case status == http.StatusTooManyRequests || r == "ratelimitexceeded" || r == "userratelimitexceeded" || r == "rate_limit_exceeded" ||
		strings.Contains(m, "rate limit exceeded") || strings.Contains(m, "queries per") || strings.Contains(m, "requests per"):
		return RateLimited
	case r == "quotaexceeded" || r == "quota_exceeded" || strings.Contains(m, "quota") && strings.Contains(m, "exceeded"):
		return QuotaExceeded
	case strings.HasPrefix(r, "zone_resource_pool_exhausted") || strings.Contains(m, "zone_resource_pool_exhausted") ||
		strings.Contains(m, "does not have enough resources"):
		return Stockout
	case status == 403 || r == "forbidden" || strings.Contains(r, "permission") || strings.Contains(r, "access_denied") ||
		strings.Contains(m, "permission"):
		return PermissionDenied
	case strings.Contains(m, "machinetype") || strings.Contains(m, "machine type"):
		return MachineTypeNotInZone
	case strings.Contains(m, "image") && (status == 404 || status == 400 || r == "notfound" || r == "resource_not_found" || r == "invalid" ||
		strings.Contains(m, "not found") || strings.Contains(m, "does not exist")):
		return ImageNotFound
	}
	return Other
}

// maxMessage bounds how much of the API's message is repeated: enough for
// any real one, not a page of whatever a broken proxy sent.
const maxMessage = 1000

// sanitize makes text from the network safe to print: no control bytes
// (terminal escapes, newlines that forge log lines), valid UTF-8, bounded.
func sanitize(s string) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t' || r == '\r':
			return ' '
		case unicode.IsControl(r) || r == utf8.RuneError || unicode.Is(unicode.Cf, r):
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(s) > maxMessage {
		cut := maxMessage
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

// httpStatus is the HTTP status of an API error, or 0.
func httpStatus(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

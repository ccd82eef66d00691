package gcp

import (
	"errors"
	"strings"
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/googleapi"
	"google.golang.org/protobuf/proto"

	"github.com/gpulayer/gpulayer/config"
)

func TestKindOfReadsReasonCodeAndMessage(t *testing.T) {
	for _, tc := range []struct {
		status          int
		reason, message string
		want            Kind
	}{
		{403, "quotaExceeded", "Quota 'CPUS' exceeded.  Limit: 24.0 in region us-central1.", QuotaExceeded},
		{0, "QUOTA_EXCEEDED", "Quota 'NVIDIA_T4_GPUS' exceeded.  Limit: 0.0 in region europe-west4.", QuotaExceeded},
		{0, "ZONE_RESOURCE_POOL_EXHAUSTED", "The zone 'projects/p/zones/z' does not have enough resources available to fulfill the request.", Stockout},
		{0, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "The zone 'projects/p/zones/z' does not have enough resources available to fulfill the request. '(resource type:compute)'.", Stockout},
		{403, "forbidden", "Required 'compute.instances.create' permission for 'projects/p/zones/z/instances/x'", PermissionDenied},
		{0, "SERVICE_ACCOUNT_ACCESS_DENIED", "The user does not have access to service account 'sa@p.iam.gserviceaccount.com'.", PermissionDenied},
		{403, "forbidden", "Required 'compute.images.useReadOnly' permission for 'projects/x/global/images/y'", PermissionDenied},
		{404, "notFound", "The resource 'projects/debian-cloud/global/images/family/debian-99' was not found", ImageNotFound},
		{400, "invalid", "Invalid value for field 'resource.machineType': 'zones/z/machineTypes/a3-foo'. Machine type with name 'a3-foo' does not exist in zone 'z'.", MachineTypeNotInZone},
		{0, "RESOURCE_NOT_FOUND", "The resource 'projects/p/zones/z/machineTypes/a2-highgpu-1g' was not found", MachineTypeNotInZone},
		{429, "rateLimitExceeded", "Rate Limit Exceeded", RateLimited},
		{403, "rateLimitExceeded", "Quota exceeded for quota metric 'Queries' and limit 'Queries per minute' of service 'compute.googleapis.com' for consumer 'project_number:123'.", RateLimited},
		{403, "userRateLimitExceeded", "User Rate Limit Exceeded", RateLimited},
		{429, "", "Quota exceeded for quota metric 'Read requests' and limit 'Read requests per minute per region'", RateLimited},
		{403, "quotaExceeded", "Quota exceeded for quota metric 'Queries' and limit 'Queries per 100 seconds'", RateLimited},
		{500, "backendError", "Internal error. Please try again.", Other},
	} {
		if got := kindOf(tc.status, tc.reason, tc.message); got != tc.want {
			t.Errorf("kindOf(%d, %q, %q) = %v, want %v", tc.status, tc.reason, tc.message, got, tc.want)
		}
	}
}

func TestErrorStripsControlBytesFromTheAPIsMessage(t *testing.T) {
	g := &config.GCP{Project: "my-project", Zone: "us-central1-a", MachineType: "g2-standard-4"}
	hostile := "Quota exceeded\x1b[2J\x1b]0;owned\x07\nFAKE LOG LINE\x00\u202e"
	for name, err := range map[string]error{
		"http": apiError(&googleapi.Error{Code: 403, Message: hostile, Errors: []googleapi.ErrorItem{{Reason: "quotaExceeded\r\n"}}}, "create machine \"m\"", g),
		"operation": operationError(&computepb.Operation{Error: &computepb.Error{Errors: []*computepb.Errors{{
			Code: proto.String("QUOTA_EXCEEDED\x1b[31m"), Message: proto.String(hostile),
		}}}}, "create machine \"m\"", g),
	} {
		msg := err.Error()
		for _, r := range msg {
			if r < 0x20 || r == 0x7f || r == '\u202e' {
				t.Errorf("%s: message %q contains control character %U", name, msg, r)
			}
		}
		var gerr *Error
		if !errors.As(err, &gerr) || gerr.Kind != QuotaExceeded {
			t.Errorf("%s: %v is not a quota *Error", name, err)
		}
		if !strings.Contains(msg, "FAKE LOG LINE") {
			t.Errorf("%s: message %q lost the text around the control bytes", name, msg)
		}
	}
}

func TestSanitizeBoundsLongMessages(t *testing.T) {
	s := sanitize(strings.Repeat("é", 2*maxMessage))
	if len(s) > maxMessage+len("...") || !strings.HasSuffix(s, "...") || strings.ContainsRune(s, '\uFFFD') {
		t.Errorf("sanitize(long) = %d bytes ending %q, want at most %d bytes of whole runes and ...", len(s), s[len(s)-8:], maxMessage+3)
	}
}

func TestOperationWithoutErrorIsNoError(t *testing.T) {
	g := &config.GCP{Project: "p", Zone: "z-a"}
	done := &computepb.Operation{Status: computepb.Operation_DONE.Enum(), HttpErrorStatusCode: proto.Int32(200)}
	if err := operationError(done, "create", g); err != nil {
		t.Errorf("operationError(success) = %v", err)
	}
	failed := &computepb.Operation{Status: computepb.Operation_DONE.Enum(), HttpErrorStatusCode: proto.Int32(500), HttpErrorMessage: proto.String("INTERNAL")}
	if err := operationError(failed, "create", g); err == nil {
		t.Error("operationError(HTTP 500 without errors) = nil, want an error")
	}
}

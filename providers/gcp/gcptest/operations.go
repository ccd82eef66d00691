package gcptest

import (
	"fmt"
	"net/http"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// operation is a zonal or regional operation that ends after some polls.
type operation struct {
	pb       *computepb.Operation
	polls    int       // polls left before DONE
	fail     *failure  // error to end with, if any
	whenDone func()    // what the operation does once it ends; s.mu held
	scope    [2]string // project and zone or region, which must match the poll's
}

// startOperation records a PENDING operation on target and returns it;
// the caller holds s.mu. project and location (a zone or region) are where
// it must be polled; zonal says which.
func (s *Server) startOperation(kind, project, location string, zonal bool, target string, fail *failure, whenDone func()) *computepb.Operation {
	s.opSeq++
	name := fmt.Sprintf("operation-%d-%s", s.opSeq, kind)
	pb := &computepb.Operation{
		Name:          proto.String(name),
		Id:            proto.Uint64(uint64(9000 + s.opSeq)),
		OperationType: proto.String(kind),
		TargetLink:    proto.String(s.URL + "/compute/v1/" + target),
		Status:        computepb.Operation_PENDING.Enum(),
		Progress:      proto.Int32(0),
	}
	where := "zones/" + location
	if zonal {
		pb.Zone = proto.String(s.URL + "/compute/v1/projects/" + project + "/zones/" + location)
	} else {
		pb.Region = proto.String(s.URL + "/compute/v1/projects/" + project + "/regions/" + location)
		where = "regions/" + location
	}
	pb.SelfLink = proto.String(s.URL + "/compute/v1/projects/" + project + "/" + where + "/operations/" + name)
	polls := s.OperationPolls
	if polls <= 0 {
		polls = 2
	}
	s.ops[name] = &operation{pb: pb, polls: polls, fail: fail, whenDone: whenDone, scope: [2]string{project, location}}
	return proto.Clone(pb).(*computepb.Operation)
}

// advance moves op one poll on; the caller holds s.mu.
func (s *Server) advance(op *operation) {
	if op.pb.GetStatus() == computepb.Operation_DONE {
		return
	}
	if s.hang {
		op.pb.Status = computepb.Operation_RUNNING.Enum()
		return
	}
	op.polls--
	if op.polls > 0 {
		op.pb.Status = computepb.Operation_RUNNING.Enum()
		op.pb.Progress = proto.Int32(50)
		return
	}
	op.pb.Status = computepb.Operation_DONE.Enum()
	op.pb.Progress = proto.Int32(100)
	if op.fail != nil {
		op.pb.HttpErrorStatusCode = proto.Int32(int32(op.fail.status))
		op.pb.HttpErrorMessage = proto.String(http.StatusText(op.fail.status))
		op.pb.Error = &computepb.Error{Errors: []*computepb.Errors{{
			Code:    proto.String(op.fail.code),
			Message: proto.String(op.fail.message),
		}}}
	}
	if op.whenDone != nil {
		op.whenDone()
	}
}

// getOperation answers zoneOperations and regionOperations get and wait:
// each moves the operation one poll on.
func (s *Server) getOperation(method string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.count(method)
		location := r.PathValue("zone") + r.PathValue("region")
		if f := pop(&s.pollFaults); f != 0 {
			e := f.failure(r.PathValue("project"), location, "", "", "")
			writeError(w, e.status, e.reason, e.message)
			return
		}
		op, ok := s.ops[r.PathValue("name")]
		if !ok || op.scope != [2]string{r.PathValue("project"), location} {
			writeError(w, http.StatusNotFound, "notFound", fmt.Sprintf("The resource 'projects/%s/.../operations/%s' was not found", r.PathValue("project"), r.PathValue("name")))
			return
		}
		s.advance(op)
		writeProto(w, op.pb)
	}
}

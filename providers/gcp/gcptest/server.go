// Package gcptest is a fake Compute Engine API for tests: an in-process
// HTTP server that speaks enough of the JSON REST API (instances, zone and
// region operations, resource policies, guest attributes) for the real
// client library, with knobs to inject the errors users hit.
//
// Like Compute Engine, it reports where an instance runs (its physical
// topology) only for some machine types or in a compact placement policy;
// SetPhysical makes it appear later, as it can after an insert.
//
// Operations are returned PENDING and end on a later poll, so that callers
// must wait for them; an injected operation fault ends one DONE with an
// error field behind a 200, as Compute Engine does.
package gcptest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Server is the fake API. Its methods are safe for concurrent use; set its
// function fields before the first request.
type Server struct {
	// URL is the endpoint to give the client (option.WithEndpoint).
	URL string

	// Addresses gives the i-th created instance (from 0) its internal and
	// external IPs; nil means 10.0.0.(i+1) and 34.0.0.(i+1).
	Addresses func(i int, name string) (internal, external string)
	// Physical gives the i-th created instance its physical topology, as
	// Compute Engine reports it: only for the machine types it reports it
	// for (A3 High with 8 GPUs, A3 Mega and Ultra, A4, A4X, H4D) and for
	// instances in a compact (COLLOCATED) placement policy; for any other,
	// or a nil result, none is reported. SetPhysical changes it later.
	Physical func(i int, name string) *PhysicalTopology
	// PhysicalReads is how many reads (gets and lists) of an instance
	// answer without the topology Physical gives it before it is
	// reported, as Compute Engine does not always report it at insert; 0
	// means from the insert on.
	PhysicalReads int
	// HostKeys gives the host keys the i-th instance's guest agent
	// published; none means getGuestAttributes answers 404, as before the
	// agent runs.
	HostKeys func(i int, name string) []KeyValue
	// PageSize bounds the instances of one list page; 0 means 500.
	PageSize int
	// OperationPolls is how many polls an operation stays unfinished
	// before it is DONE; 0 means 2.
	OperationPolls int

	srv *httptest.Server

	mu           sync.Mutex
	instances    map[string]*instance // by project/zone/name
	created      int
	ops          map[string]*operation
	opSeq        int
	policies     map[string]*policy // by project/region/name
	insertFaults []Fault
	opFaults     []Fault
	callFaults   []Fault
	pollFaults   []Fault
	hang         bool
	requests     map[string]int
}

// PhysicalTopology is where an instance runs: resourceStatus reports it
// as physicalHostTopology and as physicalHost, "/BLOCK/SUBBLOCK/HOST" (the
// documented blockId/subBlockId/hostId, with the leading slash gcloud
// shows).
type PhysicalTopology struct {
	Cluster, Block, SubBlock, Host string
	// OnlyPhysicalHost reports physicalHost without physicalHostTopology,
	// as API versions before the topology did.
	OnlyPhysicalHost bool
}

// KeyValue is a guest attribute: Key is the SSH key type, Value the
// base64 key.
type KeyValue struct {
	Key, Value string
}

// Start starts a server that is closed when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		instances: map[string]*instance{},
		ops:       map[string]*operation{},
		policies:  map[string]*policy{},
		requests:  map[string]int{},
	}
	mux := http.NewServeMux()
	const zone = "/compute/v1/projects/{project}/zones/{zone}"
	const region = "/compute/v1/projects/{project}/regions/{region}"
	mux.HandleFunc("POST "+zone+"/instances", s.insertInstance)
	mux.HandleFunc("GET "+zone+"/instances", s.listInstances)
	mux.HandleFunc("GET "+zone+"/instances/{name}", s.getInstance)
	mux.HandleFunc("DELETE "+zone+"/instances/{name}", s.deleteInstance)
	mux.HandleFunc("GET "+zone+"/instances/{name}/getGuestAttributes", s.getGuestAttributes)
	mux.HandleFunc("GET "+zone+"/operations/{name}", s.getOperation("zoneOperations.get"))
	mux.HandleFunc("POST "+zone+"/operations/{name}/wait", s.getOperation("zoneOperations.wait"))
	mux.HandleFunc("GET "+region+"/operations/{name}", s.getOperation("regionOperations.get"))
	mux.HandleFunc("POST "+region+"/operations/{name}/wait", s.getOperation("regionOperations.wait"))
	mux.HandleFunc("GET "+region+"/resourcePolicies/{name}", s.getPolicy)
	mux.HandleFunc("POST "+region+"/resourcePolicies", s.insertPolicy)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "notFound", "gcptest: no such API: "+r.Method+" "+r.URL.Path)
	})
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.failCall(w, r) {
			return
		}
		mux.ServeHTTP(w, r)
	}))
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// Requests is how many requests of a method the server answered, such as
// "instances.insert", "instances.list", "zoneOperations.get",
// "resourcePolicies.insert".
func (s *Server) Requests(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[method]
}

// failCall answers r with the next FailCalls fault, if any, and says
// whether it did.
func (s *Server) failCall(w http.ResponseWriter, r *http.Request) bool {
	s.mu.Lock()
	f := pop(&s.callFaults)
	if f != 0 {
		s.count("failedCalls")
	}
	s.mu.Unlock()
	if f == 0 {
		return false
	}
	// The path names the project and the zone or region the message
	// quotes: /compute/v1/projects/P/zones/Z/...
	var project, zone string
	parts := strings.Split(r.URL.Path, "/")
	for i := 0; i+1 < len(parts); i++ {
		switch parts[i] {
		case "projects":
			project = parts[i+1]
		case "zones", "regions":
			zone = parts[i+1]
		}
	}
	e := f.failure(project, zone, "", "", "")
	writeError(w, e.status, e.reason, e.message)
	return true
}

// count records a request; the caller holds s.mu.
func (s *Server) count(method string) { s.requests[method]++ }

// writeProto writes m as the API's JSON.
func writeProto(w http.ResponseWriter, m proto.Message) {
	b, err := protojson.Marshal(m)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "backendError", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.Write(b)
}

// readProto decodes a request body into m, answering 400 when it cannot.
func readProto(w http.ResponseWriter, r *http.Request, m proto.Message) bool {
	var raw json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&raw); err != nil {
		writeError(w, http.StatusBadRequest, "parseError", "gcptest: "+err.Error())
		return false
	}
	if err := protojson.Unmarshal(raw, m); err != nil {
		writeError(w, http.StatusBadRequest, "invalid", "gcptest: "+err.Error())
		return false
	}
	return true
}

// writeError writes Google's error JSON.
func writeError(w http.ResponseWriter, code int, reason, message string) {
	type item struct {
		Message string `json:"message"`
		Domain  string `json:"domain"`
		Reason  string `json:"reason"`
	}
	var body struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Errors  []item `json:"errors"`
			Status  string `json:"status,omitempty"`
		} `json:"error"`
	}
	body.Error.Code = code
	body.Error.Message = message
	body.Error.Errors = []item{{Message: message, Domain: "global", Reason: reason}}
	body.Error.Status = statusName(code)
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(body)
}

func statusName(code int) string {
	switch code {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusConflict:
		return "ALREADY_EXISTS"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	}
	return ""
}

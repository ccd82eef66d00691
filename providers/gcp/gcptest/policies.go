package gcptest

import (
	"fmt"
	"net/http"
	"sort"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

type policy struct {
	project, region string
	pb              *computepb.ResourcePolicy
}

// Policy is a snapshot of a resource policy's group placement.
type Policy struct {
	Project, Region, Name   string
	Collocation             string // "COLLOCATED" for compact placement
	AvailabilityDomainCount int    // spread placement's domains
}

// Policies returns every resource policy, by name.
func (s *Server) Policies() []Policy {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Policy
	for _, p := range s.policies {
		g := p.pb.GetGroupPlacementPolicy()
		out = append(out, Policy{
			Project: p.project, Region: p.region, Name: p.pb.GetName(),
			Collocation:             g.GetCollocation(),
			AvailabilityDomainCount: int(g.GetAvailabilityDomainCount()),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (s *Server) getPolicy(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count("resourcePolicies.get")
	project, region, name := r.PathValue("project"), r.PathValue("region"), r.PathValue("name")
	p, ok := s.policies[key(project, region, name)]
	if !ok {
		notFound(w, fmt.Sprintf("projects/%s/regions/%s/resourcePolicies/%s", project, region, name))
		return
	}
	writeProto(w, p.pb)
}

func (s *Server) insertPolicy(w http.ResponseWriter, r *http.Request) {
	pb := &computepb.ResourcePolicy{}
	if !readProto(w, r, pb) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count("resourcePolicies.insert")
	project, region := r.PathValue("project"), r.PathValue("region")
	target := fmt.Sprintf("projects/%s/regions/%s/resourcePolicies/%s", project, region, pb.GetName())
	k := key(project, region, pb.GetName())
	if _, ok := s.policies[k]; ok {
		writeError(w, http.StatusConflict, "alreadyExists", fmt.Sprintf("The resource '%s' already exists", target))
		return
	}
	pb.Region = proto.String(s.URL + "/compute/v1/projects/" + project + "/regions/" + region)
	pb.SelfLink = proto.String(s.URL + "/compute/v1/" + target)
	pb.Status = proto.String("READY")
	s.policies[k] = &policy{project: project, region: region, pb: pb}
	writeProto(w, s.startOperation("insert", project, region, false, target, nil, nil))
}

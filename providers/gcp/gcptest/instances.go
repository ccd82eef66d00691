package gcptest

import (
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// instance is a created instance: the resource as inserted, completed
// with what Compute Engine adds (id, status, IPs, topology).
type instance struct {
	project, zone string
	index         int
	pb            *computepb.Instance
	// physical is the topology Compute Engine reports once the instance
	// has been read PhysicalReads times; reads counts its gets and lists.
	physical *computepb.ResourceStatus
	reads    int
}

// Instance is a snapshot of an instance and of what its insert carried.
type Instance struct {
	Project, Zone, Name string
	Index               int    // order of creation, from 0
	Status              string // PROVISIONING until its insert ends, then RUNNING
	Labels              map[string]string
	Metadata            map[string]string
	MachineType         string // as sent: "zones/ZONE/machineTypes/TYPE"
	Accelerators        []Accelerator
	Scheduling          Scheduling
	ResourcePolicies    []string
	// Resource is the whole resource as the server holds it.
	Resource *computepb.Instance
}

// Accelerator is a guestAccelerators entry.
type Accelerator struct {
	Type  string // as sent: "zones/ZONE/acceleratorTypes/TYPE"
	Count int
}

// Scheduling is what an insert asked of scheduling.
type Scheduling struct {
	OnHostMaintenance, ProvisioningModel, InstanceTerminationAction string
}

// Instances returns every instance, by name.
func (s *Server) Instances() []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Instance, 0, len(s.instances))
	for _, in := range s.instances {
		out = append(out, in.snapshot())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (in *instance) snapshot() Instance {
	pb := proto.Clone(in.pb).(*computepb.Instance)
	snap := Instance{
		Project: in.project, Zone: in.zone, Name: pb.GetName(), Index: in.index,
		Status:      pb.GetStatus(),
		Labels:      pb.GetLabels(),
		Metadata:    map[string]string{},
		MachineType: pb.GetMachineType(),
		Scheduling: Scheduling{
			OnHostMaintenance:         pb.GetScheduling().GetOnHostMaintenance(),
			ProvisioningModel:         pb.GetScheduling().GetProvisioningModel(),
			InstanceTerminationAction: pb.GetScheduling().GetInstanceTerminationAction(),
		},
		ResourcePolicies: pb.GetResourcePolicies(),
		Resource:         pb,
	}
	for _, item := range pb.GetMetadata().GetItems() {
		snap.Metadata[item.GetKey()] = item.GetValue()
	}
	for _, a := range pb.GetGuestAccelerators() {
		snap.Accelerators = append(snap.Accelerators, Accelerator{Type: a.GetAcceleratorType(), Count: int(a.GetAcceleratorCount())})
	}
	return snap
}

// Remove deletes instance name out of band, as a person in the console
// would.
func (s *Server) Remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, in := range s.instances {
		if in.pb.GetName() == name {
			delete(s.instances, k)
		}
	}
}

// SetStatus sets instance name's status, such as "TERMINATED" for a
// preempted Spot VM.
func (s *Server) SetStatus(name, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.instances {
		if in.pb.GetName() == name {
			in.pb.Status = proto.String(status)
		}
	}
}

func key(project, location, name string) string { return project + "/" + location + "/" + name }

func notFound(w http.ResponseWriter, resource string) {
	writeError(w, http.StatusNotFound, "notFound", fmt.Sprintf("The resource '%s' was not found", resource))
}

func (s *Server) insertInstance(w http.ResponseWriter, r *http.Request) {
	project, zone := r.PathValue("project"), r.PathValue("zone")
	inst := &computepb.Instance{}
	if !readProto(w, r, inst) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count("instances.insert")
	name := inst.GetName()
	fail := func(f Fault) failure {
		image := ""
		if d := inst.GetDisks(); len(d) > 0 {
			image = d[0].GetInitializeParams().GetSourceImage()
		}
		return f.failure(project, zone, name, inst.GetMachineType(), image)
	}
	if f := pop(&s.insertFaults); f != 0 {
		e := fail(f)
		writeError(w, e.status, e.reason, e.message)
		return
	}
	if name == "" {
		writeError(w, http.StatusBadRequest, "required", "Required field 'resource.name' not specified")
		return
	}
	k := key(project, zone, name)
	target := fmt.Sprintf("projects/%s/zones/%s/instances/%s", project, zone, name)
	if _, ok := s.instances[k]; ok {
		writeError(w, http.StatusConflict, "alreadyExists", fmt.Sprintf("The resource '%s' already exists", target))
		return
	}
	if f := pop(&s.opFaults); f != 0 {
		// Compute Engine accepts the request and reports the failure
		// when the operation ends; nothing is created.
		e := fail(f)
		writeProto(w, s.startOperation("insert", project, zone, true, target, &e, nil))
		return
	}
	in := &instance{project: project, zone: zone, index: s.created, pb: inst}
	s.created++
	s.complete(in)
	s.instances[k] = in
	writeProto(w, s.startOperation("insert", project, zone, true, target, nil, func() {
		if in.pb.GetStatus() == "PROVISIONING" {
			in.pb.Status = proto.String("RUNNING")
		}
	}))
}

// complete adds to an inserted instance what Compute Engine would; the
// caller holds s.mu.
func (s *Server) complete(in *instance) {
	pb, i, name := in.pb, in.index, in.pb.GetName()
	pb.Id = proto.Uint64(uint64(1000000 + i))
	pb.Status = proto.String("PROVISIONING")
	pb.Zone = proto.String(s.URL + "/compute/v1/projects/" + in.project + "/zones/" + in.zone)
	pb.SelfLink = proto.String(*pb.Zone + "/instances/" + name)
	pb.CreationTimestamp = proto.String(time.Now().Format("2006-01-02T15:04:05.000-07:00"))
	internal, external := fmt.Sprintf("10.0.0.%d", i+1), fmt.Sprintf("34.0.0.%d", i+1)
	if s.Addresses != nil {
		internal, external = s.Addresses(i, name)
	}
	for n, nic := range pb.GetNetworkInterfaces() {
		nic.Name = proto.String("nic" + strconv.Itoa(n))
		if n == 0 {
			nic.NetworkIP = proto.String(internal)
			if acs := nic.GetAccessConfigs(); len(acs) > 0 {
				acs[0].NatIP = proto.String(external)
			}
		}
	}
	if s.Physical != nil && s.reportsPhysical(in) {
		if rs := s.Physical(i, name).resourceStatus(); s.PhysicalReads <= 0 {
			pb.ResourceStatus = rs
		} else {
			in.physical = rs
		}
	}
}

// read notes a get or list of in, and reports its topology from the read
// after the PhysicalReads-th on; the caller holds s.mu.
func (s *Server) read(in *instance) {
	in.reads++
	if in.physical != nil && in.reads > s.PhysicalReads {
		in.pb.ResourceStatus, in.physical = in.physical, nil
	}
}

// topologyTypes are the machine types, by prefix, that Compute Engine
// reports a physical topology for (docs: "View VM topology"): A3 High
// with 8 GPUs, A3 Mega, A3 Ultra, A4, A4X (and A4X Max), H4D.
var topologyTypes = []string{"a3-highgpu-8g", "a3-megagpu-", "a3-ultragpu-", "a4-", "a4x-", "h4d-"}

// reportsPhysical says whether Compute Engine reports where instance in
// runs: for some machine types, and for any instance in a compact
// placement policy. The caller holds s.mu.
func (s *Server) reportsPhysical(in *instance) bool {
	mt := in.pb.GetMachineType()
	mt = mt[strings.LastIndexByte(mt, '/')+1:]
	for _, prefix := range topologyTypes {
		if strings.HasPrefix(mt, prefix) {
			return true
		}
	}
	for _, url := range in.pb.GetResourcePolicies() {
		// projects/P/regions/R/resourcePolicies/N, maybe after a host.
		parts := strings.Split(url[max(strings.Index(url, "projects/"), 0):], "/")
		if len(parts) != 6 || parts[0] != "projects" || parts[2] != "regions" || parts[4] != "resourcePolicies" {
			continue
		}
		if p, ok := s.policies[key(parts[1], parts[3], parts[5])]; ok && p.pb.GetGroupPlacementPolicy().GetCollocation() == "COLLOCATED" {
			return true
		}
	}
	return false
}

// resourceStatus is how Compute Engine reports t; nil for nil.
func (t *PhysicalTopology) resourceStatus() *computepb.ResourceStatus {
	if t == nil {
		return nil
	}
	var path string
	for _, level := range []string{t.Block, t.SubBlock, t.Host} {
		if level != "" {
			path += "/" + level
		}
	}
	rs := &computepb.ResourceStatus{PhysicalHost: proto.String(path)}
	if !t.OnlyPhysicalHost {
		rs.PhysicalHostTopology = &computepb.ResourceStatusPhysicalHostTopology{
			Cluster: proto.String(t.Cluster), Block: proto.String(t.Block),
			Subblock: proto.String(t.SubBlock), Host: proto.String(t.Host),
		}
	}
	return rs
}

// SetPhysical makes instance name report t as where it runs from now on,
// whatever its machine type (nil: nothing), as Compute Engine does when it
// reports a topology some time after the insert.
func (s *Server) SetPhysical(name string, t *PhysicalTopology) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.instances {
		if in.pb.GetName() == name {
			in.pb.ResourceStatus, in.physical = t.resourceStatus(), nil
		}
	}
}

func (s *Server) getInstance(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count("instances.get")
	project, zone, name := r.PathValue("project"), r.PathValue("zone"), r.PathValue("name")
	in, ok := s.instances[key(project, zone, name)]
	if !ok {
		notFound(w, fmt.Sprintf("projects/%s/zones/%s/instances/%s", project, zone, name))
		return
	}
	s.read(in)
	writeProto(w, in.pb)
}

func (s *Server) deleteInstance(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count("instances.delete")
	project, zone, name := r.PathValue("project"), r.PathValue("zone"), r.PathValue("name")
	k := key(project, zone, name)
	in, ok := s.instances[k]
	target := fmt.Sprintf("projects/%s/zones/%s/instances/%s", project, zone, name)
	if !ok {
		notFound(w, target)
		return
	}
	in.pb.Status = proto.String("STOPPING")
	writeProto(w, s.startOperation("delete", project, zone, true, target, nil, func() {
		if s.instances[k] == in {
			delete(s.instances, k)
		}
	}))
}

// labelTerm is one `labels.KEY = "VALUE"` of a list filter; terms are
// joined by AND, the only form the fake understands.
var labelTerm = regexp.MustCompile(`^\(?\s*labels\.([a-z0-9_-]+)\s*=\s*"([^"]*)"\s*\)?$`)

func (s *Server) listInstances(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count("instances.list")
	project, zone := r.PathValue("project"), r.PathValue("zone")
	q := r.URL.Query()
	want := map[string]string{}
	if f := strings.TrimSpace(q.Get("filter")); f != "" {
		for _, term := range strings.Split(f, " AND ") {
			m := labelTerm.FindStringSubmatch(strings.TrimSpace(term))
			if m == nil {
				writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("Invalid value for field 'filter': '%s'. gcptest understands only labels.KEY = \"VALUE\" joined by AND.", f))
				return
			}
			want[m[1]] = m[2]
		}
	}
	var names []string
	for _, in := range s.instances {
		if in.project != project || in.zone != zone {
			continue
		}
		match := true
		for k, v := range want {
			if in.pb.GetLabels()[k] != v {
				match = false
			}
		}
		if match {
			names = append(names, in.pb.GetName())
		}
	}
	sort.Strings(names)
	size := s.PageSize
	if n, err := strconv.Atoi(q.Get("maxResults")); err == nil && n > 0 && (size <= 0 || n < size) {
		size = n
	}
	if size <= 0 {
		size = 500
	}
	start, _ := strconv.Atoi(q.Get("pageToken"))
	start = min(max(start, 0), len(names))
	end := min(start+size, len(names))
	list := &computepb.InstanceList{Id: proto.String("projects/" + project + "/zones/" + zone + "/instances")}
	for _, name := range names[start:end] {
		in := s.instances[key(project, zone, name)]
		s.read(in)
		list.Items = append(list.Items, in.pb)
	}
	if end < len(names) {
		list.NextPageToken = proto.String(strconv.Itoa(end))
	}
	writeProto(w, list)
}

func (s *Server) getGuestAttributes(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count("instances.getGuestAttributes")
	project, zone, name := r.PathValue("project"), r.PathValue("zone"), r.PathValue("name")
	in, ok := s.instances[key(project, zone, name)]
	if !ok {
		notFound(w, fmt.Sprintf("projects/%s/zones/%s/instances/%s", project, zone, name))
		return
	}
	query := r.URL.Query().Get("queryPath")
	var keys []KeyValue
	if s.HostKeys != nil && (query == "" || query == "hostkeys/") {
		keys = s.HostKeys(in.index, name)
	}
	if len(keys) == 0 {
		// What Compute Engine answers before the guest agent has
		// published anything under the path.
		notFound(w, fmt.Sprintf("projects/%s/zones/%s/instances/%s/guestAttributes/%s", project, zone, name, query))
		return
	}
	value := &computepb.GuestAttributesValue{}
	for _, kv := range keys {
		value.Items = append(value.Items, &computepb.GuestAttributesEntry{
			Namespace: proto.String("hostkeys"), Key: proto.String(kv.Key), Value: proto.String(kv.Value),
		})
	}
	writeProto(w, &computepb.GuestAttributes{
		Kind: proto.String("compute#guestAttributes"), QueryPath: proto.String(query), QueryValue: value,
	})
}

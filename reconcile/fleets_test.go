package reconcile_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// cloudHCL is a fleet of 4 created machines and a job that needs two of
// them in one network group.
const cloudHCL = `
fleet "cloud" {
  count = 4
  gcp {
    project      = "my-project"
    zone         = "europe-west1-b"
    machine_type = "a2-highgpu-8g"
    image        = "projects/deeplearning-platform-release/global/images/family/pytorch-latest-gpu"
  }
}

policy "block" {
  group_locality = "network_group"
}

job "train" {
  policy        = policy.block
  nodes         = 2
  gpus_per_node = 8
  command       = ["python", "train.py"]
}
`

// created is the provider's record of machine name of fleet cloud, in
// physical block "b".
func created(cfg *config.Config, name, block string) state.Machine {
	g := cfg.Fleets[0].GCP
	return state.Machine{
		Fleet: "cloud", Name: name, Provider: "gcp", SpecHash: g.SpecHash(), ID: "id-" + name,
		Zone: "europe-west1-b", Region: "europe-west1", InternalIP: "10.0.0." + name[len(name)-1:],
		Status: "RUNNING", CreatedAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
		Physical: &state.PhysicalHost{Cluster: "c1", Block: block, Host: "h-" + name},
	}
}

// createdFacts is a probe of a created machine; it claims (GCE metadata)
// a zone other than the provider's record.
func createdFacts(name string) facts.Host {
	h := machine(name, "")
	h.Fleet = "cloud"
	h.Location = facts.Location{Region: "us-east1", Zone: "us-east1-c", Source: facts.SourceGCEMetadata}
	return h
}

func cloudInput(t *testing.T, names []string, blocks []string, listed bool) (reconcile.Input, *config.Config) {
	t.Helper()
	cfg := loadConfig(t, cloudHCL)
	st := state.New()
	doc := &facts.Document{Version: facts.Version}
	for i, n := range names {
		st.Machines = append(st.Machines, created(cfg, n, blocks[i]))
		doc.Hosts = append(doc.Hosts, createdFacts(n))
	}
	in := input(cfg, st, doc)
	if listed {
		in.Listed = map[string]reconcile.Listing{"cloud": {Machines: slices.Clone(st.Machines)}}
	}
	return in, cfg
}

func machineActions(p *reconcile.Plan) []string {
	var out []string
	for _, f := range p.Fleets {
		for _, m := range f.Machines {
			code := ""
			if len(m.Reasons) > 0 {
				code = string(m.Reasons[0].Code)
			}
			out = append(out, string(m.Action)+" "+m.Name+" "+code)
		}
	}
	return out
}

// TestCreatedMachinesArePlacedByTheirProviderRecord: two machines share
// physical block b2, two are alone in their blocks; the job goes to the two
// in b2, at network-group level, whatever zone the machines claim.
func TestCreatedMachinesArePlacedByTheirProviderRecord(t *testing.T) {
	in, _ := cloudInput(t, []string{"cloud-0", "cloud-1", "cloud-2", "cloud-3"}, []string{"b1", "b2", "b3", "b2"}, true)
	p := reconcile.MakePlan(in)
	if got := machineActions(p); len(got) != 0 {
		t.Errorf("machine changes %v, want none", got)
	}
	c := action(t, p, "train", reconcile.ActionCreate, reconcile.ReasonNewJob)
	if c.Placement == nil {
		t.Fatal("not placed")
	}
	var hosts []string
	for _, n := range c.Placement.Nodes {
		hosts = append(hosts, n.Host)
		if !n.LocationTrusted || n.Location.Zone != "europe-west1-b" || n.Location.NetworkGroup != "c1/b2" {
			t.Errorf("node on %s at %+v (trusted %v), want the provider's europe-west1-b, c1/b2, trusted", n.Host, n.Location, n.LocationTrusted)
		}
	}
	slices.Sort(hosts)
	if !slices.Equal(hosts, []string{"cloud-1", "cloud-3"}) || c.Placement.Level.String() != "network_group" {
		t.Errorf("placed on %v at level %s, want cloud-1 and cloud-3 (block b2) at network_group", hosts, c.Placement.Level)
	}
}

// TestFleetScalesUpAndDown: count 4 with 2 recorded creates cloud-2 and
// cloud-3; count 1 with 4 recorded deletes the highest first and moves
// the job off them.
func TestFleetScalesUpAndDown(t *testing.T) {
	in, _ := cloudInput(t, []string{"cloud-0", "cloud-1"}, []string{"b1", "b1"}, true)
	p := reconcile.MakePlan(in)
	want := []string{"create cloud-2 count_raised", "create cloud-3 count_raised"}
	if got := machineActions(p); !slices.Equal(got, want) {
		t.Errorf("scale up: %v, want %v", got, want)
	}
	if p.Summary.CreateMachines != 2 || !p.HasChanges() {
		t.Errorf("summary %+v", p.Summary)
	}

	in, cfg := cloudInput(t, []string{"cloud-0", "cloud-1", "cloud-2", "cloud-3"}, []string{"b1", "b1", "b1", "b1"}, true)
	cfg.Fleets[0].Count = 2
	running(t, in.State, in.Facts, cfg, "train", "r1", map[string][]int{"cloud-1": {0, 1, 2, 3, 4, 5, 6, 7}, "cloud-3": {0, 1, 2, 3, 4, 5, 6, 7}}, "cloud-1", "cloud-3")
	p = reconcile.MakePlan(in)
	want = []string{"destroy cloud-3 count_lowered", "destroy cloud-2 count_lowered"}
	if got := machineActions(p); !slices.Equal(got, want) {
		t.Errorf("scale down: %v, want %v", got, want)
	}
	c := p.Job("train")
	if c == nil || c.Action != reconcile.ActionReplace || !hasReason(c, reconcile.ReasonMachineDeleted) {
		t.Fatalf("job on a deleted machine: %+v", c)
	}
	for _, n := range c.Placement.Nodes {
		if n.Host == "cloud-2" || n.Host == "cloud-3" {
			t.Errorf("placed on %s, which this plan deletes", n.Host)
		}
	}
}

// TestMachineChangesThatNeedANewMachineReplaceIt: a new machine type
// replaces every machine; labels do not.
func TestMachineChangesThatNeedANewMachineReplaceIt(t *testing.T) {
	in, cfg := cloudInput(t, []string{"cloud-0", "cloud-1", "cloud-2", "cloud-3"}, []string{"b1", "b1", "b1", "b1"}, true)
	cfg.Fleets[0].GCP.Labels = map[string]string{"team": "vision"}
	if got := machineActions(reconcile.MakePlan(in)); len(got) != 0 {
		t.Errorf("a label change: %v, want nothing", got)
	}
	cfg.Fleets[0].GCP.MachineType = "a3-highgpu-8g"
	p := reconcile.MakePlan(in)
	got := machineActions(p)
	if len(got) != 4 || got[0] != "replace cloud-0 machine_spec_changed" {
		t.Errorf("a machine type change: %v, want 4 replacements", got)
	}
	if p.Summary.CreateMachines != 4 || p.Summary.DeleteMachines != 4 {
		t.Errorf("summary %+v", p.Summary)
	}
}

// TestMachinesTheProviderNoLongerListsOrStoppedMoveTheirJobs: a machine
// deleted outside gpulayer is created again; a preempted Spot VM is
// reported; their jobs are replaced with the machine's reason; a labelled
// machine state does not know is reported and left alone.
func TestMachinesTheProviderNoLongerListsOrStoppedMoveTheirJobs(t *testing.T) {
	in, cfg := cloudInput(t, []string{"cloud-0", "cloud-1", "cloud-2", "cloud-3"}, []string{"b1", "b1", "b1", "b1"}, true)
	running(t, in.State, in.Facts, cfg, "train", "r1", map[string][]int{"cloud-0": {0, 1, 2, 3, 4, 5, 6, 7}, "cloud-1": {0, 1, 2, 3, 4, 5, 6, 7}}, "cloud-0", "cloud-1")
	in.State.Machines[1].Spot = true
	listing := in.Listed["cloud"]
	listing.Machines = listing.Machines[1:] // cloud-0 is gone
	listing.Machines[0].Status = "TERMINATED"
	stranger := created(cfg, "cloud-9", "b1")
	listing.Machines = append(listing.Machines, stranger)
	in.Listed["cloud"] = listing
	p := reconcile.MakePlan(in)
	if got := machineActions(p); !slices.Equal(got, []string{"create cloud-0 machine_missing"}) {
		t.Errorf("machines: %v", got)
	}
	c := action(t, p, "train", reconcile.ActionReplace, reconcile.ReasonMachineMissing, reconcile.ReasonMachineStopped)
	if !strings.Contains(c.Reasons[1].Message, "preempted") {
		t.Errorf("stopped reason %q does not say preempted", c.Reasons[1].Message)
	}
	for _, n := range c.Placement.Nodes {
		if n.Host != "cloud-2" && n.Host != "cloud-3" {
			t.Errorf("replacement placed on %s; only cloud-2 and cloud-3 are running", n.Host)
		}
	}
	warnings := strings.Join(p.Warnings, "\n")
	for _, want := range []string{"cloud-1", "preempted", "cloud-9", "leaves it alone"} {
		if !strings.Contains(warnings, want) {
			t.Errorf("warnings do not mention %q:\n%s", want, warnings)
		}
	}
}

// TestJobsWaitForMachinesThisApplyCreates: with no machine yet, the job
// waits for the ones the plan creates.
func TestJobsWaitForMachinesThisApplyCreates(t *testing.T) {
	in, _ := cloudInput(t, nil, nil, false)
	p := reconcile.MakePlan(in)
	c := action(t, p, "train", reconcile.ActionWaiting, reconcile.ReasonUnschedulableNow, reconcile.ReasonMachinesPending)
	if !strings.Contains(c.Reasons[1].Message, "cloud-0, cloud-1, cloud-2, cloud-3") {
		t.Errorf("pending reason %q", c.Reasons[1].Message)
	}
	if p.Fleets[0].Listed || p.Summary.CreateMachines != 4 {
		t.Errorf("fleet %+v summary %+v", p.Fleets[0], p.Summary)
	}
}

func hasReason(c *reconcile.JobChange, code reconcile.ReasonCode) bool {
	for _, r := range c.Reasons {
		if r.Code == code {
			return true
		}
	}
	return false
}

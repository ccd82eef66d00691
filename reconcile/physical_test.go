package reconcile_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/planview"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// TestAMachineThatGainsItsTopologyIsPlacedByIt: four machines recorded
// without a physical topology (GCP did not report one at insert) are
// listed with one at this refresh; the job that needs one network group is
// placed in block b2 by what the listing says, and state's record (the
// planner's input) is left as it was.
func TestAMachineThatGainsItsTopologyIsPlacedByIt(t *testing.T) {
	in, _ := cloudInput(t, []string{"cloud-0", "cloud-1", "cloud-2", "cloud-3"}, []string{"b1", "b2", "b3", "b2"}, true)
	for i := range in.State.Machines {
		in.State.Machines[i].Physical = nil
	}

	p := reconcile.MakePlan(in)

	c := action(t, p, "train", reconcile.ActionCreate, reconcile.ReasonNewJob)
	if c.Placement == nil {
		t.Fatalf("not placed: %+v", c.Reasons)
	}
	var hosts []string
	for _, n := range c.Placement.Nodes {
		hosts = append(hosts, n.Host)
		if n.Location.NetworkGroup != "c1/b2" {
			t.Errorf("node on %s in network group %q, want c1/b2 from the listing", n.Host, n.Location.NetworkGroup)
		}
	}
	slices.Sort(hosts)
	if !slices.Equal(hosts, []string{"cloud-1", "cloud-3"}) {
		t.Errorf("placed on %v, want cloud-1 and cloud-3 (block b2)", hosts)
	}
	if got := p.Fleets[0].PlacedByZone; got != nil {
		t.Errorf("placed by zone: %v, want none: every machine reported its topology", got)
	}
	for _, m := range in.State.Machines {
		if m.Physical != nil {
			t.Errorf("MakePlan changed its input: %s records %+v", m.Name, m.Physical)
		}
	}
}

// TestListedMachinesTakesTheTopologyAListingReports: a listing's topology
// replaces the record's; a listing without one, a failed listing, or no
// listing leaves the record as it is.
func TestListedMachinesTakesTheTopologyAListingReports(t *testing.T) {
	in, _ := cloudInput(t, []string{"cloud-0", "cloud-1", "cloud-2"}, []string{"b1", "b1", "b1"}, true)
	in.State.Machines[0].Physical = nil
	listing := in.Listed["cloud"]
	listing.Machines[1].Physical = nil // TERMINATED machines report none
	listing.Machines[2].Physical = &state.PhysicalHost{Block: "b7", SubBlock: "s2", Host: "h9"}
	in.State.Machines = append(in.State.Machines, state.Machine{Fleet: "other", Name: "other-0", Physical: &state.PhysicalHost{Block: "x"}})

	got, changed := reconcile.ListedMachines(in.State.Machines, in.Listed)

	want := []string{"c1/b1", "c1/b1", "b7/s2", "x"}
	for i, m := range got {
		if g := reconcile.PhysicalGroup(m.Physical); g != want[i] {
			t.Errorf("%s: network group %q, want %q", m.Name, g, want[i])
		}
	}
	if !changed {
		t.Error("changed = false, want true")
	}
	if in.State.Machines[0].Physical != nil || in.State.Machines[2].Physical.Block != "b1" {
		t.Errorf("ListedMachines changed its input: %+v", in.State.Machines)
	}
	if _, changed := reconcile.ListedMachines(got, in.Listed); changed {
		t.Error("listing the same again: changed = true, want false")
	}
	for name, listed := range map[string]map[string]reconcile.Listing{
		"not listed":     nil,
		"listing failed": {"cloud": {Error: "HTTP 500", Machines: listing.Machines}},
	} {
		if again, changed := reconcile.ListedMachines(in.State.Machines, listed); changed || again[0].Physical != nil {
			t.Errorf("%s: changed %v, cloud-0 %+v; want the records as they are", name, changed, again[0].Physical)
		}
	}
}

// TestAJobOnAMachineThatGainsItsTopologyKeepsRunning: a job placed on two
// machines by zone, before GCP reported where they are, is not replaced
// when it does: the machines did not move. A node recorded in another
// block than the one its machine now reports did move.
func TestAJobOnAMachineThatGainsItsTopologyKeepsRunning(t *testing.T) {
	for _, tc := range []struct {
		name     string
		recorded string // the nodes' recorded network group
		want     reconcile.Action
		codes    []reconcile.ReasonCode
	}{
		{"placed by zone", "", reconcile.ActionNoOp, nil},
		{"placed in another block", "c1/b9", reconcile.ActionReplace, []reconcile.ReasonCode{reconcile.ReasonLocationChanged, reconcile.ReasonLocationChanged}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, cfg := cloudInput(t, []string{"cloud-0", "cloud-1"}, []string{"b1", "b1"}, true)
			cfg.Fleets[0].Count = 2
			all := []int{0, 1, 2, 3, 4, 5, 6, 7}
			running(t, in.State, in.Facts, cfg, "train", "r1", map[string][]int{"cloud-0": all, "cloud-1": all}, "cloud-0", "cloud-1")
			j := in.State.Job("train")
			for i := range j.Nodes {
				j.Nodes[i].Fleet = "cloud"
				j.Nodes[i].Location = state.Location{Region: "europe-west1", Zone: "europe-west1-b", NetworkGroup: tc.recorded}
			}
			for i := range in.State.Machines {
				in.State.Machines[i].Physical = nil
			}

			p := reconcile.MakePlan(in)

			action(t, p, "train", tc.want, tc.codes...)
			if p.HasChanges() != (tc.want != reconcile.ActionNoOp) {
				t.Errorf("HasChanges = %v with job %s", p.HasChanges(), tc.want)
			}
		})
	}
}

// TestPlanNamesTheMachinesPlacedByZone: of a fleet's machines, those that
// can hold jobs and report no physical topology are named in the plan's
// data (JSON), and in its text and Markdown under the fleet; a stopped
// one, or one yet to be created, is not.
func TestPlanNamesTheMachinesPlacedByZone(t *testing.T) {
	in, _ := cloudInput(t, []string{"cloud-0", "cloud-1", "cloud-2"}, []string{"b1", "b1", "b1"}, true)
	for _, i := range []int{1, 2} {
		in.State.Machines[i].Physical = nil
	}
	listing := in.Listed["cloud"]
	for i := range listing.Machines {
		listing.Machines[i].Physical = in.State.Machines[i].Physical
	}
	listing.Machines[2].Status = "TERMINATED"

	p := reconcile.MakePlan(in)

	if got := p.Fleets[0].PlacedByZone; !slices.Equal(got, []string{"cloud-1"}) {
		t.Errorf("placed by zone: %v, want [cloud-1]", got)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"placed_by_zone":["cloud-1"]`)) {
		t.Errorf("JSON lacks placed_by_zone: %s", b)
	}
	var text, md bytes.Buffer
	if err := planview.Text(&text, p, planview.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := planview.Markdown(&md, p); err != nil {
		t.Fatal(err)
	}
	const want = "no physical host topology reported for cloud-1; placed by zone, not by block"
	fleet := text.String()[strings.Index(text.String(), `fleet "cloud"`):]
	if !strings.Contains(fleet, "\n      "+want+"\n") {
		t.Errorf("text does not say %q under the fleet:\n%s", want, text.String())
	}
	if !strings.Contains(md.String(), "  - "+strings.ReplaceAll(want, "-", `\-`)) {
		t.Errorf("Markdown does not say %q:\n%s", want, md.String())
	}
}

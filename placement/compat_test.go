package placement

import (
	"reflect"
	"slices"
	"testing"
)

// driverFleet: one zone, network group r1 with four workers on torch 2.5.1,
// two on driver 550.54.15 and two on 535.104.05, all H100s but a4, an A100.
func driverFleet() []Worker {
	ws := []Worker{
		wk("a1", "eu/z/r1", "2.5.1", 8, 8),
		wk("a2", "eu/z/r1", "2.5.1", 8, 8),
		wk("a3", "eu/z/r1", "2.5.1", 8, 8),
		wk("a4", "eu/z/r1", "2.5.1", 8, 8),
	}
	for i := range ws {
		ws[i].CUDADriver, ws[i].GPUModel = "550.54.15", "NVIDIA H100 80GB HBM3"
	}
	ws[2].CUDADriver, ws[3].CUDADriver = "535.104.05", "535.104.05"
	ws[3].GPUModel = "NVIDIA A100-SXM4-80GB"
	return ws
}

func TestScheduleKeysBucketsByEveryCompatibleProperty(t *testing.T) {
	job := Job{Name: "j", Nodes: 3, GPUsPerNode: 8}
	for _, tt := range []struct {
		name       string
		compatible []string
		status     Status
		summary    string
		excluded   []Exclusion // at the last level tried
	}{
		{"torch only (the default)", nil, StatusPlaced,
			"placed on worker group [a1 a2 a3] (same network group r1, torch 2.5.1)", []Exclusion{}},
		{"the driver splits r1 in two", []string{CompatTorch, CompatCUDADriver}, StatusWaiting,
			`waiting: fewer than 3 workers share one torch version and CUDA driver, even with every worker idle (best: torch 2.5.1, CUDA driver 535.104.05 with 2 of 3); on_unschedulable = "wait" keeps it waiting`,
			[]Exclusion{{ReasonCUDADriver, 2}}},
		{"the GPU model takes a4 out", []string{CompatGPUModel}, StatusPlaced,
			"placed on worker group [a1 a2 a3] (same network group r1, GPU NVIDIA H100 80GB HBM3)", []Exclusion{{ReasonGPUModel, 1}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := Schedule(job, driverFleet(), Policy{Compatible: tt.compatible})
			if d.Status != tt.status || d.Summary != tt.summary {
				t.Errorf("%s\n%q\nwant %s\n%q", d.Status, d.Summary, tt.status, tt.summary)
			}
			lv := d.Explanation.Levels[0]
			if d.Status != StatusPlaced {
				lv = d.Explanation.Levels[len(d.Explanation.Levels)-1]
			}
			if !reflect.DeepEqual(lv.Excluded, tt.excluded) {
				t.Errorf("level %s excluded %v, want %v", lv.Level, lv.Excluded, tt.excluded)
			}
		})
	}
}

func TestScheduleNamesThePropertyThatSplitTheFleet(t *testing.T) {
	// Each free worker at the chosen location that another property keeps
	// out counts under the first property (torch, driver, model) that
	// differs from the placed bucket's.
	ws := driverFleet()
	ws = append(ws, wk("t1", "eu/z/r1", "2.4.0", 8, 8))
	ws[4].CUDADriver, ws[4].GPUModel = "550.54.15", "NVIDIA H100 80GB HBM3"
	d := Schedule(Job{Name: "j", Nodes: 2, GPUsPerNode: 8}, ws,
		Policy{GroupLocality: LocalityNetworkGroup, Compatible: []string{CompatGPUModel, CompatCUDADriver, CompatTorch}})
	if !slices.Equal(ids(d), []string{"a1", "a2"}) {
		t.Fatalf("%v: %s", ids(d), d.Summary)
	}
	want := []Exclusion{{ReasonTorchVersion, 1}, {ReasonCUDADriver, 2}}
	if got := d.Explanation.Levels[0].Excluded; !reflect.DeepEqual(got, want) {
		t.Errorf("excluded %v, want %v (t1 by torch; a3 and a4 by the driver, which differs before a4's model)", got, want)
	}
	if want := "placed on worker group [a1 a2] (same network group r1, torch 2.5.1, CUDA driver 550.54.15, GPU NVIDIA H100 80GB HBM3)"; d.Summary != want {
		t.Errorf("summary %q, want %q", d.Summary, want)
	}
	if d.CUDADriver != "550.54.15" || d.GPUModel != "NVIDIA H100 80GB HBM3" || d.TorchVersion != "2.5.1" {
		t.Errorf("decision keyed on %q %q %q", d.TorchVersion, d.CUDADriver, d.GPUModel)
	}
}

func TestScheduleWithoutTorchInCompatibleMixesTorchVersions(t *testing.T) {
	ws := []Worker{wk("a", "eu/z/r1", "2.5.1", 8, 8), wk("b", "eu/z/r1", "2.4.0", 8, 8)}
	d := Schedule(Job{Name: "j", Nodes: 2, GPUsPerNode: 8}, ws, Policy{Compatible: []string{CompatCUDADriver}})
	if d.Status != StatusPlaced || d.TorchVersion != "" {
		t.Errorf("%s (torch %q), want placed on both, torch not keyed", d.Summary, d.TorchVersion)
	}
	if want := "placed on worker group [a b] (same network group r1, CUDA driver unknown)"; d.Summary != want {
		t.Errorf("summary %q, want %q", d.Summary, want)
	}
}

func TestPolicyValidateRejectsBadCompatibleAndSlices(t *testing.T) {
	for _, tt := range []struct {
		policy Policy
		want   string
	}{
		{Policy{Compatible: []string{"torch", "cuda"}}, `policy: unknown compatible property "cuda" (want torch, cuda_driver or gpu_model)`},
		{Policy{Compatible: []string{"gpu_model", "gpu_model"}}, `policy: compatible lists "gpu_model" twice`},
		{Policy{Slice: &Slice{Nodes: 0, Locality: "zone"}}, "policy: slices of 0 nodes; a slice has at least 1"},
		{Policy{Slice: &Slice{Nodes: 2, Locality: "any"}}, `policy: unknown slice locality "any" (want nvlink_domain, network_group, zone or region)`},
		{Policy{Slice: &Slice{Nodes: 2, Locality: "rack"}}, `policy: unknown slice locality "rack" (want nvlink_domain, network_group, zone or region)`},
		{Policy{GroupLocality: LocalityZone, Slice: &Slice{Nodes: 2, Locality: "region"}}, "policy: slice locality region is looser than group_locality zone; a slice is within the group"},
		{Policy{Rank: "pack"}, `policy: unknown rank "pack" (want spread, first_fit, most_free_memory or binpack)`},
	} {
		err := tt.policy.Validate()
		if err == nil || err.Error() != tt.want {
			t.Errorf("%+v: %v, want %s", tt.policy, err, tt.want)
		}
		d := Schedule(Job{Name: "j", Nodes: 2, GPUsPerNode: 1}, labFleet(), tt.policy)
		if d.Status != StatusFailed || d.Summary != "failed: "+tt.want {
			t.Errorf("%+v: %s", tt.policy, d.Summary)
		}
	}
	for _, p := range []Policy{
		{Compatible: []string{"gpu_model", "torch", "cuda_driver"}},
		{Slice: &Slice{Nodes: 2, Locality: "region"}}, // under prefer, any level
		{GroupLocality: LocalityZone, Slice: &Slice{Nodes: 2, Locality: "zone"}},
		{GroupLocality: LocalityAny, Slice: &Slice{Nodes: 1, Locality: "network_group"}},
	} {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
}

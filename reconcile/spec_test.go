package reconcile_test

import (
	"slices"
	"testing"

	"github.com/gpulayer/gpulayer/placement"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// TestPolicyCompatibleAndSliceReachTheSchedulerAndTheHash: the default
// compatible list and no slice leave a job's recorded spec, and so its
// hash, as before they existed (an upgrade replaces no job); setting them
// changes the hash under "policy" and reaches placement.Policy.
func TestPolicyCompatibleAndSliceReachTheSchedulerAndTheHash(t *testing.T) {
	spec := func(policy string) state.JobSpec {
		cfg := loadConfig(t, `policy "p" {
  group_locality = "zone"
`+policy+`
}
job "j" {
  policy  = policy.p
  nodes   = 4
  command = ["true"]
}`)
		return reconcile.JobSpec(cfg.Jobs[0], nil)
	}
	plain := spec("")
	if plain.Policy.Compatible != nil || plain.Policy.Slice != nil {
		t.Errorf("default policy recorded as %+v", plain.Policy)
	}
	if s := spec(`compatible = ["torch"]`); s.Hash() != plain.Hash() {
		t.Error(`compatible = ["torch"] (the default) changes the hash`)
	}
	sliced := spec("compatible = [\"torch\", \"gpu_model\"]\n  slice {\n    nodes = 2\n    locality = \"network_group\"\n  }")
	if sliced.Hash() == plain.Hash() || !slices.Equal(state.ChangedFields(plain, sliced), []string{state.FieldPolicy}) {
		t.Errorf("compatible and slice: hash unchanged or fields %v", state.ChangedFields(plain, sliced))
	}
	p := reconcile.Policy(sliced.Policy)
	if !slices.Equal(p.Compatible, []string{placement.CompatTorch, placement.CompatGPUModel}) ||
		p.Slice == nil || *p.Slice != (placement.Slice{Nodes: 2, Locality: placement.LocalityNetworkGroup}) || p.Validate() != nil {
		t.Errorf("placement policy %+v (slice %+v)", p, p.Slice)
	}
	if p := reconcile.Policy(plain.Policy); p.Slice != nil || len(p.Compatible) != 0 {
		t.Errorf("default placement policy %+v", p)
	}
}

// TestPlanKeysOnTheGPUModelOfEveryGPU: a machine's GPU model is its GPUs'
// names; one with two models matches only machines of the same mix.
func TestPlanKeysOnTheGPUModelOfEveryGPU(t *testing.T) {
	doc := fleetFacts()
	doc.Find("a2").GPUs[7].Name = "Tesla V100-SXM2-16GB"
	cfg := loadConfig(t, fleetHCL, `
policy "same_gpus" {
  group_locality = "network_group"
  compatible     = ["gpu_model"]
}
job "j" {
  policy        = policy.same_gpus
  nodes         = 3
  gpus_per_node = 8
  command       = ["true"]
}`)
	c := reconcile.MakePlan(input(cfg, state.New(), doc)).Job("j")
	want := `waiting: no network group has 3 workers with one GPU model, even with every worker idle (best: rack-3 with 2 of 3, GPU Tesla V100-SXM2-32GB); on_unschedulable = "wait" keeps it waiting`
	if c == nil || c.Action != reconcile.ActionWaiting || c.Decision.Summary != want {
		t.Fatalf("%+v\nwant %q", c, want)
	}
	var split []string
	for _, b := range c.Decision.Explanation.Levels[0].Buckets {
		split = append(split, b.GPUModel)
	}
	if want := []string{"Tesla V100-SXM2-16GB + Tesla V100-SXM2-32GB", "Tesla V100-SXM2-32GB", "Tesla V100-SXM2-32GB"}; !slices.Equal(split, want) {
		t.Errorf("buckets by GPU model %q, want %q", split, want)
	}
}

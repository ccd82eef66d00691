package reconcile_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/config"
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

// TestStartCheckStaysOutOfTheRecordedSpecAtItsDefault: a job that sets no
// start_check records none (its spec's JSON and hash are what they were
// before start_check existed); one that sets it records it, outside the
// hash (changing it relaunches nothing), and StartCheck reads either.
func TestStartCheckStaysOutOfTheRecordedSpecAtItsDefault(t *testing.T) {
	spec := func(attr string) state.JobSpec {
		cfg := loadConfig(t, `job "j" {
  nodes   = 1
  command = ["true"]
  `+attr+`
}`)
		return reconcile.JobSpec(cfg.Jobs[0], nil)
	}
	plain, set, zero := spec(""), spec(`start_check = "2s"`), spec(`start_check = "0s"`)
	if plain.StartCheck != nil || reconcile.StartCheck(plain) != config.DefaultStartCheck {
		t.Errorf("default: recorded %v, reads %s", plain.StartCheck, reconcile.StartCheck(plain))
	}
	if b, _ := json.Marshal(plain); strings.Contains(string(b), "start_check") {
		t.Errorf("the default start_check is in the recorded spec: %s", b)
	}
	if reconcile.StartCheck(set) != 2*time.Second || reconcile.StartCheck(zero) != 0 {
		t.Errorf("set: %s, zero: %s", reconcile.StartCheck(set), reconcile.StartCheck(zero))
	}
	if set.Hash() != plain.Hash() {
		t.Error("start_check changed the job's hash")
	}
}

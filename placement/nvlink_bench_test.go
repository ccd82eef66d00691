package placement

import (
	"fmt"
	"testing"

	"github.com/gpulayer/gpulayer/internal/threadcpu"
)

// BenchmarkSchedulePoliciesNVLink is BenchmarkSchedulePolicies' fleet with
// 4 network groups per zone (racks) where racks 0 and 1 of each zone are
// each one NVLink domain (ids as NVML's, 47 bytes), so that prefer starts
// at nvlink_domain (40 cells):
//
//   - nvlink: the 8-node, 8-GPU job under the default policy;
//   - nvlink-required: group_locality nvlink_domain;
//   - nvlink-mix: binpack, pairs per NVLink domain and the three
//     compatible properties, 4 GPUs per node, group_locality network_group.
func BenchmarkSchedulePoliciesNVLink(b *testing.B) {
	compat := []string{CompatTorch, CompatCUDADriver, CompatGPUModel}
	cases := []struct {
		name   string
		gpus   int
		policy Policy
	}{
		{"nvlink", 8, Policy{}},
		{"nvlink-required", 8, Policy{GroupLocality: LocalityNVLinkDomain}},
		{"nvlink-mix", 4, Policy{Rank: RankBinpack, GroupLocality: LocalityNetworkGroup, Slice: &Slice{Nodes: 2, Locality: LocalityNVLinkDomain}, Compatible: compat}},
	}
	for _, c := range cases {
		for _, n := range []int{500, 10000} {
			b.Run(fmt.Sprintf("%s/workers=%d", c.name, n), func(b *testing.B) {
				ws := nvlPolicyFleet(b, n)
				job := Job{Name: "train", Nodes: 8, GPUsPerNode: c.gpus}
				d := Schedule(job, ws, c.policy)
				if d.Status != StatusPlaced || c.policy.Slice == nil && d.Level != LevelNVLinkDomain {
					b.Fatalf("%s at %s: %s", d.Status, d.Level, d.Summary)
				}
				b.ReportAllocs()
				threadcpu.Loop(b, func() { Schedule(job, ws, c.policy) })
			})
		}
	}
}

// nvlPolicyFleet is policyFleet with racks, racks 0 and 1 of each zone an
// NVLink domain each. The workers of a domain share one string, as
// reconcile's workers do (it interns the ids).
func nvlPolicyFleet(b testing.TB, n int) []Worker {
	ws := policyFleet(b, n, true)
	ids := map[int]string{}
	for i := range ws {
		rack := (i / len(adrZones)) % 4
		if rack < 2 {
			k := i%len(adrZones)*4 + rack
			if ids[k] == "" {
				ids[k] = fmt.Sprintf("9f3c21ab-5e0d-4c1b-8a7e-%012x:%d", k, 32766)
			}
			ws[i].Location.NVLinkDomain = ids[k]
		}
	}
	return ws
}

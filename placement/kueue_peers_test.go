package placement

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
)

// TestScheduleMatchesKueueTestFindTopologyAssignments maps the cases of
// Kueue's own unit test of topology-aware scheduling,
// TestFindTopologyAssignments (kubernetes-sigs/kueue, pkg/cache/
// tas_cache_test.go at 083c7ff7e8, "Consolidate unit tests for
// TestFindTopologyAssignment (#6013)", the commit that gave the test its
// name: 78 cases), onto gpulayer's Schedule. peers_test.go maps the KEP's
// prose; this maps the code's cases. This version, not the newest
// (pkg/cache/scheduler/tas_cache_test.go, 140 cases in August 2026), because
// the newest no longer has the 13 LeastFreeCapacity (bin-packing) cases; 49
// of the 62 mapped here are in it under the same names.
//
// The mapping (as in peers_test.go): Kueue's block, rack and host levels
// are gpulayer's region, zone and network group; a pod is one node of a job
// (one machine), so a Kueue host with room for c pods (c CPUs, pods of one
// CPU) is a network group of c free machines. What Kueue's LeastFreeCapacity
// sorts by, a host's free capacity, gpulayer's binpack reads off each
// machine, so every machine of such a group has c free GPUs (of 8) and a pod
// of r CPUs is a node of r GPUs. A case with two levels (block, rack) has
// machines with no network group, and one with only blocks machines with
// only a region: Kueue does not see the levels its topology leaves out, and
// gpulayer then does not either. Kueue's policies: BestFit is gpulayer's
// default (best_fit buckets, the fewest sub-groups, spread rank);
// LeastFreeCapacity (the TASProfileLeastFreeCapacity gate, and under
// TASProfileMixed for unconstrained pod sets) is rank = "binpack"; a
// required level is group_locality set to that level, a preferred one
// prefer (gpulayer's prefer starts at the tightest level, and Kueue's
// preferred level admits anything tighter too), unconstrained any, and no
// topology request at all gpulayer's default, prefer. Kueue's pod-set
// slices are policy.slice. A pod set Kueue cannot fit stays pending:
// gpulayer's waiting. A request Kueue rejects as invalid is a configuration
// error in gpulayer: failed.
//
// Skipped, 16 of the 78, as they have no meaning in gpulayer:
//   - Kubernetes node state and pod bookkeeping (7): "no assignment as node
//     is not ready", "no assignment as node is unschedulable", "skip node
//     which has untolerated taint", "allow to schedule on node with
//     tolerated taint" (readiness, cordons, taints and tolerations), "no
//     assignment as node does not have enough allocatable pods" (the
//     kubelet's pod count), "don't consider unscheduled Pods when computing
//     capacity" and "don't consider terminal pods when computing the
//     capacity" (pod phases; gpulayer reads free GPUs off the machine).
//   - A resource other than GPUs (1): "rack required; single Pod requiring
//     memory; BestFit".
//   - Two pod sets of one workload placed together, leader and workers or
//     two sets sharing free capacity (8): the "find topology assignment for
//     two podsets ..." cases. A gpulayer job is one set of identical nodes.
//
// The other 62 are mapped. Each case names the upstream case it maps.
// Where gpulayer decides otherwise for a reason its design states, want
// is gpulayer's decision, kueue Kueue's (logged) and why says which rule
// (7 cases). A case where gpulayer falls short of its own rule is skipped
// with the defect named (defect; none now, since the fewest sub-groups
// count every tighter level: "2 blocks with unbalanced subdomains" was
// one): want is then Kueue's answer.
func TestScheduleMatchesKueueTestFindTopologyAssignments(t *testing.T) {
	// Kueue's fixtures, as block/rack/host:capacity.
	//      b1                   b2
	//   /      \             /      \
	//  r1       r2          r1       r2
	//  |      /  |  \       |         |
	//  x1    x2  x3  x4     x5       x6 (room for 2)
	defaultNodes := []string{"b1/r1/x1:1", "b1/r2/x2:1", "b1/r2/x3:1", "b1/r2/x4:1", "b2/r1/x5:1", "b2/r2/x6:2"}
	// b1/r1: x1 (4), x2, x3; b2/r1: x4 (2), x5.
	scatteredNodes := []string{"b1/r1/x1:4", "b1/r1/x2:1", "b1/r1/x3:1", "b2/r1/x4:2", "b2/r1/x5:1"}
	// Two blocks of two racks of two hosts, each with room for one pod.
	binaryTreesNodes := []string{"b1/r1/x1:1", "b1/r1/x2:1", "b1/r2/x3:1", "b1/r2/x4:1", "b2/r1/x5:1", "b2/r1/x6:1", "b2/r2/x7:1", "b2/r2/x8:1"}
	three, two := kueueFleet(3), kueueFleet(2)
	pods := func(n int) Job { return Job{Nodes: n, GPUsPerNode: 1} }
	binpack := Policy{Rank: RankBinpack}
	req := func(l string) Policy { return Policy{GroupLocality: l} }
	reqBinpack := func(l string) Policy { return Policy{GroupLocality: l, Rank: RankBinpack} }
	slices := func(l string, n int, sl string) Policy {
		return Policy{GroupLocality: l, Slice: &Slice{Nodes: n, Locality: sl}}
	}
	slicesBinpack := func(l string, n int, sl string) Policy {
		p := slices(l, n, sl)
		p.Rank = RankBinpack
		return p
	}
	labelled := func(ws []Worker, labels ...map[string]string) []Worker {
		for i := range ws {
			ws[i].Labels = labels[i]
		}
		return ws
	}
	// busy is a host of ten GPUs (one CPU: a GPU per 100m) with used of
	// them taken by a process gpulayer did not start (Kueue's non-TAS pod).
	busy := func(id string, used int) Worker { return wk(id, "-/-/"+id, "2.5.1", 10, 10-used) }

	for _, tt := range []struct {
		upstream string // the case's name in TestFindTopologyAssignments
		fleet    []Worker
		job      Job
		policy   Policy
		want     map[string]int // pods per domain, as Kueue's assignment lists them
		status   Status         // when not placed
		kueue    map[string]int // Kueue's assignment, where gpulayer's differs by design
		why      string         // the design rule that makes it differ
		defect   string         // where gpulayer falls short of its own rule: the case is skipped
	}{
		{upstream: "minimize the number of used racks before optimizing the number of nodes; BestFit",
			fleet: three("b1/r1/x1:2", "b1/r2/x2:2", "b1/r3/x3:1", "b1/r3/x4:1", "b1/r3/x5:1", "b1/r3/x6:1"),
			job:   pods(4), policy: req(LocalityRegion),
			want: map[string]int{"x3": 1, "x4": 1, "x5": 1, "x6": 1}},
		{upstream: "minimize resource fragmentation; LeastFreeCapacityFit",
			fleet: three("b1/r1/x1:2", "b1/r1/x2:1", "b1/r1/x3:1"),
			job:   pods(2), policy: reqBinpack(LocalityRegion),
			want: map[string]int{"x1": 2}, kueue: map[string]int{"x2": 1, "x3": 1},
			why: "docs/placement.md, \"Inside a bucket: the fewest sub-groups\": binpack orders only the network groups that hold the remainder; x1 holds both nodes, so the job stays in one network group where Kueue's LeastFreeCapacity splits it over the two hosts with the least free capacity"},
		{upstream: "choose the node that can accommodate all Pods",
			fleet: three("b1/r1/x1:2", "b1/r1/x2:1", "b1/r1/x3:1"),
			job:   pods(2), policy: req(LocalityRegion),
			want: map[string]int{"x1": 2}},
		{upstream: "unconstrained; 2 pods fit into hosts scattered across the whole datacenter even they could fit into single rack; LeastFreeCapacity",
			fleet: three(scatteredNodes...), job: pods(2), policy: reqBinpack(LocalityAny),
			want: map[string]int{"x2": 1, "x3": 1}, kueue: map[string]int{"x4": 2},
			why: "ADR-0021: under group_locality = any location is ignored: the job takes machines in rank order alone, binpack's fullest first (x2 and x3, one GPU free each), where Kueue's unconstrained still fits the pods into the host with the least free capacity"},
		{upstream: "no annotation; implied default to unconstrained; 6 pods fit into hosts scattered across the whole datacenter even they could fit into single rack; BestFit",
			fleet: three(scatteredNodes...), job: pods(6), policy: Policy{},
			want: map[string]int{"x1": 4, "x2": 1, "x3": 1}, kueue: map[string]int{"x1": 4, "x4": 2},
			why: "ADR-0021: gpulayer's default group_locality is prefer, the tightest level that holds the job now (zone b1/r1), where Kueue's default is unconstrained"},
		{upstream: "unconstrained; 6 pods fit into hosts scattered across the whole datacenter even they could fit into single rack; BestFit",
			fleet: three(scatteredNodes...), job: pods(6), policy: req(LocalityAny),
			want: map[string]int{"x1": 4, "x4": 2}},
		{upstream: "unconstrained; a single pod fits into each host; BestFit",
			fleet: three(defaultNodes...), job: pods(1), policy: req(LocalityAny),
			want: map[string]int{"x6": 1}, kueue: map[string]int{"x1": 1},
			why: "ADR-0021: under group_locality = any location is ignored: the one node goes to the first machine in spread's rank order (most free GPUs: x6's two), where Kueue's BestFit takes the tightest host"},
		{upstream: "unconstrained; a single pod fits into each host; LeastFreeCapacity; TASProfileLeastFreeCapacity",
			fleet: three(defaultNodes...), job: pods(1), policy: reqBinpack(LocalityAny),
			want: map[string]int{"x1": 1}},
		{upstream: "unconstrained; a single pod fits into each host; LeastFreeCapacity; TASProfileMixed",
			fleet: three(defaultNodes...), job: pods(1), policy: reqBinpack(LocalityAny),
			want: map[string]int{"x1": 1}},
		{upstream: "block required; 4 pods fit into one host each; BestFit",
			fleet: three(binaryTreesNodes...), job: pods(4), policy: req(LocalityRegion),
			want: map[string]int{"x1": 1, "x2": 1, "x3": 1, "x4": 1}},
		{upstream: "host required; single Pod fits in the host; LeastFreeCapacityFit",
			fleet: three(defaultNodes...), job: pods(1), policy: reqBinpack(LocalityNetworkGroup),
			want: map[string]int{"x1": 1}},
		{upstream: "host required; single Pod fits in the host; BestFit",
			fleet: three(defaultNodes...), job: pods(1), policy: req(LocalityNetworkGroup),
			want: map[string]int{"x1": 1}},
		{upstream: "host required; single Pod fits in the host; BestFit; TASProfileMixed",
			fleet: three(defaultNodes...), job: pods(1), policy: req(LocalityNetworkGroup),
			want: map[string]int{"x1": 1}},
		{upstream: "host required; single Pod fits in the largest host; LeastFreeCapacityFit",
			fleet: three(defaultNodes...), job: pods(2), policy: reqBinpack(LocalityNetworkGroup),
			want: map[string]int{"x6": 2}},
		{upstream: "host preferred; single Pod fits in the largest host; LeastFreeCapacityFit",
			fleet: three(defaultNodes...), job: pods(2), policy: binpack,
			want: map[string]int{"x6": 2}},
		{upstream: "host required; no single host fits all pods, expect notFitMessage; LeastFreeCapacityFit",
			fleet: three(defaultNodes...), job: pods(3), policy: reqBinpack(LocalityNetworkGroup),
			status: StatusWaiting},
		// Upstream this case requires the host despite its name.
		{upstream: "host preferred; single Pod fits in the host; BestFit; TASProfileMixed",
			fleet: three(defaultNodes...), job: pods(1), policy: req(LocalityNetworkGroup),
			want: map[string]int{"x1": 1}},
		{upstream: "rack required; single Pod fits in a rack; BestFit",
			fleet: two(defaultNodes...), job: pods(1), policy: req(LocalityZone),
			want: map[string]int{"b1/r1": 1}},
		{upstream: "rack required; single Pod fits in a rack; LeastFreeCapacityFit",
			fleet: three(defaultNodes...), job: pods(1), policy: reqBinpack(LocalityZone),
			want: map[string]int{"x1": 1}},
		{upstream: "rack preferred; multiple Pods fits in multiple racks; LeastFreeCapacityFit",
			fleet: two(defaultNodes...), job: pods(2), policy: binpack,
			want: map[string]int{"b1/r2": 2}, kueue: map[string]int{"b2/r2": 2},
			why: "docs/placement.md, Buckets: under binpack the rank key comes first, the bucket whose machines are fullest (b1/r2's, one GPU free each, over b2/r2's two), the least room left only between equal keys; Kueue's LeastFreeCapacity ranks racks by their free capacity alone"},
		{upstream: "rack required; multiple Pods fit in a rack; BestFit",
			fleet: two(defaultNodes...), job: pods(3), policy: req(LocalityZone),
			want: map[string]int{"b1/r2": 3}},
		{upstream: "block preferred; Pods fit in 2 blocks; BestFit",
			fleet: kueueFleet(1)("b1:2", "b2:1", "b3:4"), job: pods(5), policy: Policy{},
			want: map[string]int{"b2": 1, "b3": 4}},
		{upstream: "rack required; multiple Pods fit in some racks; BestFit",
			fleet: two(defaultNodes...), job: pods(2), policy: req(LocalityZone),
			want: map[string]int{"b2/r2": 2}},
		{upstream: "rack required; too many pods to fit in any rack; BestFit",
			fleet: two(defaultNodes...), job: pods(4), policy: req(LocalityZone),
			status: StatusWaiting},
		{upstream: "block required; single Pod fits in a block; LeastFreeCapacityFit",
			fleet: three(defaultNodes...), job: pods(1), policy: reqBinpack(LocalityRegion),
			want: map[string]int{"x5": 1}},
		{upstream: "block required; two Pods fits in a block; LeastFreeCapacityFit",
			fleet: three(defaultNodes...), job: pods(2), policy: reqBinpack(LocalityRegion),
			want: map[string]int{"x2": 1, "x3": 1}, kueue: map[string]int{"x5": 1, "x6": 1},
			why: "docs/placement.md, Buckets: under binpack the rank key comes first, the region whose machines are fullest (b1's, one GPU free each; b2's second machine has two), where Kueue's LeastFreeCapacity takes the block with the least free capacity (b2, 3 against 4)"},
		{upstream: "block required; single Pod fits in a block and a single rack; BestFit",
			fleet: two(defaultNodes...), job: pods(1), policy: req(LocalityRegion),
			want: map[string]int{"b2/r1": 1}},
		{upstream: "block required; single Pod fits in a block spread across two racks; BestFit",
			fleet: two(defaultNodes...), job: pods(4), policy: req(LocalityRegion),
			want: map[string]int{"b1/r2": 3, "b1/r1": 1}},
		{upstream: "block required; Pods fit in a block spread across two racks; BestFit",
			fleet: two(defaultNodes...), job: pods(4), policy: req(LocalityRegion),
			want: map[string]int{"b1/r2": 3, "b1/r1": 1}},
		{upstream: "block required; single Pod which cannot be split; BestFit",
			fleet: two(defaultNodes...), job: Job{Nodes: 1, GPUsPerNode: 4}, policy: req(LocalityRegion),
			status: StatusWaiting},
		{upstream: "block required; too many Pods to fit requested; BestFit",
			fleet: two(defaultNodes...), job: pods(5), policy: req(LocalityRegion),
			status: StatusWaiting},
		{upstream: "rack preferred; but only block can accommodate the workload; BestFit",
			fleet: two(defaultNodes...), job: pods(4), policy: Policy{},
			want: map[string]int{"b1/r2": 3, "b1/r1": 1}},
		{upstream: "rack preferred; but only multiple blocks can accommodate the workload; BestFit",
			fleet: two(defaultNodes...), job: pods(6), policy: Policy{},
			want: map[string]int{"b1/r2": 3, "b2/r2": 2, "b1/r1": 1}},
		{upstream: "block preferred; but only multiple blocks can accommodate the workload; BestFit",
			fleet: two(defaultNodes...), job: pods(6), policy: Policy{},
			want: map[string]int{"b1/r2": 3, "b2/r2": 2, "b1/r1": 1}},
		{upstream: "block preferred; but the workload cannot be accommodate in entire topology; BestFit",
			fleet: two(defaultNodes...), job: pods(10), policy: Policy{},
			status: StatusWaiting},
		// The resource flavor's node labels are the policy's labels.
		{upstream: "only nodes with matching labels are considered; no matching node; BestFit",
			fleet: labelled(three("b1/r1/x1:1"), map[string]string{"zone": "zone-a"}),
			job:   pods(1), policy: Policy{GroupLocality: LocalityNetworkGroup, Labels: map[string]string{"zone": "zone-b"}},
			status: StatusWaiting},
		{upstream: "only nodes with matching labels are considered; matching node is found; BestFit",
			fleet: labelled(three("b1/r1/x1:1"), map[string]string{"zone": "zone-a"}),
			job:   pods(1), policy: Policy{GroupLocality: LocalityNetworkGroup, Labels: map[string]string{"zone": "zone-a"}},
			want: map[string]int{"x1": 1}},
		{upstream: "only nodes with matching levels are considered; no host label on node; BestFit",
			fleet: []Worker{wk("x1", "-/-/-", "2.5.1", 8, 1)}, job: pods(1), policy: req(LocalityZone),
			status: StatusWaiting},
		// A non-TAS pod is a process gpulayer did not start holding GPUs:
		// 600m of a one-CPU host is 6 of a ten-GPU machine's GPUs.
		{upstream: "include usage from pending scheduled non-TAS pods, blocked assignment; BestFit",
			fleet: []Worker{busy("x1", 6)}, job: Job{Nodes: 1, GPUsPerNode: 6}, policy: req(LocalityNetworkGroup),
			status: StatusWaiting},
		{upstream: "include usage from running non-TAS pods, blocked assignment; BestFit",
			fleet: []Worker{busy("x1", 6)}, job: Job{Nodes: 1, GPUsPerNode: 6}, policy: req(LocalityNetworkGroup),
			status: StatusWaiting},
		{upstream: "include usage from running non-TAS pods, found free capacity on another node; BestFit",
			fleet: []Worker{busy("x1", 6), busy("x2", 0)}, job: Job{Nodes: 1, GPUsPerNode: 6}, policy: req(LocalityNetworkGroup),
			want: map[string]int{"x2": 1}},
		// A pod's node selector is the policy's labels too.
		{upstream: "skip node which doesn't match node selector, missing label; BestFit",
			fleet: labelled(three("b1/r1/x1:1"), map[string]string{"zone": "zone-a"}),
			job:   pods(1), policy: Policy{GroupLocality: LocalityNetworkGroup, Labels: map[string]string{"zone": "zone-a", "custom-label-1": "custom-value-1"}},
			status: StatusWaiting},
		{upstream: "skip node which doesn't match node selector, label exists, value doesn't match; BestFit",
			fleet: labelled(three("b1/r1/x1:1"), map[string]string{"zone": "zone-a", "custom-label-1": "value-1"}),
			job:   pods(1), policy: Policy{GroupLocality: LocalityNetworkGroup, Labels: map[string]string{"zone": "zone-a", "custom-label-1": "value-2"}},
			status: StatusWaiting},
		{upstream: "allow to schedule on node which matches node; BestFit",
			fleet: labelled(three("b1/r1/x1:1", "b1/r1/x2:1"),
				map[string]string{"zone": "zone-a", "custom-label-1": "value-1"},
				map[string]string{"zone": "zone-a", "custom-label-1": "value-2"}),
			job: pods(1), policy: Policy{GroupLocality: LocalityNetworkGroup, Labels: map[string]string{"zone": "zone-a", "custom-label-1": "value-2"}},
			want: map[string]int{"x2": 1}},
		{upstream: "block required for podset; host required for slices; BestFit",
			fleet: three("b1/r1/x1:3", "b1/r1/x2:3", "b1/r1/x3:3"), job: pods(6),
			policy: slices(LocalityRegion, 2, LocalityNetworkGroup),
			want:   map[string]int{"x1": 2, "x2": 2, "x3": 2}},
		{upstream: "block required for podset; host required for slices; prioritize more free slice capacity first and then tight fit; BestFit",
			fleet: three("b1/r1/x1:6", "b1/r1/x2:5", "b1/r1/x3:4", "b1/r1/x4:2"), job: pods(12),
			policy: slices(LocalityRegion, 2, LocalityNetworkGroup),
			want:   map[string]int{"x1": 6, "x3": 4, "x4": 2}},
		{upstream: "block required for podset; host required for slices; select domains with tight fit; BestFit",
			fleet: three("b1/r1/x1:3", "b1/r1/x2:2", "b1/r1/x3:2"), job: pods(4),
			policy: slices(LocalityRegion, 2, LocalityNetworkGroup),
			want:   map[string]int{"x2": 2, "x3": 2}},
		{upstream: "block required for podset; rack required for slices; BestFit",
			fleet: three("b1/r1/x1:1", "b1/r1/x2:1", "b1/r2/x3:1", "b1/r2/x4:1", "b1/r2/x5:1", "b2/r1/x6:1", "b2/r1/x7:1"), job: pods(4),
			policy: slices(LocalityRegion, 2, LocalityZone),
			want:   map[string]int{"x1": 1, "x2": 1, "x3": 1, "x4": 1}},
		{upstream: "block preferred for podset; rack required for slices; BestFit",
			fleet: three(defaultNodes...), job: pods(4),
			policy: slices(LocalityPrefer, 2, LocalityZone),
			want:   map[string]int{"x2": 1, "x3": 1, "x6": 2}},
		{upstream: "block required for podset; host required for slices; optimize last domain; BestFit",
			fleet: three("b1/r1/x1:4", "b1/r1/x2:3", "b1/r1/x3:2"), job: pods(6),
			policy: slices(LocalityRegion, 2, LocalityNetworkGroup),
			want:   map[string]int{"x1": 4, "x3": 2}},
		{upstream: "block required for podset; host required for slices; LeastFreeCapacity",
			fleet: three("b1/r1/x1:4", "b1/r1/x2:3", "b1/r1/x3:2"), job: pods(4),
			policy: slicesBinpack(LocalityRegion, 2, LocalityNetworkGroup),
			want:   map[string]int{"x1": 4}, kueue: map[string]int{"x2": 2, "x3": 2},
			why: "docs/placement.md, \"Inside a bucket: the fewest sub-groups\": x1 holds both slices, so the job stays in one network group where Kueue's LeastFreeCapacity packs the two hosts with the least free capacity"},
		{upstream: "block preferred for podset; host required for slices; LeastFreeCapacity",
			fleet: three("b1/r1/x1:4", "b1/r1/x2:3", "b1/r1/x3:2", "b2/r1/x4:4", "b2/r1/x5:2"), job: pods(8),
			policy: slicesBinpack(LocalityPrefer, 2, LocalityNetworkGroup),
			want:   map[string]int{"x1": 4, "x2": 2, "x3": 2}},
		{upstream: "block preferred for podset; host required for slices; 2 blocks with unbalanced subdomains; BestFit",
			fleet: three("b1/r1/x1:3", "b1/r1/x2:3", "b1/r1/x3:3", "b2/r1/x4:6"), job: pods(12),
			policy: slices(LocalityPrefer, 3, LocalityNetworkGroup),
			want:   map[string]int{"x1": 3, "x2": 3, "x4": 6}},
		{upstream: "block required for podset; rack required for slices; podset fits in a block, but slices do not fit in racks",
			fleet: three("b1/r1/x1:2", "b1/r2/x2:2", "b1/r3/x3:2"), job: pods(6),
			policy: slices(LocalityRegion, 3, LocalityZone),
			status: StatusWaiting},
		{upstream: "block required for podset; rack required for slices; only 1 out of 2 slices fit the topology",
			fleet: three("b1/r1/x1:3", "b1/r2/x2:1", "b1/r3/x3:1", "b1/r4/x4:1"), job: pods(6),
			policy: slices(LocalityRegion, 3, LocalityZone),
			status: StatusWaiting},
		{upstream: "block required for podset; rack required for slices; podset fits in both blocks, but slices fit in only one block",
			fleet: three("b1/r1/x1:2", "b1/r2/x2:2", "b1/r3/x3:2", "b2/r4/x4:3", "b2/r5/x5:3"), job: pods(6),
			policy: slices(LocalityRegion, 3, LocalityZone),
			want:   map[string]int{"x4": 3, "x5": 3}},
		{upstream: "slice required topology level cannot be above the main required topology level",
			fleet: three(defaultNodes...), job: pods(1),
			policy: slices(LocalityNetworkGroup, 1, LocalityRegion),
			status: StatusFailed},
		{upstream: "slice size is required when slice topology is requested",
			fleet: three(defaultNodes...), job: pods(1),
			policy: slices(LocalityRegion, 0, LocalityNetworkGroup),
			status: StatusFailed},
		{upstream: "cannot request not existing slice topology",
			fleet: three(defaultNodes...), job: pods(1),
			policy: slices(LocalityRegion, 1, "not-existing-topology-level"),
			status: StatusFailed},
		{upstream: "no topology for podset; host required for slices; BestFit",
			fleet: three("b1/r1/x1:3", "b1/r1/x2:3", "b1/r1/x3:3"), job: pods(6),
			policy: slices("", 2, LocalityNetworkGroup),
			want:   map[string]int{"x1": 2, "x2": 2, "x3": 2}},
		{upstream: "no topology for podset; host required for slices; multiple blocks; BestFit",
			fleet: three(scatteredNodes...), job: pods(6),
			policy: slices("", 2, LocalityNetworkGroup),
			want:   map[string]int{"x1": 4, "x4": 2}},
		{upstream: "no topology for podset; rack required for slices; multiple blocks; BestFit",
			fleet: three(defaultNodes...), job: pods(4),
			policy: slices("", 2, LocalityZone),
			want:   map[string]int{"x2": 1, "x3": 1, "x6": 2}},
	} {
		t.Run(tt.upstream, func(t *testing.T) {
			if tt.defect != "" {
				t.Skip("gpulayer defect: " + tt.defect)
			}
			if tt.kueue != nil {
				t.Logf("differs from Kueue by design: Kueue %v, gpulayer %v: %s", tt.kueue, tt.want, tt.why)
			}
			tt.job.Name = "j"
			d := Schedule(tt.job, tt.fleet, tt.policy)
			if tt.want == nil {
				if d.Status != tt.status {
					t.Errorf("%s, want %s", d.Summary, tt.status)
				}
				return
			}
			if got := kueueDomains(d); d.Status != StatusPlaced || !maps.Equal(got, tt.want) {
				t.Errorf("%v (%s), want %v", got, d.Summary, tt.want)
			}
		})
	}
}

// kueueFleet builds Kueue's fixtures with the given number of levels:
// each "block/rack/host:capacity" is a network group (host) of capacity
// machines in zone rack of region block, each machine with capacity of its
// 8 GPUs free (see the mapping above). With 2 levels the hosts' machines
// report no network group; with 1 a spec is "block:capacity" and its
// machines report only a region.
func kueueFleet(levels int) func(specs ...string) []Worker {
	return func(specs ...string) []Worker {
		var ws []Worker
		for _, s := range specs {
			path, c, _ := strings.Cut(s, ":")
			capacity, err := strconv.Atoi(c)
			if err != nil {
				panic(s)
			}
			p := strings.Split(path, "/")
			name := p[len(p)-1]
			where := path
			switch levels {
			case 2:
				where = p[0] + "/" + p[1] + "/-"
			case 1:
				where = p[0] + "/-/-"
			}
			for i := range capacity {
				ws = append(ws, wk(fmt.Sprintf("%s-%c", name, 'a'+i), where, "2.5.1", 8, capacity))
			}
		}
		return ws
	}
}

// kueueDomains counts a placement's nodes by Kueue's lowest level: the
// network group (host) where machines report one, else "region/zone"
// (block/rack), else the region (block).
func kueueDomains(d Decision) map[string]int {
	out := map[string]int{}
	for _, p := range d.Workers {
		switch l := p.Location; {
		case l.NetworkGroup != "":
			out[l.NetworkGroup]++
		case l.Zone != "":
			out[l.Region+"/"+l.Zone]++
		default:
			out[l.Region]++
		}
	}
	return out
}

package placement

import (
	"fmt"
	"slices"
)

// Policy values, spelled as in HCL (ADR-0021 §2–§3). This package does not
// import config; the values are the same strings.
const (
	LocalityPrefer       = "prefer" // default: tightest level available now, never wait for a tighter one
	LocalityNVLinkDomain = "nvlink_domain"
	LocalityNetworkGroup = "network_group"
	LocalityZone         = "zone"
	LocalityRegion       = "region"
	LocalityAny          = "any" // location ignored

	RankSpread         = "spread"    // default: fewest running tasks, then most free GPUs (fewest for a CPU-only job)
	RankFirstFit       = "first_fit" // worker ID order
	RankMostFreeMemory = "most_free_memory"
	RankBinpack        = "binpack" // fewest free GPUs that fit, then least free memory: keeps whole machines free

	UnschedulableWait = "wait" // default
	UnschedulableFail = "fail"

	BucketBestFit   = "best_fit"   // default: the bucket left with the fewest free workers
	BucketFirstFill = "first_fill" // ADR-0021 §3: the first bucket to fill in rank order

	// Properties every node of a group shares (Policy.Compatible).
	CompatTorch      = "torch"       // the torch version (ADR-0021's rule, and the default)
	CompatCUDADriver = "cuda_driver" // the NVIDIA driver version nvidia-smi reports
	CompatGPUModel   = "gpu_model"   // the GPUs' model name ("NVIDIA H100 80GB HBM3")
)

// compatProps are the properties Policy.Compatible may list, in the order
// buckets are keyed and explanations name them.
var compatProps = [...]string{CompatTorch, CompatCUDADriver, CompatGPUModel}

// Slice asks for a job's nodes in slices of Nodes, each slice within one
// group at Locality (Kueue's podset slices, Slurm's --segment): a job of
// 8 nodes in slices of 2 by network group is 4 pairs, each pair inside one
// network group, the whole job at the policy's group_locality.
type Slice struct {
	Nodes    int    `json:"nodes"`
	Locality string `json:"locality"` // nvlink_domain, network_group, zone or region (a level's name)
}

// Policy is how a job's group is chosen. Empty fields take the defaults.
type Policy struct {
	GroupLocality   string
	Rank            string
	OnUnschedulable string
	BucketChoice    string
	// Regions, when not empty, keeps workers whose region or zone is one of
	// them (ADR-0021 §5: policies written with zone names keep working).
	Regions []string
	// Labels every worker must carry with these exact values.
	Labels map[string]string
	// Compatible lists the properties every node of a group shares
	// (CompatTorch, CompatCUDADriver, CompatGPUModel); empty means
	// [CompatTorch], ADR-0021's rule.
	Compatible []string
	// Slice, when not nil, places the job's nodes in slices.
	Slice *Slice
}

// withDefaults fills the empty fields.
func (p Policy) withDefaults() Policy {
	if p.GroupLocality == "" {
		p.GroupLocality = LocalityPrefer
	}
	if p.Rank == "" {
		p.Rank = RankSpread
	}
	if p.OnUnschedulable == "" {
		p.OnUnschedulable = UnschedulableWait
	}
	if p.BucketChoice == "" {
		p.BucketChoice = BucketBestFit
	}
	if len(p.Compatible) == 0 {
		p.Compatible = defaultCompatible
	}
	return p
}

// defaultCompatible is ADR-0021's rule: one torch version per group.
var defaultCompatible = []string{CompatTorch}

// Validate reports the first field holding a value this package does not
// know. Empty fields are valid (they take the defaults).
func (p Policy) Validate() error {
	p = p.withDefaults()
	for i, value := range [...]string{p.GroupLocality, p.Rank, p.OnUnschedulable, p.BucketChoice} {
		if f := &policyFields[i]; !slices.Contains(f.allowed, value) {
			return fmt.Errorf("policy: unknown %s %q (want %s)", f.name, value, orList(f.allowed))
		}
	}
	for i, c := range p.Compatible {
		if !slices.Contains(compatProps[:], c) {
			return fmt.Errorf("policy: unknown compatible property %q (want %s)", c, orList(compatProps[:]))
		}
		if slices.Contains(p.Compatible[:i], c) {
			return fmt.Errorf("policy: compatible lists %q twice", c)
		}
	}
	if p.Slice != nil {
		if _, err := p.sliceLevel(); err != nil {
			return err
		}
	}
	return nil
}

// sliceLevel is the level of the policy's slices, checked: a level with
// values (not any), no looser than a required group_locality (a slice is
// part of the group, so it cannot spread wider than the group does), and
// slices of at least one node. Under prefer every level is allowed: at
// the levels tighter than the slice's the group holds its slices whole.
func (p Policy) sliceLevel() (Level, error) {
	sl := p.Slice
	if sl.Nodes < 1 {
		return 0, fmt.Errorf("policy: slices of %d nodes; a slice has at least 1", sl.Nodes)
	}
	l, ok := levelNamed(sl.Locality)
	if !ok || l == LevelAny {
		return 0, fmt.Errorf("policy: unknown slice locality %q (want %s)", sl.Locality, orList(sliceLocalities()))
	}
	if g, ok := levelNamed(p.withDefaults().GroupLocality); ok && l > g {
		return 0, fmt.Errorf("policy: slice locality %s is looser than group_locality %s; a slice is within the group", l, g)
	}
	return l, nil
}

// sliceLocalities are the names a slice's locality takes: every level
// with values, tightest first.
func sliceLocalities() []string {
	var out []string
	for l := Level(0); l < LevelAny; l++ {
		out = append(out, l.String())
	}
	return out
}

// policyFields are the fields Validate checks, in its order, with the
// values each takes: a package-level table, so that validating (once per
// Schedule) allocates nothing.
var policyFields = [...]struct {
	name    string
	allowed []string
}{
	{"group_locality", []string{LocalityPrefer, LocalityNVLinkDomain, LocalityNetworkGroup, LocalityZone, LocalityRegion, LocalityAny}},
	{"rank", []string{RankSpread, RankFirstFit, RankMostFreeMemory, RankBinpack}},
	{"on_unschedulable", []string{UnschedulableWait, UnschedulableFail}},
	{"bucket_choice", []string{BucketBestFit, BucketFirstFill}},
}

// orList writes "a, b or c".
func orList(xs []string) string {
	s := ""
	for i, x := range xs {
		switch {
		case i == 0:
		case i == len(xs)-1:
			s += " or "
		default:
			s += ", "
		}
		s += x
	}
	return s
}

// levels are the levels a policy tries, tightest first; the last is
// required when the policy names one (a job waits or fails rather than go
// looser). Schedule leaves prefer's nvlink_domain out where it cannot
// matter (preferLevels).
func (p Policy) levels() []Level {
	switch p.GroupLocality {
	case LocalityNVLinkDomain:
		return []Level{LevelNVLinkDomain}
	case LocalityNetworkGroup:
		return []Level{LevelNetworkGroup}
	case LocalityZone:
		return []Level{LevelZone}
	case LocalityRegion:
		return []Level{LevelRegion}
	case LocalityAny:
		return []Level{LevelAny}
	}
	return preferLevels[:]
}

// preferLevels are the levels prefer tries; preferLevels[1:] without
// NVLink domains.
var preferLevels = [...]Level{LevelNVLinkDomain, LevelNetworkGroup, LevelZone, LevelRegion, LevelAny}

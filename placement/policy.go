package placement

import (
	"fmt"
	"slices"
)

// Policy values, spelled as in HCL (ADR-0021 §2–§3). This package does not
// import config; the values are the same strings.
const (
	LocalityPrefer       = "prefer" // default: tightest level available now, never wait for a tighter one
	LocalityNetworkGroup = "network_group"
	LocalityZone         = "zone"
	LocalityRegion       = "region"
	LocalityAny          = "any" // location ignored

	RankSpread         = "spread"    // default: fewest running tasks, then most free GPUs (fewest for a CPU-only job)
	RankFirstFit       = "first_fit" // worker ID order
	RankMostFreeMemory = "most_free_memory"

	UnschedulableWait = "wait" // default
	UnschedulableFail = "fail"

	BucketBestFit   = "best_fit"   // default: the bucket left with the fewest free workers
	BucketFirstFill = "first_fill" // ADR-0021 §3: the first bucket to fill in rank order
)

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
	return p
}

// Validate reports the first field holding a value this package does not
// know. Empty fields are valid (they take the defaults).
func (p Policy) Validate() error {
	p = p.withDefaults()
	for i, value := range [...]string{p.GroupLocality, p.Rank, p.OnUnschedulable, p.BucketChoice} {
		if f := &policyFields[i]; !slices.Contains(f.allowed, value) {
			return fmt.Errorf("policy: unknown %s %q (want %s)", f.name, value, orList(f.allowed))
		}
	}
	return nil
}

// policyFields are the fields Validate checks, in its order, with the
// values each takes: a package-level table, so that validating (once per
// Schedule) allocates nothing.
var policyFields = [...]struct {
	name    string
	allowed []string
}{
	{"group_locality", []string{LocalityPrefer, LocalityNetworkGroup, LocalityZone, LocalityRegion, LocalityAny}},
	{"rank", []string{RankSpread, RankFirstFit, RankMostFreeMemory}},
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

// levels are the levels a policy tries, tightest first, and whether the
// loosest of them is required (a job waits or fails rather than go looser).
func (p Policy) levels() []Level {
	switch p.GroupLocality {
	case LocalityNetworkGroup:
		return []Level{LevelNetworkGroup}
	case LocalityZone:
		return []Level{LevelZone}
	case LocalityRegion:
		return []Level{LevelRegion}
	case LocalityAny:
		return []Level{LevelAny}
	}
	return []Level{LevelNetworkGroup, LevelZone, LevelRegion, LevelAny}
}

package placement

import (
	"fmt"
	"strconv"
	"strings"
)

// Status is what became of a job.
type Status string

const (
	StatusPlaced  Status = "placed"
	StatusWaiting Status = "waiting" // retried when workers free up
	StatusFailed  Status = "failed"  // never placeable under its policy, or invalid input
)

// Decision is Schedule's answer for one job: the group, the level it shares,
// a one-line summary in ADR-0021's words, and the explanation built while
// deciding. It marshals to stable JSON: the same inputs give the same bytes.
type Decision struct {
	Job     string `json:"job"`
	Status  Status `json:"status"`
	Summary string `json:"summary"`
	// Level is the level the group shares when placed; otherwise the loosest
	// level tried.
	Level Level `json:"level"`
	// Location and TorchVersion are the chosen bucket's; for a job that is
	// not placed, the best bucket's (the one closest to filling).
	Location     Location `json:"location"`
	TorchVersion string   `json:"torch_version"`
	// Unschedulable says no bucket could hold the job even with every
	// compatible worker idle: waiting will not help.
	Unschedulable bool `json:"unschedulable"`
	// Workers are the chosen machines in node-rank order; empty unless
	// placed.
	Workers     []Placement `json:"workers"`
	Explanation Explanation `json:"explanation"`
}

// Placement is one machine of a placed group.
type Placement struct {
	NodeRank int    `json:"node_rank"`
	Worker   string `json:"worker"`
	GPUs     []int  `json:"gpus"`
	// Bottleneck is the slowest link between the chosen GPUs ("NV12",
	// "SYS"); empty for one GPU or without link data.
	Bottleneck      string   `json:"bottleneck,omitempty"`
	Location        Location `json:"location"`
	LocationTrusted bool     `json:"location_trusted"`
}

// Reason is why workers were left out.
type Reason string

// Reasons, in the order a worker is checked; each worker counts once, under
// the first that applies.
const (
	ReasonLabel          Reason = "label"             // misses a label the policy selects on
	ReasonRegion         Reason = "region"            // neither its region nor its zone is in policy regions
	ReasonNoTorchrun     Reason = "no_torchrun"       // a torchrun job, and the machine has no torchrun
	ReasonTooFewGPUs     Reason = "too_few_gpus"      // has fewer GPUs than gpus_per_node even when idle
	ReasonBusy           Reason = "busy"              // no free GPU now
	ReasonTooFewFreeGPUs Reason = "too_few_free_gpus" // some GPUs free, fewer than gpus_per_node
	// Per level:
	ReasonNoValue      Reason = "no_value_at_level" // reports nothing at this level (compatible workers)
	ReasonTorchVersion Reason = "torch_version"     // free, same location as the chosen (or best) bucket, other torch version
)

// Exclusion counts the workers left out for one reason.
type Exclusion struct {
	Reason  Reason `json:"reason"`
	Workers int    `json:"workers"`
}

// Explanation is how Schedule decided, recorded as it went.
type Explanation struct {
	Workers int `json:"workers"` // workers considered
	Needed  int `json:"needed"`  // nodes the job needs
	// Excluded are the reasons that hold at every level, in check order;
	// only reasons with workers appear.
	Excluded []Exclusion `json:"excluded"`
	// Levels are the levels tried, tightest first.
	Levels []LevelExplanation `json:"levels"`
}

// LevelExplanation is one level tried: its buckets and who was left out.
type LevelExplanation struct {
	Level    Level               `json:"level"`
	Excluded []Exclusion         `json:"excluded"`
	Buckets  []BucketExplanation `json:"buckets"`
}

// BucketExplanation is one candidate group at a level: the workers sharing a
// torch version and a location.
type BucketExplanation struct {
	TorchVersion string   `json:"torch_version"`
	Location     Location `json:"location"`
	Eligible     int      `json:"eligible"` // compatible workers, free or not
	Free         int      `json:"free"`     // of them, free now
	Needed       int      `json:"needed"`
	// Choice is "placed" on the bucket the job went to, "best" on the one
	// closest to filling when it went nowhere; empty otherwise.
	Choice string `json:"choice,omitempty"`
	// Groups is, on the chosen bucket, how many groups of each tighter level
	// the placement used, tightest last ("zones": 2, "network_groups": 3).
	Groups []GroupCount `json:"groups,omitempty"`
}

// GroupCount is how many groups of one level a placement spans.
type GroupCount struct {
	Level  Level `json:"level"`
	Groups int   `json:"groups"`
}

// summaryIDs is how many worker IDs a summary lists before "+N more".
const summaryIDs = 16

func torchWords(v string) string {
	if v == "" {
		return "torch unknown"
	}
	return "torch " + v
}

// placedSummary writes "placed on worker group [a1 a2 a3] (same zone
// europe-west1-b, torch 2.5.1)".
func placedSummary(d *Decision, spans []GroupCount) string {
	var b strings.Builder
	b.Grow(96 + 12*min(len(d.Workers), summaryIDs))
	b.WriteString("placed on worker group [")
	for i, p := range d.Workers {
		if i == summaryIDs {
			fmt.Fprintf(&b, " +%d more", len(d.Workers)-i)
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(p.Worker)
	}
	b.WriteString("] (")
	switch d.Level {
	case LevelAny:
		b.WriteString(spanWords(spans, "any location"))
	default:
		fmt.Fprintf(&b, "same %s %s", d.Level.words(), d.Location.At(d.Level))
		if s := spanWords(spans, ""); s != "" {
			b.WriteString(" across " + s)
		}
	}
	b.WriteString(", " + torchWords(d.TorchVersion) + ")")
	return b.String()
}

// spanWords writes the groups spanned when more than one: "2 regions, 3
// zones"; empty (or none) when the group shares every level below its own.
func spanWords(spans []GroupCount, none string) string {
	var parts []string
	for _, g := range spans {
		if g.Groups > 1 {
			parts = append(parts, strconv.Itoa(g.Groups)+" "+plural(g.Level))
		}
	}
	if len(parts) == 0 {
		return none
	}
	return strings.Join(parts, ", ")
}

func plural(l Level) string {
	switch l {
	case LevelNetworkGroup:
		return "network groups"
	case LevelZone:
		return "zones"
	case LevelRegion:
		return "regions"
	}
	return "groups"
}

// unplacedSummary writes "waiting: no zone has 4 free workers with torch
// 2.5.1 (best: europe-west1-b with 3 of 4)", or the failed form when no
// bucket could ever hold the job. eligible counts the workers that passed
// the policy's labels and regions and have enough GPUs.
func unplacedSummary(d *Decision, level Level, nodes int, best *BucketExplanation, torchVersions, eligible int) string {
	var b strings.Builder
	b.WriteString(string(d.Status) + ": ")
	switch {
	case best == nil && (level == LevelAny || eligible == 0):
		b.WriteString("no worker is eligible")
	case best == nil:
		fmt.Fprintf(&b, "no eligible worker reports a %s", level.words())
	default:
		free, have := "free ", best.Free
		if d.Unschedulable {
			free, have = "", best.Eligible
		}
		torch := torchWords(best.TorchVersion)
		if torchVersions > 1 {
			torch = "one torch version"
		}
		switch {
		case level != LevelAny:
			fmt.Fprintf(&b, "no %s has %s with %s", level.words(), workers(nodes, free), torch)
		case nodes == 1:
			fmt.Fprintf(&b, "no %sworker with %s", free, torch)
		default:
			fmt.Fprintf(&b, "fewer than %s share %s", workers(nodes, free), torch)
		}
		if d.Unschedulable {
			b.WriteString(", even with every worker idle")
		}
		where := best.Location.At(level)
		if level == LevelAny {
			where = torchWords(best.TorchVersion)
		}
		fmt.Fprintf(&b, " (best: %s with %d of %d", where, have, nodes)
		if torchVersions > 1 && level != LevelAny {
			b.WriteString(", " + torchWords(best.TorchVersion))
		}
		b.WriteString(")")
	}
	if d.Unschedulable && d.Status == StatusWaiting {
		b.WriteString(`; on_unschedulable = "wait" keeps it waiting`)
	}
	return b.String()
}

// workers writes "4 free workers", "1 free worker".
func workers(n int, adjective string) string {
	if n == 1 {
		return "1 " + adjective + "worker"
	}
	return strconv.Itoa(n) + " " + adjective + "workers"
}

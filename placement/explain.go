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
	// Location and the compatibility properties (TorchVersion, and
	// CUDADriver and GPUModel when the policy lists them) are the chosen
	// bucket's; for a job that is not placed, the best bucket's (the one
	// closest to filling). A property the policy does not list is "".
	Location     Location `json:"location"`
	TorchVersion string   `json:"torch_version"`
	CUDADriver   string   `json:"cuda_driver,omitempty"`
	GPUModel     string   `json:"gpu_model,omitempty"`
	// Slice is the policy's slices, when it has them: node ranks
	// k·nodes to (k+1)·nodes-1 are slice k, inside one group at its
	// locality.
	Slice *Slice `json:"slice,omitempty"`
	// Unschedulable says no bucket could hold the job even with every
	// compatible worker idle: waiting will not help.
	Unschedulable bool `json:"unschedulable"`
	// Workers are the chosen machines in node-rank order; empty unless
	// placed.
	Workers     []Placement `json:"workers"`
	Explanation Explanation `json:"explanation"`
}

// Placement is one machine of a placed group. Node ranks follow the
// topology tree: the machines of one network group (zone, region) have
// consecutive ranks, groups in location order.
type Placement struct {
	NodeRank int    `json:"node_rank"`
	Worker   string `json:"worker"`
	// GPUs are in local-rank order, as CUDA_VISIBLE_DEVICES lists them:
	// neighbours share the fastest links (topology.OrderLocalRanks).
	GPUs []int `json:"gpus"`
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
	ReasonLabel          Reason = "label"                   // misses a label the policy selects on
	ReasonRegion         Reason = "region"                  // neither its region nor its zone is in policy regions
	ReasonNoTorchrun     Reason = "no_torchrun"             // a torchrun job, and the machine has no torchrun
	ReasonTooFewGPUs     Reason = "too_few_gpus"            // has fewer GPUs than gpus_per_node even when idle
	ReasonNoSliceValue   Reason = "no_value_at_slice_level" // the policy has slices, and the worker reports nothing at their level
	ReasonBusy           Reason = "busy"                    // no free GPU now
	ReasonTooFewFreeGPUs Reason = "too_few_free_gpus"       // some GPUs free, fewer than gpus_per_node
	// Per level:
	ReasonNoValue      Reason = "no_value_at_level" // reports nothing at this level (compatible workers)
	ReasonTorchVersion Reason = "torch_version"     // free, same location as the chosen (or best) bucket, other torch version
	ReasonCUDADriver   Reason = "cuda_driver"       // the same, same torch version (or not keyed), other CUDA driver
	ReasonGPUModel     Reason = "gpu_model"         // the same, same torch and driver, other GPU model
)

// compatReasons name, for each of compatProps, the workers it split off.
var compatReasons = [len(compatProps)]Reason{ReasonTorchVersion, ReasonCUDADriver, ReasonGPUModel}

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

// BucketExplanation is one candidate group at a level: the workers sharing
// the compatible properties (a torch version, by default) and a location.
type BucketExplanation struct {
	TorchVersion string   `json:"torch_version"`
	CUDADriver   string   `json:"cuda_driver,omitempty"`
	GPUModel     string   `json:"gpu_model,omitempty"`
	Location     Location `json:"location"`
	Eligible     int      `json:"eligible"` // compatible workers, free or not
	Free         int      `json:"free"`     // of them, free now
	Needed       int      `json:"needed"`
	// Slices counts, when the policy has slices, the whole slices the
	// bucket's free and eligible workers make.
	Slices *SliceCount `json:"slices,omitempty"`
	// Choice is "placed" on the bucket the job went to, "best" on the one
	// closest to filling when it went nowhere; empty otherwise.
	Choice string `json:"choice,omitempty"`
	// Groups is, on the chosen bucket, how many groups of each tighter level
	// the placement used, tightest last ("zones": 2, "network_groups": 3).
	Groups []GroupCount `json:"groups,omitempty"`
}

// SliceCount is how many whole slices of Size nodes a bucket holds: in
// each of its groups at the slices' level, that group's workers divided
// by Size, rounded down.
type SliceCount struct {
	Size     int `json:"size"`
	Free     int `json:"free"`
	Eligible int `json:"eligible"`
}

// compat is the bucket's value of the i-th of compatProps.
func (b *BucketExplanation) compat(i int) string {
	switch i {
	case 0:
		return b.TorchVersion
	case 1:
		return b.CUDADriver
	}
	return b.GPUModel
}

func (b *BucketExplanation) sameKey(o *BucketExplanation) bool {
	return b.TorchVersion == o.TorchVersion && b.CUDADriver == o.CUDADriver && b.GPUModel == o.GPUModel
}

// GroupCount is how many groups of one level a placement spans.
type GroupCount struct {
	Level  Level `json:"level"`
	Groups int   `json:"groups"`
}

// summaryIDs is how many worker IDs a summary lists before "+N more".
const summaryIDs = 16

// compatNames are compatProps in sentences.
var compatNames = [len(compatProps)]string{"torch version", "CUDA driver", "GPU model"}

// compatWords writes the keyed properties' values: "torch 2.5.1", "torch
// 2.5.1, CUDA driver 550.54.15, GPU NVIDIA H100 80GB HBM3"; "unknown" for a
// worker that reports none.
func compatWords(keys keyMask, torch, driver, model string) string {
	var b strings.Builder
	writeCompat(&b, keys, torch, driver, model)
	return b.String()
}

// writeCompat is compatWords into b, without the parts' strings.
func writeCompat(b *strings.Builder, keys keyMask, torch, driver, model string) {
	first := true
	for i, v := range [len(compatProps)]string{torch, driver, model} {
		if keys&(1<<i) == 0 {
			continue
		}
		if v == "" {
			v = "unknown"
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		b.WriteString([...]string{"torch ", "CUDA driver ", "GPU "}[i])
		b.WriteString(v)
	}
}

// oneOfWords writes "one torch version" or "one torch version and CUDA
// driver": what the workers of a group must share, when buckets differ.
func oneOfWords(keys keyMask) string {
	var names []string
	for i, n := range compatNames {
		if keys&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return "one " + andList(names)
}

// andList writes "a, b and c".
func andList(xs []string) string {
	if len(xs) <= 1 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

// sliceWords writes "in slices of 2 per network group".
func sliceWords(sl *Slice) string {
	var b strings.Builder
	writeSlice(&b, sl)
	return b.String()
}

// writeSlice is sliceWords into b.
func writeSlice(b *strings.Builder, sl *Slice) {
	l, _ := levelNamed(sl.Locality)
	b.WriteString("in slices of ")
	b.WriteString(strconv.Itoa(sl.Nodes))
	b.WriteString(" per ")
	b.WriteString(l.words())
}

// placedSummary writes "placed on worker group [a1 a2 a3] (same zone
// europe-west1-b, torch 2.5.1)".
func placedSummary(d *Decision, spans []GroupCount, keys keyMask) string {
	// Written straight into one buffer, sized for the usual summary: a
	// placed call's summary was a tenth of its allocations, in
	// intermediate strings.
	var b strings.Builder
	b.Grow(128 + 12*min(len(d.Workers), summaryIDs) + len(d.Location.Zone) + len(d.Location.NetworkGroup) +
		len(d.TorchVersion) + len(d.CUDADriver) + len(d.GPUModel))
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
		if !writeSpans(&b, spans) {
			b.WriteString("any location")
		}
	default:
		b.WriteString("same ")
		b.WriteString(d.Level.words())
		b.WriteByte(' ')
		b.WriteString(d.Location.words(d.Level))
		if spansMany(spans) {
			b.WriteString(" across ")
			writeSpans(&b, spans)
		}
	}
	if d.Slice != nil {
		b.WriteString(", ")
		writeSlice(&b, d.Slice)
	}
	b.WriteString(", ")
	writeCompat(&b, keys, d.TorchVersion, d.CUDADriver, d.GPUModel)
	b.WriteByte(')')
	return b.String()
}

// spansMany reports whether spans has a level with more than one group,
// so that writeSpans writes something.
func spansMany(spans []GroupCount) bool {
	for _, g := range spans {
		if g.Groups > 1 {
			return true
		}
	}
	return false
}

// writeSpans writes the groups spanned when more than one: "2 regions, 3
// zones"; nothing (and false) when the group shares every level below
// its own.
func writeSpans(b *strings.Builder, spans []GroupCount) bool {
	wrote := false
	for _, g := range spans {
		if g.Groups > 1 {
			if wrote {
				b.WriteString(", ")
			}
			wrote = true
			b.WriteString(strconv.Itoa(g.Groups))
			b.WriteByte(' ')
			b.WriteString(plural(g.Level))
		}
	}
	return wrote
}

func plural(l Level) string {
	switch l {
	case LevelNVLinkDomain:
		return "NVLink domains"
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
// the policy's labels and regions and have enough GPUs; distinct, the
// compatibility keys among the level's buckets.
func unplacedSummary(d *Decision, level Level, nodes int, best *BucketExplanation, distinct, eligible int, keys keyMask) string {
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
		if sc := best.Slices; sc != nil {
			have = sc.Free * sc.Size
			if d.Unschedulable {
				have = sc.Eligible * sc.Size
			}
		}
		with := compatWords(keys, best.TorchVersion, best.CUDADriver, best.GPUModel)
		if distinct > 1 {
			with = oneOfWords(keys)
		}
		sliced := ""
		if d.Slice != nil {
			sliced = " " + sliceWords(d.Slice)
		}
		switch {
		case level != LevelAny:
			fmt.Fprintf(&b, "no %s has %s%s with %s", level.words(), workers(nodes, free), sliced, with)
		case nodes == 1:
			fmt.Fprintf(&b, "no %sworker with %s", free, with)
		default:
			fmt.Fprintf(&b, "fewer than %s%s share %s", workers(nodes, free), sliced, with)
		}
		if d.Unschedulable {
			b.WriteString(", even with every worker idle")
		}
		where := best.Location.words(level)
		if level == LevelAny {
			where = compatWords(keys, best.TorchVersion, best.CUDADriver, best.GPUModel)
		}
		fmt.Fprintf(&b, " (best: %s with %d of %d", where, have, nodes)
		if distinct > 1 && level != LevelAny {
			b.WriteString(", " + compatWords(keys, best.TorchVersion, best.CUDADriver, best.GPUModel))
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

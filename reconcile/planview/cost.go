package planview

import (
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/placement"
	"github.com/gpulayer/gpulayer/reconcile"
)

// The words of a placement's cost (reconcile.Cost), shared by the text
// and markdown views. Host names, fleet names and GPU models come from
// files and machines: callers clean the result (clean, mdText).

// betweenWords name the link between machines by the tightest level they
// share.
var betweenWords = map[placement.Level]string{
	placement.LevelNVLinkDomain: "inside one NVLink domain",
	placement.LevelNetworkGroup: "inside one network group",
	placement.LevelZone:         "inside one zone",
	placement.LevelRegion:       "between zones",
	placement.LevelAny:          "between regions",
}

// levelWords name a level in a sentence.
var levelWords = map[placement.Level]string{
	placement.LevelNVLinkDomain: "NVLink domain",
	placement.LevelNetworkGroup: "network group",
	placement.LevelZone:         "zone",
	placement.LevelRegion:       "region",
}

// incompatWords name the property that keeps free machines out of a group.
var incompatWords = map[placement.Reason]string{
	placement.ReasonTorchVersion: "torch version",
	placement.ReasonCUDADriver:   "CUDA driver",
	placement.ReasonGPUModel:     "GPU model",
}

// costWords writes "est. slowest link: between zones (~100 Gb/s); inside
// nodes NV12 (~300 GB/s, NVLink3)", the slower part first; "est. links:"
// when which is slower is not known. "" without either part.
func costWords(c *reconcile.Cost) string {
	if c == nil || c.Inside == nil && c.Between == nil {
		return ""
	}
	var parts []string
	if b := c.Between; b != nil {
		s := betweenWords[b.Level] + " (~" + b.Bandwidth.String()
		if b.Fleet != "" {
			s += ", fleet " + strconv.Quote(b.Fleet)
		}
		parts = append(parts, s+")")
	}
	if in := c.Inside; in != nil {
		s := "inside nodes " + in.Link
		if in.Bandwidth != nil {
			s += " (~" + in.Bandwidth.String() + ", " + in.Over + ")"
		} else {
			s += " (bandwidth unknown: GPU generation unknown)"
		}
		if c.Slowest == "inside_nodes" {
			parts = append([]string{s}, parts...)
		} else {
			parts = append(parts, s)
		}
	}
	lead := "est. slowest link: "
	if len(parts) > 1 && c.Slowest == "" {
		lead = "est. links: "
	}
	return lead + strings.Join(parts, "; ")
}

// rejectedWords writes "network group rack-3: 2 of 3 machines free; job
// "eval" holds gpu-07".
func rejectedWords(r reconcile.RejectedOption) string {
	var b strings.Builder
	where := r.Location.At(r.Level)
	if r.Level == placement.LevelNVLinkDomain {
		where = placement.DomainName(where)
	}
	b.WriteString(levelWords[r.Level] + " " + where + ": ")
	b.WriteString(strconv.Itoa(r.Free) + " of " + strconv.Itoa(r.Needed) + " machines free")
	if r.Eligible < r.Needed {
		b.WriteString(", " + strconv.Itoa(r.Eligible) + " eligible even when idle")
	}
	for _, x := range r.Incompatible {
		b.WriteString("; " + strconv.Itoa(x.Workers) + " more free with another " + incompatWords[x.Reason])
	}
	for _, h := range r.HeldBy {
		hosts := strings.Join(h.Hosts, ", ")
		if h.More > 0 {
			hosts += " +" + strconv.Itoa(h.More) + " more"
		}
		switch h.Kind {
		case reconcile.HolderJob:
			b.WriteString("; job " + strconv.Quote(h.Job) + " holds " + hosts)
		case reconcile.HolderOtherState:
			b.WriteString("; another configuration's job holds GPUs of " + hosts)
		case reconcile.HolderProcesses:
			b.WriteString("; processes gpulayer did not start use GPUs of " + hosts)
		}
	}
	return b.String()
}

package config

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Bandwidth is a link's speed in one direction, as a fleet's
// link_bandwidth block writes it ("100Gbps", "900GB/s"): a number of bits
// or bytes per second. It keeps the unit it was written in, so that a plan
// says it back the same way.
type Bandwidth struct {
	BitsPerSecond float64 `json:"bits_per_second"`
	// Unit is how the value was written, canonically spelled: "Mb/s",
	// "Gb/s", "Tb/s", "MB/s", "GB/s" or "TB/s".
	Unit string `json:"unit"`
}

// bandwidthUnits are the units ParseBandwidth accepts, with their
// canonical spelling and bits per second. b is bits, B bytes: the case
// matters, so it is never folded.
var bandwidthUnits = map[string]struct {
	canon string
	bits  float64
}{
	"Mbps": {"Mb/s", 1e6}, "Mb/s": {"Mb/s", 1e6},
	"Gbps": {"Gb/s", 1e9}, "Gb/s": {"Gb/s", 1e9},
	"Tbps": {"Tb/s", 1e12}, "Tb/s": {"Tb/s", 1e12},
	"MB/s": {"MB/s", 8e6}, "GB/s": {"GB/s", 8e9}, "TB/s": {"TB/s", 8e12},
}

var bandwidthSyntax = regexp.MustCompile(`^([0-9]{1,9}(?:\.[0-9]{1,6})?) ?([MGT]b(?:ps|/s)|[MGT]B/s)$`)

// ParseBandwidth reads "100Gbps", "100 Gb/s", "900GB/s", "1.6Tbps": a
// positive decimal number and one of Mbps, Gbps, Tbps (or Mb/s, Gb/s,
// Tb/s) for bits, MB/s, GB/s, TB/s for bytes per second. Nothing else: no
// other spellings, no exponents, no bare number (whose unit a reader would
// have to guess).
func ParseBandwidth(s string) (Bandwidth, error) {
	m := bandwidthSyntax.FindStringSubmatch(s)
	if m == nil {
		return Bandwidth{}, fmt.Errorf("%q is not a bandwidth: write a number and a unit, Gbps (or Mbps, Tbps) for bits, GB/s (or MB/s, TB/s) for bytes per second, such as \"100Gbps\" or \"900GB/s\"", clipText(s))
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil || n <= 0 || math.IsInf(n, 0) {
		return Bandwidth{}, fmt.Errorf("%q is not a bandwidth: the number must be more than 0", clipText(s))
	}
	u := bandwidthUnits[m[2]]
	return Bandwidth{BitsPerSecond: n * u.bits, Unit: u.canon}, nil
}

// String writes the bandwidth in its unit with at most three significant
// figures beyond the integer part: "100 Gb/s", "900 GB/s", "1.6 Tb/s".
func (b Bandwidth) String() string {
	u, ok := bandwidthUnits[b.Unit]
	if !ok || b.BitsPerSecond <= 0 {
		return "unknown"
	}
	return strconv.FormatFloat(b.BitsPerSecond/u.bits, 'f', -1, 64) + " " + b.Unit
}

// clipText cuts a value quoted back in a diagnostic to 40 bytes.
func clipText(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// LinkBandwidthLevels are the keys of a link_bandwidth block: the tightest
// locality level two machines share, from the NVLink domain to none
// ("any": machines in different regions).
var LinkBandwidthLevels = []string{LocalityNVLinkDomain, LocalityNetworkGroup, LocalityZone, LocalityRegion, LocalityAny}

// LinkBandwidth is a fleet's link_bandwidth block: the bandwidth of the
// link between two machines by the tightest level they share, overriding
// the documented defaults (docs/plan.md) in the plan's estimate of a
// placement's slowest link. Levels the block leaves out keep the default.
type LinkBandwidth struct {
	ByLevel   map[string]Bandwidth
	DeclRange hcl.Range
}

var linkBandwidthSchema = func() *hcl.BodySchema {
	s := &hcl.BodySchema{}
	for _, l := range LinkBandwidthLevels {
		s.Attributes = append(s.Attributes, hcl.AttributeSchema{Name: l})
	}
	return s
}()

// linkBandwidth decodes a fleet's link_bandwidth blocks (at most one).
func (l *loader) linkBandwidth(d *decoder, blocks hcl.Blocks) *LinkBandwidth {
	var out *LinkBandwidth
	for i, b := range blocks {
		if i > 0 {
			d.add(duplicateBlock("fleet", "link_bandwidth", blocks[0].DefRange, b))
			continue
		}
		content, diags := b.Body.Content(linkBandwidthSchema)
		l.add(diags...)
		out = &LinkBandwidth{ByLevel: map[string]Bandwidth{}, DeclRange: b.DefRange}
		for _, level := range LinkBandwidthLevels {
			var s string
			if !d.str(content.Attributes, level, &s) {
				continue
			}
			bw, err := ParseBandwidth(strings.TrimSpace(s))
			if err != nil {
				d.add(&hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid bandwidth",
					Detail:   fmt.Sprintf("link_bandwidth %s: %v.", level, err),
					Subject:  content.Attributes[level].Expr.Range().Ptr(),
				})
				continue
			}
			out.ByLevel[level] = bw
		}
	}
	return out
}

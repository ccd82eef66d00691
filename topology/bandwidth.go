package topology

import "strings"

// Generation is what a GPU model's links are made of: its NVLink
// generation and the PCIe generation of its host interface, with their
// bandwidth in one direction (docs/topology.md gives the sources).
type Generation struct {
	// NVLink names the NVLink generation ("NVLink3"); "" when the model
	// has none or it is not known.
	NVLink string
	// NVLinkGBps is one NVLink's bandwidth in one direction, in GB/s.
	NVLinkGBps float64
	// PCIe names the host interface ("PCIe gen4"); "" when not known.
	PCIe string
	// PCIeGBps is a x16 slot's bandwidth in one direction, in GB/s.
	PCIeGBps float64
}

// Per-direction bandwidth of one link of each NVLink generation and of a
// PCIe x16 slot of each generation, in GB/s.
const (
	nvlink1GBps = 20 // P100: 4 links, 160 GB/s both ways
	nvlink2GBps = 25 // V100: 6 links, 300 GB/s both ways
	nvlink3GBps = 25 // A100: 12 links, 600 GB/s both ways
	nvlink4GBps = 25 // H100, H200: 18 links, 900 GB/s both ways
	nvlink5GBps = 50 // B200, GB200: 18 links, 1.8 TB/s both ways
	pcie3GBps   = 16 // 8 GT/s x16, 15.75 GB/s after 128b/130b
	pcie4GBps   = 32 // 16 GT/s x16, 31.5 GB/s
	pcie5GBps   = 64 // 32 GT/s x16, 63 GB/s
)

// generations maps a marker in the GPU's name, as nvidia-smi prints it
// ("NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-32GB"), to its generation;
// the first that matches wins, so longer markers come before their
// prefixes (GB200 before B200, H200 before H20). Names are matched as
// whole words or word prefixes (see modelHas).
var generations = []struct {
	marker string
	gen    Generation
}{
	// Blackwell's host interface is left unknown: sources disagree on
	// gen5 or gen6 (docs/topology.md).
	{"GB200", Generation{NVLink: "NVLink5", NVLinkGBps: nvlink5GBps}},
	{"B200", Generation{NVLink: "NVLink5", NVLinkGBps: nvlink5GBps}},
	{"GH200", Generation{"NVLink4", nvlink4GBps, "PCIe gen5", pcie5GBps}},
	{"H200", Generation{"NVLink4", nvlink4GBps, "PCIe gen5", pcie5GBps}},
	{"H100", Generation{"NVLink4", nvlink4GBps, "PCIe gen5", pcie5GBps}},
	{"H800", Generation{"NVLink4", nvlink4GBps, "PCIe gen5", pcie5GBps}},
	{"A100", Generation{"NVLink3", nvlink3GBps, "PCIe gen4", pcie4GBps}},
	{"A800", Generation{"NVLink3", nvlink3GBps, "PCIe gen4", pcie4GBps}},
	{"V100", Generation{"NVLink2", nvlink2GBps, "PCIe gen3", pcie3GBps}},
	{"P100", Generation{"NVLink1", nvlink1GBps, "PCIe gen3", pcie3GBps}},
	// PCIe only, or NVLink bridges whose per-link bandwidth varies by
	// board: the NVLink part is left unknown.
	{"L40S", Generation{PCIe: "PCIe gen4", PCIeGBps: pcie4GBps}},
	{"L40", Generation{PCIe: "PCIe gen4", PCIeGBps: pcie4GBps}},
	{"L4", Generation{PCIe: "PCIe gen4", PCIeGBps: pcie4GBps}},
	{"Ada", Generation{PCIe: "PCIe gen4", PCIeGBps: pcie4GBps}},
	{"RTX 40", Generation{PCIe: "PCIe gen4", PCIeGBps: pcie4GBps}},
	{"RTX 30", Generation{PCIe: "PCIe gen4", PCIeGBps: pcie4GBps}},
	{"A6000", Generation{PCIe: "PCIe gen4", PCIeGBps: pcie4GBps}},
	{"A40", Generation{PCIe: "PCIe gen4", PCIeGBps: pcie4GBps}},
	{"A10", Generation{PCIe: "PCIe gen4", PCIeGBps: pcie4GBps}},
	{"RTX 20", Generation{PCIe: "PCIe gen3", PCIeGBps: pcie3GBps}},
	{"T4", Generation{PCIe: "PCIe gen3", PCIeGBps: pcie3GBps}},
}

// GenerationOf is the generation of a GPU model by its name; false when
// the name matches none known (an unknown generation is said to be
// unknown, never guessed).
func GenerationOf(model string) (Generation, bool) {
	for _, g := range generations {
		if modelHas(model, g.marker) {
			return g.gen, true
		}
	}
	return Generation{}, false
}

// modelHas reports whether marker is a word of model, or starts one when
// it names a series ("RTX 30", with a space): "A100" is in "NVIDIA
// A100-SXM4-80GB" and "RTX 30" in "NVIDIA GeForce RTX 3090", but "A10" is
// not in "NVIDIA A10G" nor "L4" in "NVIDIA L40".
func modelHas(model, marker string) bool {
	for i := 0; i+len(marker) <= len(model); i++ {
		j := strings.Index(model[i:], marker)
		if j < 0 {
			return false
		}
		at := i + j
		startOK := at == 0 || !alnum(model[at-1])
		end := at + len(marker)
		endOK := end == len(model) || !alnum(model[end]) || strings.Contains(marker, " ")
		if startOK && endOK {
			return true
		}
		i = at
	}
	return false
}

func alnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// LinkBandwidth is the bandwidth in one direction, in GB/s, of a link
// between two GPUs of one machine of the given generation, and what
// carries it: NV<n> is n NVLinks of the generation's ("NVLink3"); the
// PCIe kinds (PIX to SYS) are bounded by a x16 slot of its PCIe
// generation ("PCIe gen4"; SYS also crosses the CPUs' interconnect, which
// is no faster). 0 and "" when the generation does not say.
func LinkBandwidth(l Link, g Generation) (gbps float64, over string) {
	switch l.Kind {
	case LinkNV:
		if g.NVLink == "" || l.NVLinks == 0 {
			return 0, ""
		}
		return float64(l.NVLinks) * g.NVLinkGBps, g.NVLink
	case LinkPIX, LinkPXB, LinkPHB, LinkNODE, LinkSYS:
		if g.PCIe == "" {
			return 0, ""
		}
		return g.PCIeGBps, g.PCIe
	}
	return 0, ""
}

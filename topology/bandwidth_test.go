package topology

import "testing"

func TestGenerationOfNamesNvidiaSMIPrints(t *testing.T) {
	for _, c := range []struct {
		model, nvlink, pcie string
	}{
		{"NVIDIA H100 80GB HBM3", "NVLink4", "PCIe gen5"},
		{"NVIDIA H200", "NVLink4", "PCIe gen5"},
		{"NVIDIA GB200", "NVLink5", ""},
		{"NVIDIA B200", "NVLink5", ""},
		{"NVIDIA A100-SXM4-80GB", "NVLink3", "PCIe gen4"},
		{"NVIDIA A100 80GB PCIe", "NVLink3", "PCIe gen4"},
		{"Tesla V100-SXM2-32GB", "NVLink2", "PCIe gen3"},
		{"NVIDIA RTX 6000 Ada Generation", "", "PCIe gen4"},
		{"NVIDIA GeForce RTX 3090", "", "PCIe gen4"},
		{"NVIDIA GeForce RTX 2080 Ti", "", "PCIe gen3"},
		{"NVIDIA L40S", "", "PCIe gen4"},
		{"NVIDIA L4", "", "PCIe gen4"},
	} {
		g, ok := GenerationOf(c.model)
		if !ok || g.NVLink != c.nvlink || g.PCIe != c.pcie {
			t.Errorf("GenerationOf(%q) = %+v, %v; want %q, %q", c.model, g, ok, c.nvlink, c.pcie)
		}
	}
	// Unknown stays unknown: no marker inside another word or number.
	for _, model := range []string{"", "NVIDIA A10G", "NVIDIA H20", "Radeon Instinct MI300X", "XH100", "NVIDIA A100X9"} {
		if g, ok := GenerationOf(model); ok {
			t.Errorf("GenerationOf(%q) = %+v, want unknown", model, g)
		}
	}
}

func TestLinkBandwidthIsLinksTimesTheGenerationsPerLink(t *testing.T) {
	a100, _ := GenerationOf("NVIDIA A100-SXM4-80GB")
	h100, _ := GenerationOf("NVIDIA H100 80GB HBM3")
	b200, _ := GenerationOf("NVIDIA B200")
	ada, _ := GenerationOf("NVIDIA RTX 6000 Ada Generation")
	for _, c := range []struct {
		l    Link
		g    Generation
		gbps float64
		over string
	}{
		{NV(12), a100, 300, "NVLink3"},
		{NV(18), h100, 450, "NVLink4"},
		{NV(18), b200, 900, "NVLink5"},
		{SYS, h100, 64, "PCIe gen5"},
		{PIX, ada, 32, "PCIe gen4"},
		{NV(4), ada, 0, ""}, // a bridge of unknown speed
		{NV(4), Generation{}, 0, ""},
		{SYS, b200, 0, ""}, // Blackwell's PCIe generation is not known
		{Self, h100, 0, ""},
	} {
		if gbps, over := LinkBandwidth(c.l, c.g); gbps != c.gbps || over != c.over {
			t.Errorf("LinkBandwidth(%s, %s) = %v, %q; want %v, %q", c.l, c.g.NVLink, gbps, over, c.gbps, c.over)
		}
	}
}

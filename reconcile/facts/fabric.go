package facts

import (
	"strings"

	"github.com/gpulayer/gpulayer/topology"
)

// sectionFabric holds the GPU lines and Fabric sections of
// `nvidia-smi -q` (the script drops the rest of its output).
const sectionFabric = "fabric"

// parseFabric reads each GPU's NVLink fabric registration onto the GPU of
// its bus id, and the machine's NVLink domain when every GPU is registered
// with one fabric clique (topology.NVLinkDomain). A machine with a fabric
// that is in no domain gets a warning saying why; one with no fabric at
// all (no Fabric sections, or N/A in each) gets none.
func (h *Host) parseFabric(s section) {
	switch {
	case !s.complete:
		return // cut off: splitSections said so, and a partial list could leave GPUs out
	case s.exit == exitTimeout:
		h.warn("nvidia-smi -q timed out: the GPUs' NVLink fabric is unknown")
		return
	case s.exit != 0:
		h.warn("nvidia-smi -q failed (exit %d): the GPUs' NVLink fabric is unknown", s.exit)
		return
	}
	fabrics, err := topology.ParseSMIFabric(s.text)
	if err != nil {
		h.warn("nvidia-smi -q: %v", err)
	}
	if len(fabrics) == 0 {
		return
	}
	for _, f := range fabrics {
		g := h.gpuByBusID(f.BusID)
		switch {
		case g == nil && f.BusID == "":
			h.warn("nvidia-smi -q: a Fabric section with no GPU line above it is ignored")
			continue
		case g == nil:
			h.warn("nvidia-smi -q: a Fabric section for GPU %q, which --query-gpu does not list, is ignored", clip(f.BusID))
			continue
		}
		f.Index, f.BusID = g.Index, ""
		f.State = h.field("GPU fabric state", f.State)
		f.Status = h.field("GPU fabric status", f.Status)
		g.Fabric = &f
	}
	all := make([]topology.GPUFabric, 0, len(h.GPUs))
	for _, g := range h.GPUs {
		f := topology.GPUFabric{Index: g.Index}
		if g.Fabric != nil {
			f = *g.Fabric
		}
		all = append(all, f)
	}
	domain, err := topology.NVLinkDomain(all)
	if err != nil {
		h.warn("%v", err)
	}
	h.NVLinkDomain = domain
}

// gpuByBusID is the GPU of a PCI bus id, as --query-gpu and nvidia-smi -q
// print it; nil for none.
func (h *Host) gpuByBusID(id string) *GPU {
	if id == "" {
		return nil
	}
	for i := range h.GPUs {
		if strings.EqualFold(h.GPUs[i].PCIBusID, id) {
			return &h.GPUs[i]
		}
	}
	return nil
}

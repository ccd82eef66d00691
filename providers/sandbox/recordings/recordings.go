// Package recordings holds the machines the sandbox simulates: a recorded
// `nvidia-smi topo -m` output each, and the model facts nvidia-smi would
// report beside it (GPU name, memory, driver).
//
// The topology files are byte-for-byte copies of recordings in the
// repository's testdata/topo (a test keeps them equal): go:embed cannot
// reach a parent directory, and the go tool ignores packages inside a
// testdata directory, so the sandbox cannot embed testdata/topo itself. Two
// files were written by hand, no public recording of their layout having
// been found, and are marked Synthetic: synthetic-2x-rtx3090-nv4.txt and
// synthetic-4x-gb200-tray-nv18.txt (NVLinkTray; modelled on the GB200
// matrix quoted, cut off, in sgl-project/sglang#11208).
package recordings

import (
	"embed"
	"fmt"
)

//go:embed *.txt
var files embed.FS

// Machine is one simulated machine model.
type Machine struct {
	Model        string // what people call it: "DGX A100"
	TopologyFile string // the recorded `nvidia-smi topo -m` output
	GPUName      string // nvidia-smi's name
	MemoryMiB    int64  // memory.total per GPU
	Driver       string // driver_version
	GPUs         int    // GPUs in the recording
	// Synthetic marks a topology written by hand rather than recorded.
	Synthetic bool
	// RecordedAs is the file's name in testdata/topo; "" when Synthetic.
	RecordedAs string
	// Fabric is how the model's `nvidia-smi -q` shows its GPUs' NVLink
	// fabric when the machine is in no multi-node NVLink domain: "" prints
	// no Fabric section (older drivers), FabricNA "N/A" (no NVSwitch), and
	// FabricSingleNode Completed with clique 0 and a zero cluster UUID, as
	// an HGX H100 with its NVSwitches inside the machine does.
	Fabric string
}

// Values of Machine.Fabric.
const (
	FabricNA         = "N/A"
	FabricSingleNode = "single-node"
)

// Topology returns the machine's `nvidia-smi topo -m` output, verbatim.
func (m Machine) Topology() string {
	b, err := files.ReadFile(m.TopologyFile)
	if err != nil {
		// The table below names only embedded files; a test reads each.
		panic(fmt.Sprintf("recordings: %s is not embedded", m.TopologyFile))
	}
	return string(b)
}

// Machines returns the simulated models, in the order the sandbox deals
// them out to hosts. GPU names, memory sizes and drivers beside a
// recording are the model's usual values, not part of the recording's
// source, unless the source named them (see testdata/topo/SOURCES.md).
func Machines() []Machine {
	return []Machine{
		{
			Model:        "DGX A100",
			TopologyFile: "dgx-a100-8x-nv12-8nic-mlx5.txt", RecordedAs: "dgx-a100-8x-nv12-8nic-mlx5.txt",
			GPUName: "NVIDIA A100-SXM4-80GB", MemoryMiB: 81920, Driver: "525.105.17", GPUs: 8,
		},
		{
			Model:        "HGX H100",
			TopologyFile: "hgx-h100-8x-nv18-gpunumaid-nonic.txt", RecordedAs: "hgx-h100-8x-nv18-gpunumaid-nonic.txt",
			GPUName: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, Driver: "535.104.05", GPUs: 8, Fabric: FabricSingleNode,
		},
		{
			Model:        "two-socket PCIe box (4x RTX 6000 Ada)",
			TopologyFile: "4x-rtx6000ada-pcie-2socket-node-sys-4nic.txt", RecordedAs: "4x-rtx6000ada-pcie-2socket-node-sys-4nic.txt",
			GPUName: "NVIDIA RTX 6000 Ada Generation", MemoryMiB: 49140, Driver: "550.54.15", GPUs: 4, Fabric: FabricNA,
		},
		{
			Model:        "2x RTX 3090 with an NV4 bridge",
			TopologyFile: "synthetic-2x-rtx3090-nv4.txt", Synthetic: true,
			GPUName: "NVIDIA GeForce RTX 3090", MemoryMiB: 24576, Driver: "550.90.07", GPUs: 2, Fabric: FabricNA,
		},
		{
			Model:        "HGX H200",
			TopologyFile: "hgx-h200-8x-nv18-10nic-raw-tabs.txt", RecordedAs: "hgx-h200-8x-nv18-10nic-raw-tabs.txt",
			GPUName: "NVIDIA H200", MemoryMiB: 143771, Driver: "560.35.03", GPUs: 8, Fabric: FabricSingleNode,
		},
		{
			Model:        "Azure NC96ads A100 v4",
			TopologyFile: "azure-nc96ads-a100v4-4x-a100pcie-nv12-pairs-4numa-matrix-only.txt",
			RecordedAs:   "azure-nc96ads-a100v4-4x-a100pcie-nv12-pairs-4numa-matrix-only.txt",
			GPUName:      "NVIDIA A100 80GB PCIe", MemoryMiB: 81920, Driver: "535.161.08", GPUs: 4, Fabric: FabricNA,
		},
		{
			Model:        "rented container (2x RTX 2080 Ti)",
			TopologyFile: "2x-rtx2080ti-pix-container.txt", RecordedAs: "2x-rtx2080ti-pix-container.txt",
			GPUName: "NVIDIA GeForce RTX 2080 Ti", MemoryMiB: 11264, Driver: "550.90.07", GPUs: 2, Fabric: FabricNA,
		},
	}
}

// NVLinkTray is the model of the machines of the sandbox's simulated
// multi-node NVLink domain (sandbox.Options.NVLinkDomain): a GB200 NVL72
// compute tray, four GPUs joined by NVLink inside the tray and, through the
// rack's NVLink switches, to every GPU of the other trays. It is not dealt
// out with Machines. Its Fabric is "": the sandbox gives each tray the
// domain's registration.
func NVLinkTray() Machine {
	return Machine{
		Model:        "GB200 NVL72 compute tray",
		TopologyFile: "synthetic-4x-gb200-tray-nv18.txt", Synthetic: true,
		GPUName: "NVIDIA GB200", MemoryMiB: 189471, Driver: "570.172.08", GPUs: 4,
	}
}

package facts

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gpulayer/gpulayer/topology"
)

// The probe script's output on a real GPU machine (.ci/device-check on
// the H200 lent to this project, 2026-11-29; the nonce is in the file's
// name) reads to what nvidia-smi said there.
func TestParseReadsARealMachinesProbeOutput(t *testing.T) {
	const nonce = "d20954550c042a18fe7a1dc7"
	out, err := os.ReadFile(filepath.Join("testdata", "probe", "h200-vm-"+nonce+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	h := Parse(out, nonce)
	if h.Status != StatusOK || len(h.Warnings) != 0 {
		t.Fatalf("status %s, warnings %q", h.Status, h.Warnings)
	}
	wantGPU := GPU{Index: 0, UUID: "GPU-4ac7dd57-44b8-98fa-4241-db96731db453", Name: "NVIDIA H200",
		PCIBusID: "00000000:00:06.0", MemoryTotalMiB: 143771, Processes: []Process{}}
	if len(h.GPUs) != 1 || !reflect.DeepEqual(h.GPUs[0], wantGPU) || !reflect.DeepEqual(h.FreeGPUs, []int{0}) {
		t.Errorf("GPUs %+v, free %v; want %+v free", h.GPUs, h.FreeGPUs, wantGPU)
	}
	if h.Hostname != "vm" || h.Kernel != "Linux 6.18.44-fc-v657-gpu" || h.Arch != "x86_64" ||
		h.TorchVersion != "2.11.0" || h.CUDADriverVersion != "580.159.04" ||
		h.BootID != "e0c84a7b-2782-4c41-8482-13a8da5b06ca" {
		t.Errorf("host %q kernel %q arch %q torch %q driver %q boot %q", h.Hostname, h.Kernel, h.Arch, h.TorchVersion, h.CUDADriverVersion, h.BootID)
	}
	// The topology section is the recording kept in testdata/topo, byte
	// for byte, ANSI underline included.
	recorded := readTopo(t, "h200-1gpu-vm-driver580-ansi-gpunumaid.txt")
	want, err := topology.ParseSMI(recorded)
	if err != nil {
		t.Fatal(err)
	}
	if h.TopologyRaw != recorded || !reflect.DeepEqual(h.Topology, want) {
		t.Errorf("topology differs from the recording:\n%q", h.TopologyRaw)
	}
	if len(h.PIDs) != 1 || !h.PIDs[0].Alive || h.PIDs[0].PID != 519 || h.PIDs[0].StartTime != 2646 {
		t.Errorf("pids %+v", h.PIDs)
	}
}

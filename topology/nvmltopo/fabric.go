//go:build linux && cgo && nvml

package nvmltopo

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpulayer/gpulayer/topology"
)

// LocalFabric reads this machine's GPUs' NVLink fabric registrations
// through NVML (ReadFabric); ErrUnavailable when NVML cannot be used.
func LocalFabric() ([]topology.GPUFabric, error) {
	return LoadFabric(nvml.New())
}

// LoadFabric initialises NVML through lib, reads the fabric with
// ReadFabric and shuts NVML down; as Load, no other call is made on lib
// when Init fails.
func LoadFabric(lib nvml.Interface) ([]topology.GPUFabric, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: nvml init: %s", ErrUnavailable, ret.Error())
	}
	defer lib.Shutdown()
	return ReadFabric(lib)
}

// ReadFabric is each GPU's registration with a multi-node NVLink fabric
// (nvmlDeviceGetGpuFabricInfo), in PCI bus order as Discover numbers
// them, in the words nvidia-smi -q prints, so that
// topology.NVLinkDomain judges it as it judges the probe's. A driver
// without the function (before R535), or a GPU that answers
// NOT_SUPPORTED, reads as Not Supported: no fabric, not an error. The
// cluster UUID and clique id are kept only once the registration is
// Completed; before that NVML leaves them undefined.
func ReadFabric(lib nvml.Interface) ([]topology.GPUFabric, error) {
	gpus, err := listGPUs(lib)
	if err != nil {
		return nil, err
	}
	if err := topology.CheckGPUCount(len(gpus)); err != nil {
		return nil, fmt.Errorf("nvml: %w", err)
	}
	ext := lib.Extensions()
	has := ext != nil && ext.LookupSymbol("nvmlDeviceGetGpuFabricInfo") == nil
	out := make([]topology.GPUFabric, len(gpus))
	for i, g := range gpus {
		out[i] = topology.GPUFabric{Index: i, BusID: g.addr.String(), State: topology.FabricNotSupported}
		if !has {
			continue // calling a symbol the library lacks kills the process
		}
		info, ret := g.dev.GetGpuFabricInfo()
		switch {
		case notThere(ret):
			continue
		case ret != nvml.SUCCESS:
			return nil, fmt.Errorf("nvml: %s: fabric info: %s", g, ret.Error())
		}
		f := &out[i]
		switch info.State {
		case nvml.GPU_FABRIC_STATE_NOT_SUPPORTED:
		case nvml.GPU_FABRIC_STATE_NOT_STARTED:
			f.State = topology.FabricNotStarted
		case nvml.GPU_FABRIC_STATE_IN_PROGRESS:
			f.State = topology.FabricInProgress
		case nvml.GPU_FABRIC_STATE_COMPLETED:
			f.State = topology.FabricCompleted
			f.Status = nvml.Return(info.Status).Error()
			if nvml.Return(info.Status) == nvml.SUCCESS {
				f.Status = topology.FabricSuccess
			}
			f.CliqueID, f.ClusterUUID = info.CliqueId, uuidString(info.ClusterUuid)
		default:
			f.State = fmt.Sprintf("unknown state %d", info.State)
		}
	}
	return out, nil
}

// uuidString writes 16 bytes as a lower-case 8-4-4-4-12 UUID, as
// nvidia-smi -q prints a cluster UUID.
func uuidString(b [16]uint8) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

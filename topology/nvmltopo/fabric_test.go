//go:build linux && cgo && nvml

package nvmltopo

import (
	"fmt"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpulayer/gpulayer/topology"
)

// clusterUUID is the cluster UUID the fabric tests' GPUs register with.
var clusterUUID = [16]uint8{0x9f, 0x3c, 0x21, 0xab, 0x5e, 0x0d, 0x4c, 0x1b, 0x8a, 0x7e, 0x2f, 0x6d, 0x0c, 0x9b, 0x1e, 0x44}

// fabricServer is a mock of four B200s whose NVML indices run against
// their bus order (index i sits on bus 0x40-0x10*i), each answering
// GetGpuFabricInfo with infos[i] and rets[i].
func fabricServer(t *testing.T, infos []nvml.GpuFabricInfo, rets []nvml.Return) *server.Server {
	t.Helper()
	srv := newServer(t, len(infos), gpus.B200_SXM5_180GB)
	for i, d := range srv.Devices {
		dev := d.(*server.Device)
		bus := fmt.Sprintf("00000000:%02X:00.0", 0x40-0x10*i)
		dev.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) { return pciInfo(bus, dev.Config.PciDeviceId), nvml.SUCCESS }
		dev.GetGpuFabricInfoFunc = func() (nvml.GpuFabricInfo, nvml.Return) { return infos[i], rets[i] }
	}
	return srv
}

func completed(clique uint32, status nvml.Return) nvml.GpuFabricInfo {
	return nvml.GpuFabricInfo{ClusterUuid: clusterUUID, Status: uint32(status), CliqueId: clique, State: nvml.GPU_FABRIC_STATE_COMPLETED}
}

func TestReadFabricPutsCompletedRegistrationsInOneDomain(t *testing.T) {
	all := []nvml.Return{nvml.SUCCESS, nvml.SUCCESS, nvml.SUCCESS, nvml.SUCCESS}
	srv := fabricServer(t, []nvml.GpuFabricInfo{completed(7, nvml.SUCCESS), completed(7, nvml.SUCCESS), completed(7, nvml.SUCCESS), completed(7, nvml.SUCCESS)}, all)
	fabric, err := LoadFabric(srv)
	if err != nil {
		t.Fatal(err)
	}
	if len(fabric) != 4 || fabric[0].BusID != "00000000:10:00.0" || fabric[3].BusID != "00000000:40:00.0" {
		t.Fatalf("fabric %+v, want four GPUs in bus order", fabric)
	}
	want := topology.GPUFabric{Index: 0, BusID: "00000000:10:00.0", State: topology.FabricCompleted, Status: topology.FabricSuccess,
		CliqueID: 7, ClusterUUID: "9f3c21ab-5e0d-4c1b-8a7e-2f6d0c9b1e44"}
	if fabric[0] != want {
		t.Errorf("GPU 0: %+v, want %+v", fabric[0], want)
	}
	if d, err := topology.NVLinkDomain(fabric); err != nil || d != "9f3c21ab-5e0d-4c1b-8a7e-2f6d0c9b1e44:7" {
		t.Errorf("NVLinkDomain = %q, %v; want the cluster's clique 7", d, err)
	}
}

func TestReadFabricUnfinishedOrFailedRegistrationIsNoDomain(t *testing.T) {
	ok := []nvml.Return{nvml.SUCCESS, nvml.SUCCESS, nvml.SUCCESS, nvml.SUCCESS}
	for _, c := range []struct {
		name  string
		infos []nvml.GpuFabricInfo
		rets  []nvml.Return
		want  string // in NVLinkDomain's error
	}{
		{"not started", []nvml.GpuFabricInfo{{State: nvml.GPU_FABRIC_STATE_NOT_STARTED}, {State: nvml.GPU_FABRIC_STATE_NOT_STARTED}, {State: nvml.GPU_FABRIC_STATE_NOT_STARTED}, {State: nvml.GPU_FABRIC_STATE_NOT_STARTED}}, ok, "not completed (state Not Started)"},
		{"in progress", []nvml.GpuFabricInfo{completed(7, nvml.SUCCESS), {State: nvml.GPU_FABRIC_STATE_IN_PROGRESS, ClusterUuid: clusterUUID}, completed(7, nvml.SUCCESS), completed(7, nvml.SUCCESS)}, ok, "In Progress"},
		{"failed", []nvml.GpuFabricInfo{completed(7, nvml.ERROR_INSUFFICIENT_RESOURCES), completed(7, nvml.ERROR_INSUFFICIENT_RESOURCES), completed(7, nvml.ERROR_INSUFFICIENT_RESOURCES), completed(7, nvml.ERROR_INSUFFICIENT_RESOURCES)}, ok, "registration failed (status ERROR_INSUFFICIENT_RESOURCES)"},
		{"two cliques", []nvml.GpuFabricInfo{completed(7, nvml.SUCCESS), completed(7, nvml.SUCCESS), completed(8, nvml.SUCCESS), completed(8, nvml.SUCCESS)}, ok, "different NVLink fabrics"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fabric, err := LoadFabric(fabricServer(t, c.infos, c.rets))
			if err != nil {
				t.Fatal(err)
			}
			d, err := topology.NVLinkDomain(fabric)
			if d != "" || err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("NVLinkDomain = %q, %v; want none, saying %q", d, err, c.want)
			}
			for _, f := range fabric {
				if f.State != topology.FabricCompleted && (f.ClusterUUID != "" || f.CliqueID != 0) {
					t.Errorf("GPU %d: %+v keeps the ids of an unfinished registration", f.Index, f)
				}
			}
		})
	}
}

func TestReadFabricWithoutAFabricIsNotAnError(t *testing.T) {
	// A GPU with no fabric answers NOT_SUPPORTED: no domain, nothing wrong.
	notSup := []nvml.Return{nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NOT_SUPPORTED}
	fabric, err := LoadFabric(fabricServer(t, make([]nvml.GpuFabricInfo, 4), notSup))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := topology.NVLinkDomain(fabric); d != "" || err != nil {
		t.Errorf("NVLinkDomain = %q, %v; want none and no error", d, err)
	}

	// A driver without the function: never called (a real process would
	// die of it), every GPU Not Supported.
	srv := fabricServer(t, make([]nvml.GpuFabricInfo, 4), notSup)
	srv.LookupSymbolFunc = func(symbol string) error {
		if symbol == "nvmlDeviceGetGpuFabricInfo" {
			return fmt.Errorf("%s: undefined symbol", symbol)
		}
		return nil
	}
	for _, d := range srv.Devices {
		d.(*server.Device).GetGpuFabricInfoFunc = func() (nvml.GpuFabricInfo, nvml.Return) {
			t.Error("GetGpuFabricInfo called although the library lacks it")
			return nvml.GpuFabricInfo{}, nvml.ERROR_FUNCTION_NOT_FOUND
		}
	}
	if fabric, err := LoadFabric(srv); err != nil || len(fabric) != 4 || fabric[0].State != topology.FabricNotSupported {
		t.Errorf("old driver: %+v, %v; want four Not Supported", fabric, err)
	}

	// Any other failure is an error naming the GPU.
	fail := []nvml.Return{nvml.SUCCESS, nvml.ERROR_UNKNOWN, nvml.SUCCESS, nvml.SUCCESS}
	if _, err := LoadFabric(fabricServer(t, make([]nvml.GpuFabricInfo, 4), fail)); err == nil || !strings.Contains(err.Error(), "GPU 00000000:30:00.0: fabric info: ERROR_UNKNOWN") {
		t.Errorf("err %v, want one naming GPU 00000000:30:00.0", err)
	}
}

func TestLoadFabricMakesNoCallWhenInitFails(t *testing.T) {
	srv := fabricServer(t, make([]nvml.GpuFabricInfo, 4), make([]nvml.Return, 4))
	srv.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
	srv.DeviceGetCountFunc = func() (int, nvml.Return) {
		t.Error("DeviceGetCount called after a failed Init")
		return 0, nvml.ERROR_UNINITIALIZED
	}
	if _, err := LoadFabric(srv); err == nil || !strings.Contains(err.Error(), ErrUnavailable.Error()) {
		t.Errorf("err %v, want ErrUnavailable", err)
	}
}

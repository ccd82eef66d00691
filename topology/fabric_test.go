package topology

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestParseSMIFabricReadsRecordedSections reads the recorded Fabric
// sections of testdata/smi-q (SOURCES.md says what each holds): one cut by
// grep with nvidia-smi's own indentation and a Health sub-section, one
// re-indented by hand.
func TestParseSMIFabricReadsRecordedSections(t *testing.T) {
	for _, tc := range []struct {
		file   string
		want   GPUFabric
		domain string
	}{
		{"mnnvl-completed-clique2-health-unhealthy-grep-excerpt.txt",
			GPUFabric{State: "Completed", Status: "Success", CliqueID: 2, ClusterUUID: "dc6e40c4-d722-4357-9ba6-5291dd461278"},
			"dc6e40c4-d722-4357-9ba6-5291dd461278:2"},
		{"azure-completed-insufficient-resources-zero-uuid-reindented.txt",
			GPUFabric{State: "Completed", Status: "Insufficient Resources", CliqueID: 0, ClusterUUID: "00000000-0000-0000-0000-000000000000"},
			""},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("../testdata/smi-q", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseSMIFabric(string(b))
			if err != nil {
				t.Fatalf("ParseSMIFabric: %v", err)
			}
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("got %+v, want [%+v]", got, tc.want)
			}
			if d := got[0].Domain(); d != tc.domain {
				t.Errorf("Domain() = %q, want %q", d, tc.domain)
			}
		})
	}
}

// wholeOutput is synthetic `nvidia-smi -q` text in the layout of the
// recordings: four GPUs, each with its GPU line, other sections around the
// Fabric one, a Health sub-section whose keys must not be read as the
// GPU's, and the "Cluster UUID" spelling on one GPU. The third GPU has no
// Fabric section (a driver that prints none).
const wholeOutput = `
==============NVSMI LOG==============

Timestamp                                 : Tue Dec  2 10:00:00 2026
Driver Version                            : 570.133.20
CUDA Version                              : 12.8

Attached GPUs                             : 4
GPU 00000008:01:00.0
    Product Name                          : NVIDIA GB200
    Fabric
        State                             : Completed
        Status                            : Success
        CliqueId                          : 32766
        ClusterUUID                       : 6A2B9F3C-1E4D-4C5B-9A8F-0D1E2F3A4B5C
        Health
            Bandwidth                     : Full
            State                         : Degraded
    Processes                             : None
GPU 00000009:01:00.0
    Product Name                          : NVIDIA GB200
    Fabric
        State                             : In Progress
        Status                            : N/A
        Clique ID                         : N/A
        Cluster UUID                      : N/A
GPU 00000018:01:00.0
    Product Name                          : NVIDIA GB200
    Processes                             : None
GPU 00000019:01:00.0
    Fabric
        State                             : N/A
        Status                            : N/A
`

func TestParseSMIFabricReadsEachGPUOfAWholeOutput(t *testing.T) {
	got, err := ParseSMIFabric(wholeOutput)
	if err != nil {
		t.Fatalf("ParseSMIFabric: %v", err)
	}
	want := []GPUFabric{
		{Index: 0, BusID: "00000008:01:00.0", State: "Completed", Status: "Success", CliqueID: 32766, ClusterUUID: "6a2b9f3c-1e4d-4c5b-9a8f-0d1e2f3a4b5c"},
		{Index: 1, BusID: "00000009:01:00.0", State: "In Progress", Status: "N/A"},
		{Index: 3, BusID: "00000019:01:00.0", State: "N/A", Status: "N/A"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", got, want)
	}
}

func TestParseSMIFabricLeavesValuesThatAreNotTheirFieldEmpty(t *testing.T) {
	text := "GPU 00000000:07:00.0\n    Fabric\n        State : Completed\n        Status : Success\n" +
		"        CliqueId : 12ab\n        ClusterUUID : \x1b[31mnot-a-uuid\n"
	got, err := ParseSMIFabric(text)
	if err == nil || !strings.Contains(err.Error(), "clique id") || !strings.Contains(err.Error(), "cluster UUID") {
		t.Fatalf("error = %v, want one naming the clique id and the cluster UUID", err)
	}
	if len(got) != 1 || got[0].CliqueID != 0 || got[0].ClusterUUID != "" || got[0].Registered() {
		t.Fatalf("got %+v, want one GPU with no clique, no cluster and not registered", got)
	}
}

func TestParseSMIFabricReadsNoMoreThanMaxGPUsSections(t *testing.T) {
	text := strings.Repeat("Fabric\n    State : N/A\n", MaxGPUs+3)
	got, err := ParseSMIFabric(text)
	if len(got) != MaxGPUs || err == nil {
		t.Fatalf("got %d sections, error %v; want %d and an error", len(got), err, MaxGPUs)
	}
}

func TestNVLinkDomainOfAMachine(t *testing.T) {
	const a, b = "6a2b9f3c-1e4d-4c5b-9a8f-0d1e2f3a4b5c", "9c6f5af3-53bf-49b5-a436-b66766c413c3"
	reg := func(i int, uuid string, clique uint32) GPUFabric {
		return GPUFabric{Index: i, State: FabricCompleted, Status: FabricSuccess, CliqueID: clique, ClusterUUID: uuid}
	}
	na := func(i int) GPUFabric { return GPUFabric{Index: i, State: "N/A", Status: "N/A"} }
	for _, tc := range []struct {
		name    string
		gpus    []GPUFabric
		domain  string
		problem string // a substring of the error; "" for none
	}{
		{"no GPUs", nil, "", ""},
		{"no fabric (N/A, older drivers)", []GPUFabric{na(0), na(1)}, "", ""},
		{"fabric not supported (H100 PCIe)", []GPUFabric{{Index: 0, State: FabricNotSupported}}, "", ""},
		{"NVSwitches inside the machine only (HGX H100: zero cluster UUID)",
			[]GPUFabric{reg(0, zeroUUID, 0), reg(1, zeroUUID, 0)}, "", ""},
		{"every GPU registered in one clique", []GPUFabric{reg(0, a, 32766), reg(1, a, 32766), reg(2, a, 32766), reg(3, a, 32766)}, a + ":32766", ""},
		{"mixed cliques", []GPUFabric{reg(0, a, 1), reg(1, a, 1), reg(2, a, 2), reg(3, a, 2)}, "", "GPU 0-1 in " + a + ":1, GPU 2-3 in " + a + ":2"},
		{"mixed clusters", []GPUFabric{reg(0, a, 1), reg(1, b, 1)}, "", "different NVLink fabrics"},
		{"registration in progress", []GPUFabric{{Index: 0, State: FabricInProgress}, {Index: 1, State: FabricInProgress}}, "", "GPU 0-1: NVLink fabric registration not completed (state In Progress)"},
		{"registration failed", []GPUFabric{{Index: 0, State: FabricCompleted, Status: "Insufficient Resources", ClusterUUID: zeroUUID}}, "", "registration failed (status Insufficient Resources)"},
		{"some GPUs registered, one still registering", []GPUFabric{reg(0, a, 7), reg(1, a, 7), {Index: 2, State: FabricNotStarted}}, "", "GPU 0-1 in NVLink fabric " + a + ":7 but GPU 2 not (state Not Started)"},
		{"some GPUs registered, one without a fabric", []GPUFabric{reg(0, a, 7), na(1)}, "", "GPU 1 not (no multi-node fabric)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NVLinkDomain(tc.gpus)
			if d != tc.domain {
				t.Errorf("domain = %q, want %q", d, tc.domain)
			}
			switch {
			case tc.problem == "" && err != nil:
				t.Errorf("error = %v, want none", err)
			case tc.problem != "" && (err == nil || !strings.Contains(err.Error(), tc.problem)):
				t.Errorf("error = %v, want one containing %q", err, tc.problem)
			}
		})
	}
}

package facts

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const (
	clusterA = "6a2b9f3c-1e4d-4c5b-9a8f-0d1e2f3a4b5c"
	domainA  = clusterA + ":32766"
)

// tray is the probe output of a 4-GPU GB200 compute tray with the given
// fabric section (none when fabric is nil).
func tray(fabric *frame) []byte {
	var gpus strings.Builder
	for i := 0; i < 4; i++ {
		fmt.Fprintf(&gpus, "%d, GPU-gb200-%d, NVIDIA GB200, %s, 189471, 0, 570.133.20\n", i, i, trayBusID(i))
	}
	frames := []frame{
		{sectionHostname, "nvl-01\n", 0},
		{sectionUname, "Linux 6.8.0-1017-nvidia-64k aarch64\n", 0},
		{sectionProductName, "GB200 NVL\n", 0},
		{sectionTorch, "2.5.1+cu124\n", 0},
		{sectionGPUs, gpus.String(), 0},
		{sectionComputeApps, "", 0},
		{sectionRunIDs, "", 0},
		{sectionTopo, "\tGPU0\tGPU1\tGPU2\tGPU3\nGPU0\t X \tNV18\tNV18\tNV18\nGPU1\tNV18\t X \tNV18\tNV18\nGPU2\tNV18\tNV18\t X \tNV18\nGPU3\tNV18\tNV18\tNV18\t X \n", 0},
	}
	if fabric != nil {
		frames = append(frames, *fabric)
	}
	frames = append(frames, frame{sectionPIDs, "", 0}, frame{sectionBootID, "e719aff4-b24e-414a-b3a9-c9712c27a37c\n", 0})
	return output(testNonce, true, frames...)
}

func trayBusID(i int) string { return fmt.Sprintf("%08X:01:00.0", []int{8, 9, 0x18, 0x19}[i]) }

// fabricText is the fabric section as the probe prints it: each GPU's
// line and Fabric section, with state, status, clique and cluster of
// fabricOf(i).
func fabricText(fabricOf func(i int) (state, status, clique, cluster string)) string {
	var b strings.Builder
	for i := 0; i < 4; i++ {
		state, status, clique, cluster := fabricOf(i)
		fmt.Fprintf(&b, "GPU %s\n    Fabric\n        State                             : %s\n        Status                            : %s\n"+
			"        CliqueId                          : %s\n        ClusterUUID                       : %s\n        Health\n            Bandwidth                     : Full\n",
			trayBusID(i), state, status, clique, cluster)
	}
	return b.String()
}

func registered(i int) (string, string, string, string) {
	return "Completed", "Success", "32766", strings.ToUpper(clusterA)
}

func TestParseFabricPutsAMachineInItsNVLinkDomain(t *testing.T) {
	const zero = "00000000-0000-0000-0000-000000000000"
	for _, tc := range []struct {
		name    string
		fabric  *frame
		domain  string
		warning string // a substring of the one warning; "" for none
	}{
		{name: "probe output without a fabric section (recorded before the probe asked)"},
		{name: "no fabric on this machine", fabric: &frame{sectionFabric, fabricText(func(int) (string, string, string, string) {
			return "N/A", "N/A", "N/A", "N/A"
		}), 0}},
		{name: "a driver that prints no Fabric sections", fabric: &frame{sectionFabric, "GPU 00000008:01:00.0\nGPU 00000009:01:00.0\n", 0}},
		{name: "every GPU registered in one clique", fabric: &frame{sectionFabric, fabricText(registered), 0}, domain: domainA},
		{name: "NVSwitches inside the machine only (zero cluster UUID)", fabric: &frame{sectionFabric, fabricText(func(int) (string, string, string, string) {
			return "Completed", "Success", "0", zero
		}), 0}},
		{name: "registration not completed", fabric: &frame{sectionFabric, fabricText(func(i int) (string, string, string, string) {
			return "In Progress", "N/A", "N/A", "N/A"
		}), 0}, warning: "GPU 0-3: NVLink fabric registration not completed (state In Progress)"},
		{name: "one GPU still registering", fabric: &frame{sectionFabric, fabricText(func(i int) (string, string, string, string) {
			if i == 3 {
				return "In Progress", "N/A", "N/A", "N/A"
			}
			return registered(i)
		}), 0}, warning: "GPU 0-2 in NVLink fabric " + domainA + " but GPU 3 not (state In Progress)"},
		{name: "registration failed", fabric: &frame{sectionFabric, fabricText(func(int) (string, string, string, string) {
			return "Completed", "Insufficient Resources", "0", zero
		}), 0}, warning: "registration failed (status Insufficient Resources)"},
		{name: "mixed cliques", fabric: &frame{sectionFabric, fabricText(func(i int) (string, string, string, string) {
			return "Completed", "Success", fmt.Sprint(1 + i/2), clusterA
		}), 0}, warning: "GPU 0-1 in " + clusterA + ":1, GPU 2-3 in " + clusterA + ":2"},
		{name: "nvidia-smi -q failed", fabric: &frame{sectionFabric, "", 2}, warning: "nvidia-smi -q failed (exit 2)"},
		{name: "nvidia-smi -q timed out", fabric: &frame{sectionFabric, "", exitTimeout}, warning: "nvidia-smi -q timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := Parse(tray(tc.fabric), testNonce)
			if h.NVLinkDomain != tc.domain {
				t.Errorf("NVLinkDomain = %q, want %q", h.NVLinkDomain, tc.domain)
			}
			switch {
			case tc.warning == "" && len(h.Warnings) > 0:
				t.Errorf("warnings %q, want none", h.Warnings)
			case tc.warning != "" && (len(h.Warnings) != 1 || !strings.Contains(h.Warnings[0], tc.warning)):
				t.Errorf("warnings %q, want one containing %q", h.Warnings, tc.warning)
			}
			if tc.domain != "" {
				for _, g := range h.GPUs {
					if g.Fabric == nil || g.Fabric.Domain() != tc.domain {
						t.Errorf("GPU %d fabric %+v, want registered in %s", g.Index, g.Fabric, tc.domain)
					}
				}
			}
		})
	}
}

func TestParseFabricIgnoresSectionsOfGPUsItDoesNotList(t *testing.T) {
	text := fabricText(registered) + "GPU 00000042:01:00.0\n    Fabric\n        State : Completed\n"
	h := Parse(tray(&frame{sectionFabric, text, 0}), testNonce)
	if h.NVLinkDomain != domainA {
		t.Errorf("NVLinkDomain = %q, want %q", h.NVLinkDomain, domainA)
	}
	if len(h.Warnings) != 1 || !strings.Contains(h.Warnings[0], `GPU "00000042:01:00.0", which --query-gpu does not list`) {
		t.Errorf("warnings %q", h.Warnings)
	}
}

// wholeQ is synthetic `nvidia-smi -q` output of a 2-GPU machine in one
// fabric clique, in the layout nvidia-smi prints: everything the probe's
// filter must drop around the GPU lines and the Fabric sections.
const wholeQ = `
==============NVSMI LOG==============

Timestamp                                 : Tue Dec  2 10:00:00 2026
Driver Version                            : 570.133.20

Attached GPUs                             : 2
GPU 00000000:01:00.0
    Product Name                          : NVIDIA GB200
    Clocks Event Reasons
        Idle                              : Active
    Fabric
        State                             : Completed
        Status                            : Success
        CliqueId                          : 32766
        ClusterUUID                       : 6a2b9f3c-1e4d-4c5b-9a8f-0d1e2f3a4b5c
        Health
            Bandwidth                     : Full
    Processes                             : None
GPU 00000000:02:00.0
    Product Name                          : NVIDIA GB200
    Fabric
        State                             : Completed
        Status                            : Success
        CliqueId                          : 32766
        ClusterUUID                       : 6a2b9f3c-1e4d-4c5b-9a8f-0d1e2f3a4b5c
    Temperature
        GPU Current Temp                  : 31 C
`

// fakeTrayNvidiaSMI answers for two GB200 GPUs, and -q with the file $SMIQ.
const fakeTrayNvidiaSMI = `#!/bin/sh
case "$*" in
*--query-gpu=*) printf '0, GPU-0, NVIDIA GB200, 00000000:01:00.0, 189471, 0, 570.133.20\n1, GPU-1, NVIDIA GB200, 00000000:02:00.0, 189471, 0, 570.133.20\n' ;;
*--query-compute-apps=*) ;;
"topo -m") cat "$TOPO" ;;
-q) cat "$SMIQ" ;;
*) exit 2 ;;
esac
`

// TestScriptKeepsOnlyTheFabricOfNvidiaSMIQ runs probe.sh under each shell
// machines have as sh against an nvidia-smi whose -q prints a whole
// output: the section holds the GPU lines and Fabric sections only, and
// the machine is in its domain.
func TestScriptKeepsOnlyTheFabricOfNvidiaSMIQ(t *testing.T) {
	for _, shell := range []string{"dash", "bash", "busybox"} {
		t.Run(shell, func(t *testing.T) {
			path, err := exec.LookPath(shell)
			if err != nil {
				t.Skipf("no %s", shell)
			}
			bin := binWith(t, "uname", "timeout", "cat")
			qFile := filepath.Join(t.TempDir(), "q.txt")
			if err := os.WriteFile(qFile, []byte(wholeQ), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(fakeTrayNvidiaSMI), 0o755); err != nil {
				t.Fatal(err)
			}
			argv := []string{"-s", "--", testNonce}
			if shell == "busybox" {
				argv = append([]string{"sh"}, argv...)
			}
			cmd := exec.Command(path, argv...)
			cmd.Stdin = strings.NewReader(Script())
			abs, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "topo", "2x-gpu-nv2-numa-na-matrix-only.txt"))
			cmd.Env = []string{"PATH=" + bin, "TOPO=" + abs, "SMIQ=" + qFile}
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("probe script: %v", err)
			}
			secs, _, _ := splitSections(string(out), testNonce)
			want := "GPU 00000000:01:00.0\n    Fabric\n        State                             : Completed\n        Status                            : Success\n" +
				"        CliqueId                          : 32766\n        ClusterUUID                       : 6a2b9f3c-1e4d-4c5b-9a8f-0d1e2f3a4b5c\n" +
				"        Health\n            Bandwidth                     : Full\nGPU 00000000:02:00.0\n    Fabric\n" +
				"        State                             : Completed\n        Status                            : Success\n" +
				"        CliqueId                          : 32766\n        ClusterUUID                       : 6a2b9f3c-1e4d-4c5b-9a8f-0d1e2f3a4b5c\n"
			if got := secs[sectionFabric]; got.text != want || got.exit != 0 {
				t.Errorf("fabric section (exit %d):\n%s\nwant:\n%s", got.exit, got.text, want)
			}
			h := Parse(out, testNonce)
			if h.NVLinkDomain != domainA {
				t.Errorf("NVLinkDomain = %q, want %q (warnings %q)", h.NVLinkDomain, domainA, h.Warnings)
			}
		})
	}
}

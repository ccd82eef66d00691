//go:build linux && cgo && nvml

package nvmltopo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/topology"
)

// TestRealDriverFabricMatchesNvidiaSMI reads this machine's GPUs' fabric
// registrations through NVML and from `nvidia-smi -q`'s Fabric sections:
// both ask the same driver, so each GPU's state, and once Completed its
// status, cluster UUID and clique id, and the machine's NVLink domain must
// agree. Opt-in like TestRealDriverMatchesNvidiaSMI.
func TestRealDriverFabricMatchesNvidiaSMI(t *testing.T) {
	if os.Getenv(realGPUEnv) != "1" {
		t.Skipf("needs NVIDIA GPUs, their driver and nvidia-smi: set %s=1 to run", realGPUEnv)
	}
	text, smiErr := runNvidiaSMIQuery(t)
	keep(t, "nvidia-smi-q-fabric.txt", text)
	var want []topology.GPUFabric
	if smiErr == nil {
		want, smiErr = topology.ParseSMIFabric(string(text))
	}
	got, nvmlErr := LocalFabric()
	if smiErr != nil || nvmlErr != nil {
		t.Fatalf("cannot compare:\n  nvidia-smi -q: %v\n  NVML: %v", errOrOK(smiErr), errOrOK(nvmlErr))
	}
	t.Logf("NVML: %+v", got)
	t.Logf("nvidia-smi -q: %+v", want)
	if len(want) == 0 {
		// Drivers before R535 print no Fabric section: NVML must see no
		// fabric either.
		for _, g := range got {
			if g.State != topology.FabricNotSupported {
				t.Errorf("GPU %d: NVML says %q, nvidia-smi prints no Fabric section", g.Index, g.State)
			}
		}
		return
	}
	if len(want) != len(got) {
		t.Fatalf("nvidia-smi -q has %d Fabric sections, NVML %d GPUs", len(want), len(got))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !strings.EqualFold(g.BusID, w.BusID) && w.BusID != "" {
			t.Errorf("GPU %d: bus id %s, nvidia-smi's section is %s's", i, g.BusID, w.BusID)
		}
		if normalState(g.State) != normalState(w.State) {
			t.Errorf("GPU %d: state %q, nvidia-smi %q", i, g.State, w.State)
			continue
		}
		// A failed status is spelt NVML's way (ERROR_INSUFFICIENT_RESOURCES)
		// by one and nvidia-smi's (Insufficient Resources) by the other:
		// only success or not is compared.
		sameStatus := (g.Status == topology.FabricSuccess) == (w.Status == topology.FabricSuccess)
		if g.State == topology.FabricCompleted && (!sameStatus || g.ClusterUUID != w.ClusterUUID || g.CliqueID != w.CliqueID) {
			t.Errorf("GPU %d: %+v, nvidia-smi %+v", i, g, w)
		}
	}
	gd, gerr := topology.NVLinkDomain(got)
	wd, werr := topology.NVLinkDomain(want)
	if gd != wd || (gerr == nil) != (werr == nil) {
		t.Errorf("NVLink domain %q (%v) through NVML, %q (%v) from nvidia-smi", gd, gerr, wd, werr)
	}
}

// normalState reads "N/A" (nvidia-smi on a GPU without fabric support) as
// Not Supported, NVML's word for it.
func normalState(s string) string {
	if s == "N/A" || s == "" {
		return topology.FabricNotSupported
	}
	return s
}

// runNvidiaSMIQuery runs `nvidia-smi -q`, bounded in time and in size.
func runNvidiaSMIQuery(t *testing.T) ([]byte, error) {
	t.Helper()
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi not found on PATH: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "-q")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	text, rerr := io.ReadAll(io.LimitReader(out, 16<<20))
	if err := cmd.Wait(); err != nil {
		return text, fmt.Errorf("%s -q: %w: %s", path, err, strings.TrimSpace(stderr.String()))
	}
	return text, rerr
}

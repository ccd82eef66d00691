//go:build linux && cgo && nvml

package nvmltopo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/topology"
)

// The real-driver test runs only when asked: it needs a machine with NVIDIA
// GPUs, their driver and nvidia-smi. .ci/device-check runs it there.
const (
	realGPUEnv    = "GPULAYER_REAL_GPU"     // "1" runs it
	realGPUOutEnv = "GPULAYER_REAL_GPU_OUT" // a folder to keep what was read in
)

// TestRealDriverMatchesNvidiaSMI reads this machine's matrix through NVML
// and compares its GPU part with what `nvidia-smi topo -m` prints: both come
// from the same driver, so every pair's link and every affinity must agree.
func TestRealDriverMatchesNvidiaSMI(t *testing.T) {
	if os.Getenv(realGPUEnv) != "1" {
		t.Skipf("needs NVIDIA GPUs, their driver and nvidia-smi: set %s=1 to run (and %s=DIR to keep what was read)", realGPUEnv, realGPUOutEnv)
	}

	// Both are read before either is judged, so one run on a GPU machine
	// says everything it can.
	smiText, smiErr := runNvidiaSMITopo(t)
	keep(t, "nvidia-smi-topo-m.txt", smiText)
	var want *topology.Matrix
	if smiErr == nil {
		if want, smiErr = topology.ParseSMI(string(smiText)); smiErr != nil {
			smiErr = fmt.Errorf("nvidia-smi topo -m: %w", smiErr)
		}
	}

	got, nvmlErr := Local()
	if nvmlErr == nil {
		keep(t, "nvml-topo.txt", []byte(renderMatrix(got)))
		t.Logf("NVML:\n%s", renderMatrix(got))
	}
	if want != nil {
		t.Logf("nvidia-smi topo -m, parsed:\n%s", renderMatrix(want))
	}
	if smiErr != nil || nvmlErr != nil {
		t.Fatalf("cannot compare:\n  nvidia-smi: %v\n  NVML: %v", errOrOK(smiErr), errOrOK(nvmlErr))
	}
	if want.GPUs() == 0 {
		t.Fatal("nvidia-smi topo -m shows no GPUs: nothing to compare")
	}

	// NVML cannot see NICs; the GPU part is what must agree.
	want.NICs, want.NICLinks = nil, nil
	compareOnlyWhatSMIShows(t, got, want)
	assertSameMatrix(t, got, want)
}

// compareOnlyWhatSMIShows blanks the affinity columns that nvidia-smi does
// not report for any GPU (an old driver's missing column, or N/A in a VM),
// so that they are not compared. nvidia-smi is built on NVML, so a column it
// does show must come out of Discover the same.
func compareOnlyWhatSMIShows(t *testing.T, got, want *topology.Matrix) {
	t.Helper()
	if !anyString(want.CPUAffinity) && anyString(got.CPUAffinity) {
		t.Logf("nvidia-smi shows no CPU affinity; NVML's %q is not compared", got.CPUAffinity)
		got.CPUAffinity = nil
	}
	if !anyNUMA(want.NUMAAffinity) && anyNUMA(got.NUMAAffinity) {
		t.Logf("nvidia-smi shows no NUMA affinity; NVML's %v is not compared", got.NUMAAffinity)
		got.NUMAAffinity = nil
	}
}

func anyString(s []string) bool {
	for _, v := range s {
		if v != "" {
			return true
		}
	}
	return false
}

func anyNUMA(s []topology.NUMASet) bool {
	for _, v := range s {
		if len(v) > 0 {
			return true
		}
	}
	return false
}

func errOrOK(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// runNvidiaSMITopo returns what `nvidia-smi topo -m` printed, its error
// output included when it failed.
func runNvidiaSMITopo(t *testing.T) ([]byte, error) {
	t.Helper()
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi not found on PATH: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, "topo", "-m")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s topo -m: %w: %s", path, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// keep writes data to $GPULAYER_REAL_GPU_OUT/nvmltopo-NAME when that is set.
func keep(t *testing.T, name string, data []byte) {
	t.Helper()
	dir := os.Getenv(realGPUOutEnv)
	if dir == "" || data == nil {
		return
	}
	path := filepath.Join(dir, "nvmltopo-"+name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Errorf("keeping %s: %v", name, err)
	}
}

// renderMatrix writes m as `nvidia-smi topo -m` does, tab-separated, GPUs
// only, so topology.ParseSMI and `gpulayer topo show FILE` can read it back.
func renderMatrix(m *topology.Matrix) string {
	n := m.GPUs()
	var sb strings.Builder
	for j := 0; j < n; j++ {
		fmt.Fprintf(&sb, "\tGPU%d", j)
	}
	sb.WriteString("\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sb, "GPU%d", i)
		for j := 0; j < n; j++ {
			sb.WriteString("\t" + m.Links[i][j].String())
		}
		cpu, numa, id := "N/A", "N/A", "N/A"
		if i < len(m.CPUAffinity) && m.CPUAffinity[i] != "" {
			cpu = m.CPUAffinity[i]
		}
		if i < len(m.NUMAAffinity) && len(m.NUMAAffinity[i]) > 0 {
			numa = m.NUMAAffinity[i].String()
		}
		if i < len(m.GPUNUMAID) && m.GPUNUMAID[i] >= 0 {
			id = strconv.Itoa(m.GPUNUMAID[i])
		}
		fmt.Fprintf(&sb, "\t%s\t%s\t%s\n", cpu, numa, id)
	}
	return sb.String()
}

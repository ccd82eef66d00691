// Package plantest writes the inputs of a whole offline plan at scale: a
// configuration of many hosts and jobs, and the facts document a probe of
// those hosts saves. BenchmarkPlan (reconcile) and benchmarks/plan (the
// real command's time and peak memory) plan from the same inputs.
package plantest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/internal/atomicfile"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/topology"
)

// Inputs are where Write put a configuration and its facts.
type Inputs struct {
	// Dir is the configuration directory (main.hcl).
	Dir string
	// Facts is the facts document, as `gpulayer probe --out` saves it.
	Facts string
}

// Write writes, under dir, a configuration of hosts hosts in 4 regions of
// 2 zones each, racks of 8, 5 policies (one per group_locality) and jobs
// jobs of 1-8 nodes of 1, 2, 4 or 8 GPUs; and its facts: every host a
// machine whose `nvidia-smi topo -m` is topoRaw, with 8 GPUs, a quarter
// of the hosts with 4 of them busy, each host's facts as full as a
// probe's (topo -m text and matrix, GPU UUIDs and bus ids, kernel, boot
// id, torchrun).
func Write(dir string, hosts, jobs int, topoRaw string) (Inputs, error) {
	m, err := topology.ParseSMI(topoRaw)
	if err != nil {
		return Inputs{}, fmt.Errorf("topo -m: %w", err)
	}
	in := Inputs{Dir: filepath.Join(dir, "config"), Facts: filepath.Join(dir, "facts.json")}
	if err := os.MkdirAll(in.Dir, 0o755); err != nil {
		return Inputs{}, err
	}
	var cfg strings.Builder
	doc := facts.Document{Version: facts.Version}
	regions := []string{"europe-west1", "europe-west4", "us-central1", "us-east1"}
	for r, region := range regions {
		fmt.Fprintf(&cfg, "fleet %q {\n  region = %q\n", region, region)
		for i := r; i < hosts; i += len(regions) {
			name := fmt.Sprintf("h%05d", i)
			zone := fmt.Sprintf("%s-%c", region, 'b'+rune(i/len(regions)%2))
			rack := fmt.Sprintf("%s-rack%d", zone, i/(8*len(regions)))
			address := fmt.Sprintf("10.%d.%d.%d", r, i/250, i%250+1)
			fmt.Fprintf(&cfg, "  host %q {\n    address       = %q\n    zone          = %q\n    network_group = %q\n  }\n",
				name, address, zone, rack)
			h := host(name, address, i, topoRaw, m)
			h.Fleet = region
			h.Location = facts.Location{Region: region, Zone: zone, NetworkGroup: rack, Source: facts.SourceHost}
			doc.Hosts = append(doc.Hosts, h)
		}
		cfg.WriteString("}\n\n")
	}
	localities := []string{"prefer", "network_group", "zone", "region", "any"}
	for _, l := range localities {
		fmt.Fprintf(&cfg, "policy %q {\n  group_locality = %q\n}\n\n", l, l)
	}
	for j := 0; j < jobs; j++ {
		nodes, gpus := 1+j%8, []int{1, 2, 4, 8}[j%4]
		fmt.Fprintf(&cfg, "job \"job%02d\" {\n  policy        = policy.%s\n  nodes         = %d\n  gpus_per_node = %d\n  command       = [\"python\", \"train.py\"]\n}\n\n",
			j, localities[j%len(localities)], nodes, gpus)
	}
	if err := atomicfile.Replace(filepath.Join(in.Dir, "main.hcl"), []byte(cfg.String()), 0o644); err != nil {
		return Inputs{}, err
	}
	data, err := json.Marshal(&doc)
	if err != nil {
		return Inputs{}, err
	}
	if err := atomicfile.Replace(in.Facts, data, 0o644); err != nil {
		return Inputs{}, err
	}
	return in, nil
}

// host is the probe of the i-th machine: 8 GPUs, the first 4 busy on
// every fourth machine.
func host(name, address string, i int, topoRaw string, m *topology.Matrix) facts.Host {
	torchrun := "/usr/local/bin/torchrun"
	h := facts.Host{
		Name: name, Address: address, Status: facts.StatusOK,
		Hostname: name, Kernel: "Linux 6.1.0-28-amd64", Arch: "x86_64", ProductName: "DGX-1 with V100-32",
		TorchVersion: "2.5.1+cu124", CUDADriverVersion: "550.127.05", Torchrun: &torchrun,
		FreeGPUs:    []int{},
		TopologyRaw: topoRaw, Topology: m,
		BootID:   fmt.Sprintf("%08x-0c1e-4a7b-9d2f-%012x", i, i),
		ProbedAt: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC),
	}
	for g := range m.GPUs() {
		gpu := facts.GPU{
			Index: g, UUID: fmt.Sprintf("GPU-%08x-%04x-5a1c-8e3d-%012x", i, g, i*8+g), Name: "Tesla V100-SXM2-32GB",
			PCIBusID: fmt.Sprintf("00000000:%02X:00.0", 0x06+g*0x10), MemoryTotalMiB: 32768, Processes: []facts.Process{},
		}
		if i%4 == 0 && g < 4 {
			gpu.Processes = []facts.Process{{PID: 100 + g, UsedMemoryMiB: 1000}}
			gpu.MemoryUsedMiB = 1000
		} else {
			h.FreeGPUs = append(h.FreeGPUs, g)
		}
		h.GPUs = append(h.GPUs, gpu)
	}
	return h
}

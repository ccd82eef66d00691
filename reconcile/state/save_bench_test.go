//go:build unix

package state

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/topology"
)

// applyState is the state an apply of one job of nodes nodes holds once
// its processes started: the job (every node with its reach and process,
// two earlier runs in its history), a created machine per node, and the
// facts of the refresh before it (every host an 8-GPU HGX H100 with its
// recorded `nvidia-smi topo -m`), as apply saves them.
func applyState(tb testing.TB, nodes int) *State {
	tb.Helper()
	raw, err := os.ReadFile("../../testdata/topo/hgx-h100-8x-nv18-gpunumaid-nonic.txt")
	if err != nil {
		tb.Fatal(err)
	}
	m, err := topology.ParseSMI(string(raw))
	if err != nil {
		tb.Fatal(err)
	}
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	s := New()
	s.Lineage = "0e4a9f3c-5f6b-4d7e-8a9b-0c1d2e3f4a5b"
	job := Job{
		Name: "wide",
		Spec: JobSpec{
			Command:  []string{"python", "train.py", "--config", "configs/large.yaml"},
			Env:      map[string]string{"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5", "WANDB_PROJECT": "wide"},
			Launcher: "torchrun", Nodes: nodes, GPUsPerNode: 8, MasterPort: 29500,
			Policy:      PolicySpec{Name: "tight", GroupLocality: "zone", Rank: "pack", OnUnschedulable: "wait", BucketChoice: "best", Regions: []string{"europe-west4"}, Labels: map[string]string{}},
			StopTimeout: Duration(30 * time.Second),
			Lifecycle:   LifecycleSpec{Kind: "batch", Attempts: 3, OnLost: 2, Delay: Duration(10 * time.Second)},
		},
		Status: JobRunning, RunID: "run-0003", MasterAddr: "10.4.0.1", MasterPort: 29500, LaunchedAt: at,
	}
	job.ConfigHash = job.Spec.Hash()
	doc := &facts.Document{Version: facts.Version}
	for i := range nodes {
		name := fmt.Sprintf("cloud-%d", i)
		addr := fmt.Sprintf("10.4.%d.%d", i/250, i%250+1)
		loc := Location{Region: "europe-west4", Zone: "europe-west4-b", NetworkGroup: fmt.Sprintf("c1/b%d", i/16)}
		job.Nodes = append(job.Nodes, Node{
			Rank: i, Host: name, Fleet: "cloud", Address: addr, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7},
			GPUUUIDs: []string{"GPU-" + name + "-0", "GPU-" + name + "-1", "GPU-" + name + "-2", "GPU-" + name + "-3",
				"GPU-" + name + "-4", "GPU-" + name + "-5", "GPU-" + name + "-6", "GPU-" + name + "-7"},
			Location: loc,
			Reach: &Reach{Port: 22, User: "ubuntu", IdentityFiles: []string{"/home/ana/.ssh/id_ed25519"},
				KnownHostsFile: "/home/ana/.ssh/known_hosts", HostKeyCheck: "strict",
				HostKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGvZ1c3m0xq8yq3Yw9l4JtI0c6Vx9kQyJ8m7f5e4d3c2 " + name}},
			Process: &Process{PID: 4000 + i, PGID: 4000 + i, StartTime: 123456 + uint64(i), BootID: fmt.Sprintf("b00t-%d", i),
				RunID: "run-0003", LogPath: "/home/ubuntu/.gpulayer/runs/run-0003/node.log", StartedAt: at},
		})
		s.Machines = append(s.Machines, Machine{Fleet: "cloud", Name: name, Provider: "gcp", Project: "ml-prod",
			SpecHash: "sha256:9f2c", ID: fmt.Sprint(7000000000 + i), Zone: loc.Zone, Region: loc.Region,
			InternalIP: addr, Status: "RUNNING", CreatedAt: at, Physical: &PhysicalHost{Cluster: "c1", Block: fmt.Sprintf("b%d", i/16), SubBlock: fmt.Sprintf("sb%d", i/4), Host: fmt.Sprintf("h%d", i)},
			HostKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGvZ1c3m0xq8yq3Yw9l4JtI0c6Vx9kQyJ8m7f5e4d3c2"}})
		h := facts.Host{Name: name, Fleet: "cloud", Address: addr, Status: facts.StatusOK, Hostname: name,
			Kernel: "Linux 6.8.0-1015-gcp", Arch: "x86_64", ProductName: "a3-highgpu-8g",
			Location:     facts.Location{Region: loc.Region, Zone: loc.Zone, NetworkGroup: loc.NetworkGroup, Source: facts.SourceProvider},
			TorchVersion: "2.5.1+cu124", CUDADriverVersion: "550.90.07", FreeGPUs: []int{},
			TopologyRaw: string(raw), Topology: m, BootID: fmt.Sprintf("b00t-%d", i), ProbedAt: at}
		for g := range 8 {
			h.GPUs = append(h.GPUs, facts.GPU{Index: g, UUID: fmt.Sprintf("GPU-%s-%d", name, g), Name: "NVIDIA H100 80GB HBM3",
				PCIBusID: fmt.Sprintf("00000000:%02X:00.0", 0x18+g), MemoryTotalMiB: 81559, MemoryUsedMiB: 1,
				Processes: []facts.Process{}})
		}
		doc.Hosts = append(doc.Hosts, h)
	}
	for r := range 2 {
		run := Run{RunID: fmt.Sprintf("run-%04d", r+1), LaunchedAt: at.Add(-time.Duration(2-r) * time.Hour), Status: JobFailed, EndReason: "node_failed",
			Message: "node 3 on cloud-3 exited with status 1"}
		for i := range nodes {
			run.Nodes = append(run.Nodes, NodeEnd{Rank: i, Signal: "TERM", EndedAt: at})
		}
		job.History = append(job.History, run)
	}
	s.SetJob(job)
	s.Facts = doc
	return s
}

// BenchmarkSave is one save of the state of an apply of a job of 64 and
// of 1000 nodes, after one node's process changed (what apply saves as
// each node starts), over the version this backend wrote before: the
// saver's steady state. cpu-µs/op is the process's user+system CPU time
// per save (getrusage): what issue 19 measured, and what fsync's waiting
// does not blur. KiB is the size of the document.
func BenchmarkSave(b *testing.B) {
	for _, nodes := range []int{64, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			l := NewLocal(DefaultPath(b.TempDir()))
			s := applyState(b, nodes)
			ctx := context.Background()
			if err := l.Save(ctx, s, 0); err != nil {
				b.Fatal(err)
			}
			fi, err := os.Stat(l.Path())
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			before := cpuTime(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s.Jobs[0].Nodes[i%nodes].Process.StartTime++
				if err := l.Save(ctx, s, s.Serial); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime(b)-before).Microseconds())/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64(fi.Size())/1024, "KiB")
		})
	}
}

func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

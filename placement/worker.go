package placement

import (
	"math/bits"

	"github.com/gpulayer/gpulayer/topology"
)

// Worker is one machine as placement sees it: where it is, what it runs and
// what it has free right now. Schedule only reads workers.
type Worker struct {
	// ID names the worker (its host name); it is the last tie-break of every
	// rank order, so IDs should be unique.
	ID       string
	Location Location
	// LocationTrusted says Location comes from a provider's record of a
	// machine gpulayer created, not from the machine's own claim (ADR-0021
	// security note). It is reported with each placement.
	LocationTrusted bool
	Labels          map[string]string
	// TorchVersion as the probe found it; "" when unknown. Workers with no
	// version form a group of their own: every node of a group shares one
	// value.
	TorchVersion string
	// CUDADriver is the NVIDIA driver version and GPUModel the GPUs' model
	// name, as the probe found them; "" when unknown. A policy that lists
	// them in Compatible keeps each group to one value, as for torch.
	CUDADriver string
	GPUModel   string
	// Matrix is the machine's GPU link matrix; nil when unknown, and then only
	// the GPU count matters.
	Matrix *topology.Matrix
	// GPUs is the machine's GPU count; 0 means Matrix.GPUs().
	GPUs          int
	Free          topology.DeviceSet // GPUs free now
	FreeMemoryMiB int64              // free GPU memory, summed over the free GPUs
	RunningTasks  int
	// NoTorchrun says the machine is known to have no torchrun (its probe
	// found none on the PATH); false when it has one or it is not known.
	// It cannot hold a node of a job that Job.Torchrun marks.
	NoTorchrun bool
}

// gpuCount is the machine's GPU count.
func (w *Worker) gpuCount() int {
	if w.GPUs > 0 {
		return min(w.GPUs, topology.MaxGPUs)
	}
	return w.Matrix.GPUs()
}

// freeSet is Free without indices beyond the machine's GPUs.
func (w *Worker) freeSet() topology.DeviceSet {
	return w.Free & topology.AllDevices(w.gpuCount())
}

// count is the set's size in one instruction (DeviceSet.Len loops; this
// runs once per worker per schedule).
func count(s topology.DeviceSet) int { return bits.OnesCount64(uint64(s)) }

// Job is what placement needs of a job: how many machines and how many GPUs
// on each.
type Job struct {
	Name  string
	Nodes int
	// GPUsPerNode is 0 to MaxGPUs. 0 is a CPU-only job: any worker the
	// policy allows can hold a node, whatever its GPUs (busy, or none), and
	// its placements carry no GPUs. gpulayer counts no CPU or memory, so
	// CPU-only nodes of different jobs may share a machine; one job's nodes
	// are on distinct machines, as for every job.
	GPUsPerNode int
	// Torchrun says each node runs under torchrun, so a worker known to
	// have none (Worker.NoTorchrun) cannot hold one.
	Torchrun bool
}

// MultiNode says the job spans machines, so its GPUs talk over the network
// too and locality between machines matters.
func (j Job) MultiNode() bool { return j.Nodes > 1 }

package placement

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/gpulayer/gpulayer/topology"
	"github.com/gpulayer/gpulayer/topology/topotest"
)

// The GPU pick inside Schedule stays within its budget.

func TestScheduleBoundsTheGPUPickOnAHostileMachine(t *testing.T) {
	// Two equal workers: the GPU pick quality of both breaks the tie, so
	// Schedule searches both hostile matrices, then picks the GPUs of the
	// one it takes.
	ws := []Worker{
		{ID: "h1", Location: loc("eu/eu-1"), TorchVersion: "2.5.1", Matrix: topotest.RandomMatrix(rand.New(rand.NewSource(2)), 64), Free: topology.AllDevices(64)},
		{ID: "h2", Location: loc("eu/eu-1"), TorchVersion: "2.5.1", Matrix: topotest.RandomMatrix(rand.New(rand.NewSource(2)), 64), Free: topology.AllDevices(64)},
	}
	d := Schedule(Job{Name: "train", Nodes: 1, GPUsPerNode: 28}, ws, Policy{})
	if d.Status != StatusPlaced || len(d.Workers) != 1 {
		t.Fatalf("%s: %s", d.Status, d.Summary)
	}
	gpus := d.Workers[0].GPUs
	if len(gpus) != 28 || topology.DeviceSetOf(gpus...).Len() != 28 {
		t.Fatalf("placed on GPUs %v: want 28 distinct", gpus)
	}
	p, _ := topology.PickDevices(ws[0].Matrix, topology.AllDevices(64), 28, topology.PickOptions{})
	topology.OrderLocalRanks(ws[0].Matrix, p.GPUs)
	if !slices.Equal(gpus, p.GPUs) {
		t.Errorf("placed on GPUs %v, the bounded pick takes %v (in local-rank order)", gpus, p.GPUs)
	}
}

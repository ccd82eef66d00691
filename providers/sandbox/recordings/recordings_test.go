package recordings

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpulayer/gpulayer/topology"
)

func TestCopiesEqualTheRepositoryRecordings(t *testing.T) {
	for _, m := range append(Machines(), NVLinkTray()) {
		got := m.Topology()
		if m.Synthetic {
			if m.RecordedAs != "" {
				t.Errorf("%s: synthetic but names recording %s", m.Model, m.RecordedAs)
			}
			continue
		}
		want, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "topo", m.RecordedAs))
		if err != nil {
			t.Fatalf("%s: %v", m.Model, err)
		}
		if got != string(want) {
			t.Errorf("%s: %s differs from testdata/topo/%s", m.Model, m.TopologyFile, m.RecordedAs)
		}
	}
}

func TestEveryEmbeddedFileIsAMachine(t *testing.T) {
	entries, err := files.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, m := range append(Machines(), NVLinkTray()) {
		used[m.TopologyFile] = true
	}
	for _, e := range entries {
		if !used[e.Name()] {
			t.Errorf("%s is embedded but no machine uses it", e.Name())
		}
	}
}

func TestEveryMachineTopologyParsesWithItsGPUCount(t *testing.T) {
	for _, m := range append(Machines(), NVLinkTray()) {
		mx, err := topology.ParseSMI(m.Topology())
		if err != nil {
			t.Errorf("%s: %v", m.Model, err)
			continue
		}
		if mx.GPUs() != m.GPUs {
			t.Errorf("%s: the recording has %d GPUs, the table says %d", m.Model, mx.GPUs(), m.GPUs)
		}
	}
}

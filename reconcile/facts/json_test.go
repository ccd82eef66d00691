package facts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/topology"
)

// A saved facts document reads back to the same hosts, topology included,
// so that a plan can be made offline from a snapshot; and its keys are
// snake_case throughout, as docs/facts.md shows them.
func TestDocumentRoundTripsThroughJSONInSnakeCase(t *testing.T) {
	var hosts []Host
	for _, file := range []string{"dgx-a100-8x-nv12-8nic-mlx5.txt", "gh200-4x-nv6-numa-list-gpunumaid.txt", "h200-1gpu-vm-driver580-ansi-gpunumaid.txt"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "topo", file))
		if err != nil {
			t.Fatal(err)
		}
		m, err := topology.ParseSMI(string(raw))
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, Host{Name: file, Address: "10.0.0.1", Status: StatusOK, GPUs: []GPU{}, FreeGPUs: []int{},
			TopologyRaw: string(raw), Topology: m, Location: Location{Zone: "z", Source: SourceHost},
			ProbedAt: time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)})
	}
	// Torchrun found, known missing, and unknown read back as they were.
	found, none := "/usr/bin/torchrun", ""
	hosts[0].Torchrun, hosts[1].Torchrun = &found, &none
	doc := Document{Version: Version, Hosts: hosts}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"torchrun":"/usr/bin/torchrun"`, `"torchrun":""`, `"links":`, `"nics":`, `"nic_links":`, `"cpu_affinity":`, `"numa_affinity":`, `"gpu_numa_id":`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("the document has no %s key", key)
		}
	}
	for _, key := range []string{`"Links"`, `"NICLinks"`, `"CPUAffinity"`, `"GPUNUMAID"`} {
		if strings.Contains(string(b), key) {
			t.Errorf("the document has a Go field name as a key: %s", key)
		}
	}
	var back Document
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("reading the document back: %v", err)
	}
	if !reflect.DeepEqual(back, doc) {
		t.Errorf("the document read back differs:\n%+v\nwant\n%+v", back.Hosts[0].Topology, doc.Hosts[0].Topology)
	}
}

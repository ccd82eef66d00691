package facts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/gpulayer/gpulayer/topology"
)

// probedHost is a host as a probe of the machine whose topo -m is in
// testdata/topo/file reports it.
func probedHost(t *testing.T, name, file string) Host {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "topo", file))
	if err != nil {
		t.Fatal(err)
	}
	m, err := topology.ParseSMI(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	torchrun := "/usr/bin/torchrun"
	h := Host{Name: name, Address: "10.0.0.1", Status: StatusOK, FreeGPUs: []int{}, Torchrun: &torchrun,
		TopologyRaw: string(raw), Topology: m, Location: Location{Zone: "z", Source: SourceHost},
		ProbedAt: time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)}
	for i := range m.GPUs() {
		h.GPUs = append(h.GPUs, GPU{Index: i, UUID: "GPU-" + name + string(rune('0'+i)), Name: "NVIDIA A100-SXM4-80GB",
			PCIBusID: "00000000:07:00.0", MemoryTotalMiB: 81920, Processes: []Process{}})
		h.FreeGPUs = append(h.FreeGPUs, i)
	}
	return h
}

// A saved document reads back as it was written; hosts of one machine
// model share one topology matrix and one copy of its topo -m text, and
// hosts of another model have their own.
func TestReadFileReadsBackTheDocumentSharingWhatHostsRepeat(t *testing.T) {
	doc := Document{Version: Version, Hosts: []Host{
		probedHost(t, "a1", "dgx-a100-8x-nv12-8nic-mlx5.txt"),
		probedHost(t, "a2", "dgx-a100-8x-nv12-8nic-mlx5.txt"),
		probedHost(t, "g1", "gh200-4x-nv6-numa-list-gpunumaid.txt"),
		{Name: "down", Address: "10.0.0.9", Status: StatusUnreachable, Error: "dial tcp: i/o timeout"},
	}}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "facts.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*back, doc) {
		t.Fatalf("the document read back differs:\n%+v\nwant\n%+v", back.Hosts, doc.Hosts)
	}
	a1, a2, g1 := &back.Hosts[0], &back.Hosts[1], &back.Hosts[2]
	if a1.Topology != a2.Topology {
		t.Error("two hosts of one model have two matrices")
	}
	if a1.Topology == g1.Topology {
		t.Error("hosts of two models share a matrix")
	}
	if back.Hosts[3].Topology != nil {
		t.Error("a host without a matrix was given one")
	}
	if !sameString(a1.TopologyRaw, a2.TopologyRaw) {
		t.Error("two hosts of one model keep two copies of their topo -m")
	}
	if !sameString(a1.GPUs[0].Name, g1.GPUs[0].Name) {
		t.Error("GPUs of one name keep a copy each")
	}
}

// sameString says a and b are one string in memory, not two equal ones.
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// ReadFile refuses what is not a facts document of this version, saying
// which it is and where it went wrong.
func TestReadFileRefusesWhatIsNotAFactsDocumentOfThisVersion(t *testing.T) {
	cases := []struct {
		name, doc, want string
	}{
		{"no version", `{"hosts": []}`, "is not a facts document: it has no version"},
		{"another version", `{"version": 2, "hosts": [{"name": 7}]}`, "is a facts document of version 2; this gpulayer reads version 1"},
		{"broken JSON", `{"version": 1, "hosts": [}`, "is not a facts document: invalid JSON at byte 25"},
		{"trailing bytes", `{"version": 1, "hosts": []} {}`, "is not a facts document: invalid JSON at byte 28"},
		{"a host's name a number", `{"version": 1, "hosts": [{"name": 7}]}`, "is not a facts document"},
		{"an unknown link", `{"version": 1, "hosts": [{"name": "a", "topology": {"links": [["X", "NV99x"]]}}]}`, `within "/hosts/0/topology/links/0/1": unknown link "NV99x"`},
		{"a key twice", `{"version": 1, "version": 1, "hosts": []}`, "duplicate object member name"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".json")
		if err := os.WriteFile(path, []byte(c.doc), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadFile(path)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want one naming the file and saying %q", c.name, err, c.want)
		}
	}
	if _, err := ReadFile(dir); err == nil || !strings.Contains(err.Error(), "not a regular file (a directory)") {
		t.Errorf("a directory: error %v", err)
	}
}

// ReadFileAhead gives what ReadFile gives, the document or the error, and
// the same one each time it is asked.
func TestReadFileAheadGivesWhatReadFileGives(t *testing.T) {
	doc := Document{Version: Version, Hosts: []Host{probedHost(t, "a1", "dgx-a100-8x-nv12-8nic-mlx5.txt")}}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "facts.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	read := ReadFileAhead(path)
	first, err := read()
	if err != nil || !reflect.DeepEqual(*first, doc) {
		t.Fatalf("ReadFileAhead: %v, %v", first, err)
	}
	if again, err := read(); again != first || err != nil {
		t.Fatalf("asked again: %p, %v; want the same document %p", again, err, first)
	}
	missing := filepath.Join(t.TempDir(), "none.json")
	_, want := ReadFile(missing)
	if _, err := ReadFileAhead(missing)(); err == nil || want == nil || err.Error() != want.Error() {
		t.Fatalf("a missing file: %v, want %v", err, want)
	}
}

// Hosts beyond one chunk of decodeHosts read back in their order, in a
// slice of exactly their number; an empty list reads back empty and null
// as none, as by default; and an error in a host past the first chunk
// says which host.
func TestDecodeReadsHostsAcrossChunksIntoASliceOfTheirNumber(t *testing.T) {
	for _, n := range []int{0, 1, hostsChunk, hostsChunk + 1, 2*hostsChunk + 7} {
		doc := Document{Version: Version, Hosts: []Host{}}
		for i := range n {
			doc.Hosts = append(doc.Hosts, Host{Name: "h" + string(rune('a'+i%26)) + strings.Repeat("x", i/26), Address: "10.0.0.1",
				Status: StatusOK, FreeGPUs: []int{i % 8}, ProbedAt: time.Date(2026, 12, 3, 0, 0, i, 0, time.UTC)})
		}
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode("facts.json", b)
		if err != nil {
			t.Fatalf("%d hosts: %v", n, err)
		}
		if !reflect.DeepEqual(*back, doc) {
			t.Errorf("%d hosts: the document read back differs", n)
		}
		if cap(back.Hosts) != n {
			t.Errorf("%d hosts read into a slice of capacity %d", n, cap(back.Hosts))
		}
	}
	back, err := Decode("facts.json", []byte(`{"version":1,"hosts":null}`))
	if err != nil || back.Hosts != nil {
		t.Errorf("hosts null: %v, %#v; want no hosts", err, back)
	}
	hosts := strings.Repeat(`{"name":"h","address":"a","status":"ok","free_gpus":[]},`, hostsChunk+2)
	_, err = Decode("facts.json", []byte(`{"version":1,"hosts":[`+hosts+`{"name":7}]}`))
	if want := "/hosts/" + strconv.Itoa(hostsChunk+2) + "/name"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a bad host past the first chunk: %v; want it at %s", err, want)
	}
}

package factsview

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/reconcile/facts"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func testDocument() *facts.Document {
	at := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	a100 := func(i int, procs ...facts.Process) facts.GPU {
		if procs == nil {
			procs = []facts.Process{}
		}
		return facts.GPU{Index: i, UUID: "GPU-" + string(rune('a'+i)), Name: "NVIDIA A100-SXM4-80GB", MemoryTotalMiB: 81920, Processes: procs}
	}
	return &facts.Document{Version: facts.Version, Hosts: []facts.Host{
		{
			Name: "gpu-01", Address: "127.0.0.1", Status: facts.StatusOK,
			Location:     facts.Location{Region: "europe-west1", Zone: "europe-west1-b", NetworkGroup: "rack-1", Source: facts.SourceHost},
			TorchVersion: "2.5.1+cu124",
			GPUs:         []facts.GPU{a100(0), a100(1, facts.Process{PID: 42, UsedMemoryMiB: 1024}), a100(2), a100(3)},
			FreeGPUs:     []int{0, 2, 3}, ProbedAt: at,
		},
		{
			Name: "gpu-02", Address: "127.0.0.1", Status: facts.StatusOK,
			Location: facts.Location{Region: "europe-west1", Source: facts.SourceFleet},
			GPUs:     []facts.GPU{}, FreeGPUs: []int{},
			Warnings: []string{"nvidia-smi not found: no GPUs", "python3 not found: torch version unknown"}, ProbedAt: at,
		},
		{
			// A hostile machine: its zone and GPU name carry terminal
			// escapes that would clear the screen and retitle the window.
			Name: "gpu-03", Address: "127.0.0.1", Status: facts.StatusOK,
			Location:     facts.Location{Region: "us-central1", Zone: "us-central1-a\x1b[2J\x1b]0;pwned\x07", Source: facts.SourceGCEMetadata},
			TorchVersion: "2.4.1\r+cu121",
			GPUs: []facts.GPU{{Index: 0, Name: "NVIDIA\x1b[31m H100\u202e", Processes: []facts.Process{}},
				{Index: 1, Name: "NVIDIA H100 80GB HBM3", Processes: []facts.Process{}}},
			FreeGPUs: []int{0, 1}, Warnings: []string{"nvidia-smi topo -m: line 3: unknown link \"\x1b[5mNV99\""}, ProbedAt: at,
		},
		{
			Name: "gpu-04", Address: "10.0.0.9", Status: facts.StatusUnreachable,
			Error: "dial tcp 10.0.0.9:22: connect: connection refused",
			GPUs:  []facts.GPU{}, FreeGPUs: []int{}, ProbedAt: at,
			Location: facts.Location{Region: "us-central1", Zone: "us-central1-f", Source: facts.SourceHost},
		},
	}}
}

func TestTableMatchesGolden(t *testing.T) {
	for _, c := range []struct {
		name  string
		color bool
	}{{"table.golden", false}, {"table-color.golden", true}} {
		var out bytes.Buffer
		if err := WriteTable(&out, testDocument(), c.color); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", c.name)
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -update)", err)
		}
		if out.String() != string(want) {
			t.Errorf("%s differs:\n%s\nwant:\n%s", c.name, out.String(), want)
		}
	}
}

func TestTableStripsControlBytesFromMachineText(t *testing.T) {
	var out bytes.Buffer
	if err := WriteTable(&out, testDocument(), false); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"\x1b", "\x07", "\r", "\u202e"} {
		if strings.Contains(out.String(), bad) {
			t.Errorf("table contains %q:\n%s", bad, out.String())
		}
	}
	if !strings.Contains(out.String(), "us-central1-a\uFFFD[2J\uFFFD]0;pwned\uFFFD") {
		t.Errorf("hostile zone not shown sanitized:\n%s", out.String())
	}
}

func TestTableColorsOnlyWhenAsked(t *testing.T) {
	var plain, color bytes.Buffer
	_ = WriteTable(&plain, testDocument(), false)
	_ = WriteTable(&color, testDocument(), true)
	if strings.Contains(plain.String(), "\x1b[") {
		t.Error("escape sequences without colour")
	}
	if !strings.Contains(color.String(), "\x1b[") {
		t.Error("no escape sequences with colour")
	}
}

func TestTableCutsHugeMachineText(t *testing.T) {
	huge := strings.Repeat("\x00", 10<<20) // Sanitize would make it 30 MB
	doc := &facts.Document{Version: facts.Version, Hosts: []facts.Host{{
		Name: "gpu-01", Address: "127.0.0.1", Status: facts.StatusFailed, Error: "probe: " + huge,
		Location: facts.Location{Zone: huge}, TorchVersion: huge,
		GPUs:     []facts.GPU{{Index: 0, Name: "NVIDIA " + huge, Processes: []facts.Process{}}},
		FreeGPUs: []int{}, Warnings: []string{huge},
	}}}
	var out bytes.Buffer
	if err := WriteTable(&out, doc, false); err != nil {
		t.Fatal(err)
	}
	if out.Len() > 32<<10 {
		t.Fatalf("the table of one host is %d bytes", out.Len())
	}
	for _, want := range []string{"1 × NVIDIA \uFFFD\uFFFD", "\uFFFD…  ", "gpu-01: probe: \uFFFD", "\uFFFD…\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
}

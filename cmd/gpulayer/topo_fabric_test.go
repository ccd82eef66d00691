package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/topology"
	"github.com/gpulayer/gpulayer/topology/nvmltopo"
)

func registered(clique uint32, n int) []topology.GPUFabric {
	var out []topology.GPUFabric
	for i := range n {
		out = append(out, topology.GPUFabric{Index: i, State: topology.FabricCompleted, Status: topology.FabricSuccess,
			CliqueID: clique, ClusterUUID: "9f3c21ab-5e0d-4c1b-8a7e-2f6d0c9b1e44"})
	}
	return out
}

func TestTopoShowWithoutFileSaysTheNVLinkDomainNVMLReports(t *testing.T) {
	m := parseFile(t, "../../testdata/topo/hgx-h100-8x-nv18-gpunumaid-nonic.txt")
	for _, c := range []struct {
		name       string
		fabric     fabricReader
		text, json string // in the output; "" for neither line nor field
	}{
		{"domain", func() ([]topology.GPUFabric, error) { return registered(7, 8), nil },
			"NVLink domain: 9f3c21ab:7 (every GPU registered with this multi-node fabric clique)\n",
			`"nvlink_domain": "9f3c21ab-5e0d-4c1b-8a7e-2f6d0c9b1e44:7"`},
		{"unfinished", func() ([]topology.GPUFabric, error) {
			f := registered(7, 8)
			f[3].State, f[3].Status = topology.FabricInProgress, ""
			return f, nil
		}, "NVLink fabric: GPU 0-2,4-7 in NVLink fabric 9f3c21ab-5e0d-4c1b-8a7e-2f6d0c9b1e44:7 but GPU 3 not (state In Progress)",
			`"nvlink_fabric_error": "GPU 0-2,4-7 in NVLink fabric`},
		{"no fabric", func() ([]topology.GPUFabric, error) {
			return []topology.GPUFabric{{State: topology.FabricNotSupported}}, nil
		}, "", ""},
		{"no NVML", func() ([]topology.GPUFabric, error) {
			return nil, fmt.Errorf("%w: built without NVML", nvmltopo.ErrUnavailable)
		}, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, asJSON := range []bool{false, true} {
				streams, _, out, _ := iostreams.Test()
				opts := &topoShowOptions{f: &factory{IO: streams}, json: asJSON, fabric: c.fabric,
					src: topoSource{local: func(context.Context, io.Writer) (*topology.Matrix, error) { return m, nil }}}
				if err := topoShowRun(opts); err != nil {
					t.Fatal(err)
				}
				want := c.text
				if asJSON {
					want = c.json
				}
				got := out.String()
				switch {
				case want != "" && !strings.Contains(got, want):
					t.Errorf("json %v: output does not say %q:\n%s", asJSON, want, got)
				case want == "" && (strings.Contains(got, "NVLink domain") || strings.Contains(got, "NVLink fabric") || strings.Contains(got, "nvlink_")):
					t.Errorf("json %v: output speaks of a fabric there is none of:\n%s", asJSON, got)
				}
			}
		})
	}
}

func TestTopoShowOfAFileAsksNoFabric(t *testing.T) {
	streams, _, out, _ := iostreams.Test()
	opts := &topoShowOptions{f: &factory{IO: streams}, src: topoSource{file: "../../testdata/topo/hgx-h100-8x-nv18-gpunumaid-nonic.txt"},
		fabric: func() ([]topology.GPUFabric, error) {
			t.Error("the fabric read for a FILE's matrix")
			return registered(7, 8), nil
		}}
	if err := topoShowRun(opts); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "NVLink domain") {
		t.Errorf("a FILE's view names this machine's domain:\n%s", out.String())
	}
}

func TestFabricReadGivesUpWhenNVMLHangs(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	hung := fabricReader(func() ([]topology.GPUFabric, error) { <-release; return nil, nil })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if d, err := hung.domain(ctx); d != "" || err == nil || !strings.Contains(err.Error(), "no answer in time") {
		t.Fatalf("domain %q, %v; want no answer in time", d, err)
	}
}

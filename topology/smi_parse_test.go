package topology

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// recordingFacts is what testdata/topo/SOURCES.md says about one recorded
// file.
type recordingFacts struct {
	file string
	gpus int
	// links: "DEFAULT; TOKEN: a-b a-b; TOKEN: ..." (every pair not listed
	// has the default).
	links string
	cpu   []string // per GPU, "" when unknown
	numa  []string // per GPU as printed ("0,5-11"), "" when unknown
	gnid  []int    // per GPU, nil for all unknown
	nics  []string
	// close lists the "gpu:nic" pairs at PIX or PXB; every other GPU↔NIC
	// pair must be farther.
	close []string
	// nicLinks, when set, is every GPU↔NIC link.
	nicLinks [][]string
}

func rep(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func cat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func mlx5(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("mlx5_%d", i)
	}
	return out
}

var dgx1V100Links = "SYS; NV1: 0-1 0-2 1-3 2-6 3-7 4-5 4-6 5-7; NV2: 0-3 0-4 1-2 1-5 2-3 4-7 5-6 6-7"

var recordings = []recordingFacts{
	{file: "2x-a100-pcie-node-mlx5.txt", gpus: 2, links: "NODE", cpu: rep("32-63", 2), numa: rep("1", 2), nics: []string{"mlx5_0"},
		nicLinks: [][]string{{"NODE"}, {"NODE"}}},
	{file: "4x-v100-sxm2-nv1-nv2-mlx5-driver418.txt", gpus: 4, links: "NODE; NV2: 0-1 1-3 2-3; NV1: 0-2", cpu: rep("14-27", 4), numa: rep("", 4),
		nics: mlx5(4), close: []string{"0:0", "0:1", "1:0", "1:1", "2:2", "2:3", "3:2", "3:3"}},
	{file: "dgx-a100-8x-nv12-8nic-mlx5.txt", gpus: 8, links: "NV12", cpu: cat(rep("0-31,64-95", 4), rep("32-63,96-127", 4)), numa: cat(rep("0", 4), rep("1", 4)),
		nics: mlx5(8), close: []string{"0:0", "0:1", "1:0", "1:1", "2:2", "2:3", "3:2", "3:3", "4:4", "4:5", "5:4", "5:5", "6:6", "6:7", "7:6", "7:7"}},
	{file: "8x-rtx4090-pcie-all-sys-8numa.txt", gpus: 8, links: "SYS",
		cpu:  []string{"48-63,176-191", "32-47,160-175", "16-31,144-159", "0-15,128-143", "112-127,240-254", "96-111,224-239", "80-95,208-223", "64-79,192-207"},
		numa: []string{"3", "2", "1", "0", "7", "6", "5", "4"}, gnid: []int{-1, -1, -1, -1, -1, -1, -1, -1}},
	{file: "8x-pcie-all-sys-2numa-tabs-gpunumaid.txt", gpus: 8, links: "SYS", cpu: cat(rep("0-15,32-47", 4), rep("16-31,48-63", 4)), numa: cat(rep("0", 4), rep("1", 4))},
	{file: "hgx-h100-8x-nv18-gpunumaid-nonic.txt", gpus: 8, links: "NV18", cpu: cat(rep("0-47,96-143", 4), rep("48-95,144-191", 4)), numa: cat(rep("0", 4), rep("1", 4))},
	{file: "4x-gpu-phb-soc-mlx4-tabs-tf-gdr.txt", gpus: 4, links: "SYS; PHB: 0-1 2-3", cpu: cat(rep("0-5", 2), rep("6-11", 2)), numa: rep("", 4),
		nics: []string{"mlx4_0"}, nicLinks: [][]string{{"SYS"}, {"SYS"}, {"PHB"}, {"PHB"}}},
	{file: "7x-gtx1070-1080-pix-phb-tabs-leading-ws-stripped.txt", gpus: 7, links: "PHB; PIX: 0-1 0-2 1-2 3-4 3-5 3-6 4-5 4-6 5-6", cpu: rep("0-19", 7), numa: rep("", 7)},
	{file: "7x-gtx10xx-2socket-phb-soc-ansi-tabs.txt", gpus: 7, links: "SYS; PHB: 0-1 0-2 0-3 1-2 1-3 2-3 4-5 4-6 5-6", cpu: cat(rep("0-9,20-29", 4), rep("10-19,30-39", 3)), numa: rep("", 7)},
	{file: "azure-nv12-2x-m60-soc-MANGLED-no-final-newline.txt", gpus: 2, links: "SYS", cpu: rep("0-11", 2), numa: rep("", 2)},
	{file: "azure-nv24-4x-m60-soc-tabs-leading-ws-stripped.txt", gpus: 4, links: "SYS", cpu: rep("0-11", 4), numa: rep("", 4)},
	{file: "3x-rtx-a6000-nv4-pair-ansi-escapes-tabs.txt", gpus: 3, links: "NODE; NV4: 0-1", cpu: rep("0-31,64-95", 3), numa: rep("0", 3)},
	{file: "4x-rtx6000ada-pcie-2socket-node-sys-4nic.txt", gpus: 4, links: "SYS; NODE: 0-1 2-3", cpu: cat(rep("0-31", 2), rep("32-63", 2)), numa: []string{"0", "0", "1", "1"},
		gnid: []int{-1, -1, -1, -1}, nics: mlx5(4),
		nicLinks: [][]string{{"NODE", "NODE", "SYS", "SYS"}, {"NODE", "NODE", "SYS", "SYS"}, {"SYS", "SYS", "NODE", "NODE"}, {"SYS", "SYS", "NODE", "NODE"}}},
	{file: "2x-rtx6000ada-threadripper-phb-2nic.txt", gpus: 2, links: "PHB", cpu: rep("0-23", 2), numa: rep("0", 2), gnid: []int{-1, -1},
		nics: []string{"mlx5_0", "mlx5_1"}, nicLinks: [][]string{{"NODE", "NODE"}, {"NODE", "NODE"}}},
	{file: "2x-gpu-nv2-numa-na-matrix-only.txt", gpus: 2, links: "NV2", cpu: rep("0-23", 2), numa: rep("", 2)},
	{file: "2x-gpu-phb-numa-na-matrix-only.txt", gpus: 2, links: "PHB", cpu: rep("0-11", 2), numa: rep("", 2)},
	{file: "dgx-a100-8x-nv12-tabwidth6-matrix-only.txt", gpus: 8, links: "NV12", cpu: cat(rep("0-23", 4), rep("24-47", 4)), numa: cat(rep("0", 4), rep("1", 4))},
	{file: "dgx1-v100-8x-nv1-nv2-mlx5-driver440.txt", gpus: 8, links: dgx1V100Links, cpu: cat(rep("0-11,24-35", 4), rep("12-23,36-47", 4)), numa: rep("", 8),
		nics: []string{"mlx5_0"}, close: []string{"2:0", "3:0"}, nicLinks: [][]string{{"NODE"}, {"NODE"}, {"PIX"}, {"PIX"}, {"SYS"}, {"SYS"}, {"SYS"}, {"SYS"}}},
	{file: "dgx1-v100-8x-nv1-nv2-mlx5-driver440-CRLF.txt", gpus: 8, links: dgx1V100Links, cpu: cat(rep("0-11,24-35", 4), rep("12-23,36-47", 4)), numa: rep("", 8),
		nics: []string{"mlx5_0"}, close: []string{"2:0", "3:0"}, nicLinks: [][]string{{"NODE"}, {"NODE"}, {"PIX"}, {"PIX"}, {"SYS"}, {"SYS"}, {"SYS"}, {"SYS"}}},
	{file: "v100-8x-nv1-nv2-2mlx5-numa-MANGLED-mixed-tabs.txt", gpus: 8, links: "SYS; NV1: 0-1 0-3 1-2 2-5 3-4 4-7 5-6 6-7; NV2: 0-2 0-7 1-3 1-6 2-3 4-5 4-6 5-7",
		cpu: cat(rep("0-23,48-71", 4), rep("24-47,72-95", 4)), numa: cat(rep("0", 4), rep("1", 4)),
		nics: mlx5(2), close: []string{"2:0", "3:0", "6:1", "7:1"}},
	{file: "gh200-4x-nv6-numa-list-gpunumaid.txt", gpus: 4, links: "NV6", cpu: []string{"0-71", "72-143", "144-215", "216-287"},
		numa: []string{"0,5-11", "1,13-19", "2,21-27", "3,29-35"}, gnid: []int{4, 12, 20, 28}},
	{file: "dgx-spark-gb10-1gpu-single.txt", gpus: 1, links: "X", cpu: []string{"0-19"}, numa: []string{"0"}, gnid: []int{-1}},
	{file: "h200-1gpu-vm-driver580-ansi-gpunumaid.txt", gpus: 1, links: "X", cpu: []string{"0-15"}, numa: []string{"0"}, gnid: []int{-1}},
	{file: "2x-rtx2080ti-pix-container.txt", gpus: 2, links: "PIX", cpu: rep("24-47,72-95", 2), numa: rep("1", 2), gnid: []int{-1, -1}},
	{file: "5x-mixed-gpu-pcie-sys-phb-node-2numa.txt", gpus: 5, links: "NODE; SYS: 0-1 0-2 0-3 0-4; PHB: 1-2 3-4",
		cpu: cat([]string{"8-15,24-31"}, rep("0-7,16-23", 4)), numa: []string{"1", "0", "0", "0", "0"}},
	{file: "hgx-h200-8x-nv18-10nic-raw-tabs.txt", gpus: 8, links: "NV18", cpu: cat(rep("0-63,128-191", 4), rep("64-127,192-255", 4)), numa: cat(rep("0", 4), rep("1", 4)),
		nics: mlx5(10), close: []string{"0:3", "1:5", "2:4", "3:0", "3:1", "3:2", "4:7", "5:9", "6:8", "7:6"}},
	{file: "azure-nc96ads-a100v4-4x-a100pcie-nv12-pairs-4numa-matrix-only.txt", gpus: 4, links: "SYS; NV12: 0-1 2-3",
		cpu: []string{"0-23", "24-47", "48-71", "72-95"}, numa: []string{"0", "1", "2", "3"}},
}

// expectedLinks expands a recordingFacts.links spec into a full matrix of
// canonical tokens.
func expectedLinks(t *testing.T, n int, spec string) [][]string {
	t.Helper()
	parts := strings.Split(spec, ";")
	out := make([][]string, n)
	for i := range out {
		out[i] = rep(strings.TrimSpace(parts[0]), n)
		out[i][i] = "X"
	}
	for _, p := range parts[1:] {
		tok, pairs, ok := strings.Cut(p, ":")
		if !ok {
			t.Fatalf("bad links spec %q", spec)
		}
		for _, pair := range strings.Fields(pairs) {
			var a, b int
			if _, err := fmt.Sscanf(pair, "%d-%d", &a, &b); err != nil {
				t.Fatalf("bad pair %q in %q", pair, spec)
			}
			out[a][b], out[b][a] = strings.TrimSpace(tok), strings.TrimSpace(tok)
		}
	}
	return out
}

func readRecording(t testing.TB, dir, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseSMIReadsEveryRecordingToItsFacts(t *testing.T) {
	for _, f := range recordings {
		t.Run(strings.TrimSuffix(f.file, ".txt"), func(t *testing.T) {
			m, err := ParseSMI(readRecording(t, "../testdata/topo", f.file))
			if err != nil {
				t.Fatal(err)
			}
			if m.GPUs() != f.gpus {
				t.Fatalf("%d GPUs, want %d", m.GPUs(), f.gpus)
			}
			want := expectedLinks(t, f.gpus, f.links)
			for i := 0; i < f.gpus; i++ {
				for j := 0; j < f.gpus; j++ {
					if got := m.Links[i][j].String(); got != want[i][j] {
						t.Errorf("GPU%d-GPU%d = %s, want %s", i, j, got, want[i][j])
					}
				}
			}
			if !reflect.DeepEqual(m.CPUAffinity, f.cpu) {
				t.Errorf("CPU affinity %q, want %q", m.CPUAffinity, f.cpu)
			}
			for i := 0; i < f.gpus; i++ {
				var want NUMASet
				if f.numa[i] != "" {
					want, err = parseIDList(f.numa[i], maxNUMANode)
					if err != nil {
						t.Fatal(err)
					}
				}
				if !reflect.DeepEqual(m.NUMAAffinity[i], want) {
					t.Errorf("GPU%d NUMA %v, want %v (%q)", i, m.NUMAAffinity[i], want, f.numa[i])
				}
			}
			wantGNID := f.gnid
			if wantGNID == nil {
				wantGNID = make([]int, f.gpus)
				for i := range wantGNID {
					wantGNID[i] = -1
				}
			}
			if !reflect.DeepEqual(m.GPUNUMAID, wantGNID) {
				t.Errorf("GPU NUMA ID %v, want %v", m.GPUNUMAID, wantGNID)
			}
			if len(m.NICs) != len(f.nics) || len(f.nics) > 0 && !reflect.DeepEqual(m.NICs, f.nics) {
				t.Errorf("NICs %q, want %q", m.NICs, f.nics)
			}
			if f.nicLinks != nil {
				for g := range f.nicLinks {
					for n, w := range f.nicLinks[g] {
						if got := m.NICLinks[g][n].String(); got != w {
							t.Errorf("GPU%d-%s = %s, want %s", g, f.nics[n], got, w)
						}
					}
				}
			}
			close := map[string]bool{}
			for _, c := range f.close {
				close[c] = true
			}
			for g := 0; g < f.gpus; g++ {
				for n := range m.NICs {
					l := m.NICLinks[g][n]
					isClose := l.Kind == LinkPIX || l.Kind == LinkPXB
					if isClose != close[fmt.Sprintf("%d:%d", g, n)] {
						t.Errorf("GPU%d-%s = %s, but SOURCES.md says PIX/PXB: %v", g, m.NICs[n], l, !isClose)
					}
				}
			}
		})
	}
}

func TestEveryRecordingHasFacts(t *testing.T) {
	files, err := filepath.Glob("../testdata/topo/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range recordings {
		have[f.file] = true
	}
	for _, f := range files {
		if !have[filepath.Base(f)] {
			t.Errorf("%s has no facts in the recordings table", filepath.Base(f))
		}
	}
	if len(files) != len(recordings) {
		t.Errorf("%d recordings on disk, %d in the table", len(files), len(recordings))
	}
}

func TestParseSMIReadsFormatsBeyondTheRecordings(t *testing.T) {
	cases := []struct {
		name string
		text string
		want func(t *testing.T, m *Matrix)
	}{
		{
			name: "empty affinity cell goes by column",
			text: "        GPU0    GPU1    CPU Affinity    NUMA Affinity   GPU NUMA ID\n" +
				"GPU0     X      PHB                     0               N/A\n" +
				"GPU1    PHB      X      0-11            N/A             2\n",
			want: func(t *testing.T, m *Matrix) {
				if m.CPUAffinity[0] != "" || !reflect.DeepEqual(m.NUMAAffinity[0], NUMASet{0}) || m.GPUNUMAID[0] != -1 {
					t.Errorf("GPU0: cpu %q numa %v gnid %d", m.CPUAffinity[0], m.NUMAAffinity[0], m.GPUNUMAID[0])
				}
				if m.CPUAffinity[1] != "0-11" || m.NUMAAffinity[1] != nil || m.GPUNUMAID[1] != 2 {
					t.Errorf("GPU1: cpu %q numa %v gnid %d", m.CPUAffinity[1], m.NUMAAffinity[1], m.GPUNUMAID[1])
				}
			},
		},
		{
			name: "raw tabs with an empty cell in the middle",
			text: "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n" +
				"GPU0\t X \tNV4\t\t\t1\t\tN/A\n" +
				"GPU1\tNV4\t X \t0-7\t\t1\t\tN/A\n",
			want: func(t *testing.T, m *Matrix) {
				if m.CPUAffinity[0] != "" || !reflect.DeepEqual(m.NUMAAffinity[0], NUMASet{1}) {
					t.Errorf("GPU0: cpu %q numa %v", m.CPUAffinity[0], m.NUMAAffinity[0])
				}
				if m.CPUAffinity[1] != "0-7" || !reflect.DeepEqual(m.NUMAAffinity[1], NUMASet{1}) {
					t.Errorf("GPU1: cpu %q numa %v", m.CPUAffinity[1], m.NUMAAffinity[1])
				}
			},
		},
		{
			name: "unknown future column is skipped",
			text: "        GPU0    GPU1    CPU Affinity    NUMA Affinity   GPU NUMA ID     Fabric Clique\n" +
				"GPU0     X      NV18    0-47            0               N/A             7\n" +
				"GPU1    NV18     X      0-47            0               N/A             7\n",
			want: func(t *testing.T, m *Matrix) {
				if m.Links[0][1] != NV(18) || m.CPUAffinity[1] != "0-47" || !reflect.DeepEqual(m.NUMAAffinity[1], NUMASet{0}) {
					t.Errorf("got %v %q %v", m.Links[0][1], m.CPUAffinity[1], m.NUMAAffinity[1])
				}
			},
		},
		{
			name: "N/A link cell and other NIC names",
			text: "$ nvidia-smi topo -m\n" +
				"\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n" +
				"GPU0\t X \tSYS\tPIX\tN/A\tN/A\tN/A\t\tN/A\n" +
				"GPU1\tSYS\t X \tSYS\tN/A\tN/A\tN/A\t\tN/A\n" +
				"NIC0\tPIX\tSYS\t X \tSYS\n" +
				"NIC1\tN/A\tN/A\tSYS\t X \n\n" +
				"NIC Legend:\n\n  NIC0: bnxt_re0\n  NIC1: ib_bond_0\n",
			want: func(t *testing.T, m *Matrix) {
				if !reflect.DeepEqual(m.NICs, []string{"bnxt_re0", "ib_bond_0"}) {
					t.Errorf("NICs %q", m.NICs)
				}
				if m.NICLinks[0][0] != PIX || m.NICLinks[0][1].Kind != LinkUnknown {
					t.Errorf("NIC links %v", m.NICLinks[0])
				}
				if m.CPUAffinity[0] != "" || m.NUMAAffinity[0] != nil {
					t.Errorf("GPU0 affinity %q %v", m.CPUAffinity[0], m.NUMAAffinity[0])
				}
			},
		},
		{
			name: "BOM and no-break spaces from a web page",
			text: "\ufeff\u00a0\u00a0GPU0\u00a0\u00a0GPU1\u00a0\u00a0CPU\u00a0Affinity\u00a0\u00a0NUMA\u00a0Affinity\n" +
				"GPU0\u00a0\u00a0X\u00a0\u00a0\u00a0NV12\u00a0\u00a00-23\u00a0\u00a0\u00a00\n" +
				"GPU1\u00a0\u00a0NV12\u00a0\u00a0X\u00a0\u00a0\u00a00-23\u00a0\u00a0\u00a00\n",
			want: func(t *testing.T, m *Matrix) {
				if m.GPUs() != 2 || m.Links[0][1] != NV(12) || m.CPUAffinity[1] != "0-23" || !reflect.DeepEqual(m.NUMAAffinity[1], NUMASet{0}) {
					t.Errorf("got %d GPUs, %v, %q, %v", m.GPUs(), m.Links[0][1], m.CPUAffinity[1], m.NUMAAffinity[1])
				}
			},
		},
		{
			name: "CR line ends",
			text: "\tGPU0\tGPU1\tCPU Affinity\r" + "GPU0\t X \tPIX\t0-7\r" + "GPU1\tPIX\t X \t0-7\r",
			want: func(t *testing.T, m *Matrix) {
				if m.GPUs() != 2 || m.Links[1][0] != PIX || m.CPUAffinity[0] != "0-7" {
					t.Errorf("got %d GPUs, %v, %q", m.GPUs(), m.Links[1][0], m.CPUAffinity[0])
				}
			},
		},
		{
			name: "shell prompt after a matrix-only copy",
			text: "$ nvidia-smi topo -m\n        GPU0    GPU1    CPU Affinity    NUMA Affinity\n" +
				"GPU0     X      NV2     0-23            N/A\n" +
				"GPU1    NV2      X      0-23            N/A\n" +
				"user@host:~$ exit\n",
			want: func(t *testing.T, m *Matrix) {
				if m.GPUs() != 2 || m.Links[0][1] != NV(2) || m.CPUAffinity[1] != "0-23" {
					t.Errorf("got %d GPUs, %v, %q", m.GPUs(), m.Links[0][1], m.CPUAffinity[1])
				}
			},
		},
		{
			name: "more than ten GPUs and old-style NIC names",
			text: func() string {
				var b strings.Builder
				b.WriteString("\t")
				for i := 0; i < 12; i++ {
					fmt.Fprintf(&b, "GPU%d\t", i)
				}
				b.WriteString("mlx5_10\tCPU Affinity\tNUMA Affinity\n")
				for i := 0; i < 12; i++ {
					fmt.Fprintf(&b, "GPU%d\t", i)
					for j := 0; j < 12; j++ {
						if i == j {
							b.WriteString(" X \t")
						} else {
							b.WriteString("NV18\t")
						}
					}
					fmt.Fprintf(&b, "PXB\t0-15\t%d\n", i/6)
				}
				b.WriteString("mlx5_10\t" + strings.Repeat("PXB\t", 12) + " X \n")
				return b.String()
			}(),
			want: func(t *testing.T, m *Matrix) {
				if m.GPUs() != 12 || m.Links[11][3] != NV(18) || m.NICs[0] != "mlx5_10" || !reflect.DeepEqual(m.NUMAAffinity[11], NUMASet{1}) {
					t.Errorf("got %d GPUs, %v, %q, %v", m.GPUs(), m.Links[11][3], m.NICs, m.NUMAAffinity[11])
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := ParseSMI(c.text)
			if err != nil {
				t.Fatal(err)
			}
			c.want(t, m)
		})
	}
}

func TestParseSMIRejectsDamagedInputWithTheLine(t *testing.T) {
	const head = "        GPU0    GPU1    CPU Affinity    NUMA Affinity\n"
	cases := []struct {
		name, text string
		line       int
		says       string
	}{
		{"empty", "", 1, "no header naming GPU0"},
		{"not topo output", "Mon Nov 30 12:00:00 2026\n+-----+\n", 1, "no header naming GPU0"},
		{"header only", head, 2, "expected a row GPU0"},
		{"unknown link", head + "GPU0     X      NVx     0-11    0\nGPU1    NVx      X      0-11    0\n", 2, `unknown link "NVx"`},
		{"missing cell", head + "GPU0     X      0-11    0\nGPU1    PHB      X      0-11    0\n", 2, `unknown link "0-11"`},
		{"short row", head + "GPU0     X      PHB     0-11    0\nGPU1    PHB\n", 3, "has 1 link cells, expected 2"},
		{"diagonal", head + "GPU0    PHB     PHB     0-11    0\nGPU1    PHB      X      0-11    0\n", 2, "expected X"},
		{"asymmetric", head + "GPU0     X      PHB     0-11    0\nGPU1    PIX      X      0-11    0\n", 3, "symmetric"},
		{"row without column", head + "GPU0     X      PHB     0-11    0\nGPU1    PHB      X      0-11    0\nGPU2    PHB     PHB      X\n", 4, "row GPU2 has no column"},
		{"column without row", "        GPU0    GPU1    GPU2    CPU Affinity\nGPU0     X      PHB     PHB     0-11\nGPU1    PHB      X      PHB     0-11\n", 1, "column GPU2 has no row"},
		{"gap in GPU numbers", "        GPU0    GPU2\nGPU0     X      PHB\nGPU2    PHB      X\n", 1, "expected a column GPU1"},
		{"bad NUMA", head + "GPU0     X      PHB     0-11    1-\nGPU1    PHB      X      0-11    0\n", 2, "NUMA Affinity"},
		{"bad CPU list", head + "GPU0     X      PHB     0-11x   1\nGPU1    PHB      X      0-11    0\n", 2, "CPU Affinity"},
		{"backwards range", head + "GPU0     X      PHB     11-0    1\nGPU1    PHB      X      0-11    0\n", 2, "backwards"},
		{"huge NUMA node", head + "GPU0     X      PHB     0-11    999999999\nGPU1    PHB      X      0-11    0\n", 2, "NUMA Affinity"},
		{"too many cells", head + "GPU0     X      PHB     0-11    0   7   8\nGPU1    PHB      X      0-11    0\n", 2, "expected at most 2"},
		{"damaged row label", head + "GPU0     X      PHB     0-11    0\nGPUX    PHB      X      0-11    0\n", 3, "row GPUX has no column"},
		{"duplicate row", head + "GPU0     X      PHB     0-11    0\nGPU0     X      PHB     0-11    0\n", 3, "second row labelled GPU0"},
		{"long damaged cell is clipped", head + "GPU0     X      PHB     0-11    " + strings.Repeat("7-", 500) + "\nGPU1    PHB      X      0-11    0\n", 2, `NUMA Affinity "7-7-7-7-7-7-7-7-7-7-7-7-7-7-7-7-7-7-7..."`},
		{"bad GPU NUMA ID", "        GPU0    CPU Affinity    NUMA Affinity   GPU NUMA ID\nGPU0     X      0-19    0               four\n", 2, "GPU NUMA ID"},
		{"more GPUs than a DeviceSet holds", pairedSMIText(MaxGPUs + 1), 1, "65 GPUs: at most 64 GPUs per machine are supported"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := ParseSMI(c.text)
			if err == nil {
				t.Fatalf("parsed as %+v, want an error", m)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T %v is not a *ParseError", err, err)
			}
			if pe.Line != c.line || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("error %q, want line %d saying %q", err, c.line, c.says)
			}
			if len(err.Error()) > 300 {
				t.Fatalf("error is %d bytes long: %.80q...", len(err.Error()), err)
			}
		})
	}
}

// TestParseSMIDamagedRecordingsFailCleanly cuts, drops and corrupts lines
// of every recording: each variant must parse or fail with a line number
// inside the input, never panic.
func TestParseSMIDamagedRecordingsFailCleanly(t *testing.T) {
	for _, f := range recordings {
		text := readRecording(t, "../testdata/topo", f.file)
		lines := strings.SplitAfter(text, "\n")
		var variants []string
		for i := range lines {
			variants = append(variants, strings.Join(lines[:i], ""))                               // cut after line i
			variants = append(variants, strings.Join(lines[:i], "")+strings.Join(lines[i+1:], "")) // drop line i
			for _, cut := range []int{1, 3, 6} {
				if len(lines[i]) > cut {
					l := lines[i][:len(lines[i])-cut] // truncate line i
					variants = append(variants, strings.Join(lines[:i], "")+l+strings.Join(lines[i+1:], ""))
				}
			}
		}
		nLines := len(lines) + 1
		for _, v := range variants {
			m, err := ParseSMI(v)
			if err != nil {
				var pe *ParseError
				if !errors.As(err, &pe) || pe.Line < 1 || pe.Line > nLines {
					t.Fatalf("%s: error %v has no line inside the input", f.file, err)
				}
				continue
			}
			if m.GPUs() < 1 || len(m.NUMAAffinity) != m.GPUs() {
				t.Fatalf("%s: parsed a damaged variant into an inconsistent matrix", f.file)
			}
		}
	}
}

// pairedSMIText is `nvidia-smi topo -m` output of n GPUs joined in NV4
// pairs (0-1, 2-3, ...), SYS otherwise.
func pairedSMIText(n int) string {
	var b strings.Builder
	for j := 0; j < n; j++ {
		fmt.Fprintf(&b, "\tGPU%d", j)
	}
	b.WriteString("\tCPU Affinity\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "GPU%d", i)
		for j := 0; j < n; j++ {
			switch {
			case i == j:
				b.WriteString("\t X ")
			case i/2 == j/2:
				b.WriteString("\tNV4")
			default:
				b.WriteString("\tSYS")
			}
		}
		b.WriteString("\t0-7\n")
	}
	return b.String()
}

func TestParseSMIReadsAMachineOfMaxGPUsWithEveryIsland(t *testing.T) {
	m, err := ParseSMI(pairedSMIText(MaxGPUs))
	if err != nil {
		t.Fatal(err)
	}
	islands := m.NVLinkIslands()
	if m.GPUs() != MaxGPUs || len(islands) != MaxGPUs/2 {
		t.Fatalf("%d GPUs, %d NVLink islands: want %d and %d", m.GPUs(), len(islands), MaxGPUs, MaxGPUs/2)
	}
	for k, is := range islands {
		if is != DeviceSetOf(2*k, 2*k+1) {
			t.Fatalf("island %d is %v, want GPU%d-%d", k, is.Indices(), 2*k, 2*k+1)
		}
	}
	if _, err := PrepareMatrix(m); err != nil {
		t.Fatalf("PrepareMatrix refuses what ParseSMI reads: %v", err)
	}
}

func TestEveryReaderStatesTheGPULimitTheSameWay(t *testing.T) {
	want := CheckGPUCount(MaxGPUs + 1)
	if want == nil || CheckGPUCount(MaxGPUs) != nil {
		t.Fatalf("CheckGPUCount(%d) = %v, CheckGPUCount(%d) = %v", MaxGPUs+1, want, MaxGPUs, CheckGPUCount(MaxGPUs))
	}
	_, parseErr := ParseSMI(pairedSMIText(MaxGPUs + 1))
	big := &Matrix{Links: make([][]Link, MaxGPUs+1)}
	_, prepErr := PrepareMatrix(big)
	_, pickErr := PickDevices(big, AllDevices(MaxGPUs), 2, PickOptions{})
	for name, err := range map[string]error{"ParseSMI": parseErr, "PrepareMatrix": prepErr, "PickDevices": pickErr} {
		if err == nil || !strings.HasSuffix(err.Error(), want.Error()) {
			t.Errorf("%s: %v, want it to end %q", name, err, want)
		}
	}
}

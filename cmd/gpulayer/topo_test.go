package main

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/topology"
)

// topoFiles are the recorded and synthetic topologies.
func topoFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{"../../testdata/topo", "../../testdata/topo-synthetic"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, files...)
	}
	if len(out) < 28 {
		t.Fatalf("found %d topology files", len(out))
	}
	return out
}

func parseFile(t *testing.T, path string) *topology.Matrix {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := topology.ParseSMI(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// runCLI runs one gpulayer command line and returns its exit code, stdout
// and stderr.
func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	io, in, out, errOut := iostreams.Test()
	in.WriteString(stdin)
	code := run(args, io)
	return code, out.String(), errOut.String()
}

func TestTopoShowJSONOnEveryRecording(t *testing.T) {
	for _, path := range topoFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			code, out, errOut := runCLI(t, "", "topo", "show", path, "--json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var got topoShowJSON
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatal(err)
			}
			m := parseFile(t, path)
			n := m.GPUs()
			if got.GPUs != n || len(got.Links) != n || len(got.GPUNICLinks) != n || len(got.NUMAAffinity) != n || len(got.CPUAffinity) != n || len(got.GPUNUMAID) != n {
				t.Fatalf("sizes do not match %d GPUs: %s", n, out)
			}
			if got.NICs == nil || !reflect.DeepEqual(got.NICs, append([]string{}, m.NICs...)) {
				t.Errorf("nics %q, want %q", got.NICs, m.NICs)
			}
			for i := 0; i < n; i++ {
				for j := 0; j < n; j++ {
					tok := got.Links[i][j]
					if (i == j) != (tok == "X") || tok == "SOC" || tok != linkToken(m.Links[i][j]) {
						t.Errorf("links[%d][%d] = %q, matrix says %s", i, j, tok, m.Links[i][j])
					}
				}
				if len(got.GPUNICLinks[i]) != len(m.NICs) {
					t.Errorf("gpu_nic_links[%d] has %d entries, want %d", i, len(got.GPUNICLinks[i]), len(m.NICs))
				}
				if (got.NUMAAffinity[i] == nil) != (m.NUMAAffinity[i] == nil) || got.NUMAAffinity[i] != nil && *got.NUMAAffinity[i] != m.NUMAAffinity[i].String() {
					t.Errorf("numa_affinity[%d] = %v, want %v", i, got.NUMAAffinity[i], m.NUMAAffinity[i])
				}
				if (got.CPUAffinity[i] == nil) != (m.CPUAffinity[i] == "") || got.CPUAffinity[i] != nil && *got.CPUAffinity[i] != m.CPUAffinity[i] {
					t.Errorf("cpu_affinity[%d] = %v, want %q", i, got.CPUAffinity[i], m.CPUAffinity[i])
				}
				if (got.GPUNUMAID[i] == nil) != (m.GPUNUMAID[i] < 0) {
					t.Errorf("gpu_numa_id[%d] = %v, want %d", i, got.GPUNUMAID[i], m.GPUNUMAID[i])
				}
			}
			// Nulls are written as null, not dropped.
			if !strings.Contains(out, `"numa_affinity"`) || !strings.Contains(out, `"gpu_numa_id"`) {
				t.Errorf("missing keys: %s", out)
			}
		})
	}
}

func TestTopoPickJSONOnEveryRecording(t *testing.T) {
	for _, path := range topoFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			m := parseFile(t, path)
			n := m.GPUs()
			busy := []string{}
			free := topology.AllDevices(n)
			if n > 2 {
				busy, free = []string{"--busy", "1"}, free&^topology.DeviceSetOf(1)
			}
			for k := 0; k <= free.Len(); k++ {
				for _, multi := range []bool{false, true} {
					args := append([]string{"topo", "pick", path, "--count", fmt.Sprint(k), "--json"}, busy...)
					if multi {
						args = append(args, "--multi-node")
					}
					code, out, errOut := runCLI(t, "", args...)
					if code != 0 {
						t.Fatalf("%v: exit %d: %s", args, code, errOut)
					}
					var got topoPickJSON
					if err := json.Unmarshal([]byte(out), &got); err != nil {
						t.Fatal(err)
					}
					want, err := topology.PickDevices(m, free, k, topology.PickOptions{MultiNode: multi})
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got.GPUs, want.GPUs) || got.Total != want.Total || got.Cross != want.Cross ||
						got.NUMANodes != want.NUMANodes || got.NICLocal != want.NICLocal || got.Count != k || got.MultiNode != multi {
						t.Fatalf("%v: %s, want %+v", args, out, want)
					}
					if (got.Bottleneck == nil) != (k < 2) || got.Bottleneck != nil && *got.Bottleneck != want.Bottleneck.String() {
						t.Fatalf("%v: bottleneck %v, want %v", args, got.Bottleneck, want.Bottleneck)
					}
					if !got.Optimal || !want.Optimal {
						t.Fatalf("%v: optimal %v, pick %v: every recording is picked exactly", args, got.Optimal, want.Optimal)
					}
					if len(got.FreeAfter) != free.Len()-k || got.FreeAfter == nil || got.Busy == nil {
						t.Fatalf("%v: free_after %v, busy %v", args, got.FreeAfter, got.Busy)
					}
				}
			}
		})
	}
}

func TestTopoHumanViewsMatchGoldenFiles(t *testing.T) {
	cases := []struct {
		golden string
		args   []string
	}{
		{"topo/show-dgx-a100-8nic.golden", []string{"topo", "show", "../../testdata/topo/dgx-a100-8x-nv12-8nic-mlx5.txt"}},
		{"topo/show-dgx1-v100.golden", []string{"topo", "show", "../../testdata/topo/dgx1-v100-8x-nv1-nv2-mlx5-driver440.txt"}},
		{"topo/show-azure-nc96ads-pairs.golden", []string{"topo", "show", "../../testdata/topo/azure-nc96ads-a100v4-4x-a100pcie-nv12-pairs-4numa-matrix-only.txt"}},
		{"topo/show-gh200.golden", []string{"topo", "show", "../../testdata/topo/gh200-4x-nv6-numa-list-gpunumaid.txt"}},
		{"topo/show-5x-mixed.golden", []string{"topo", "show", "../../testdata/topo/5x-mixed-gpu-pcie-sys-phb-node-2numa.txt"}},
		{"topo/pick-dgx1-gpu0-busy.golden", []string{"topo", "pick", "../../testdata/topo/dgx1-v100-8x-nv1-nv2-mlx5-driver440.txt", "--count", "4", "--busy", "0"}},
		{"topo/pick-h200-multi-node.golden", []string{"topo", "pick", "../../testdata/topo/hgx-h200-8x-nv18-10nic-raw-tabs.txt", "--count", "2", "--busy", "3,0", "--multi-node"}},
		{"topo/pick-single-gpu.golden", []string{"topo", "pick", "../../testdata/topo/azure-nc96ads-a100v4-4x-a100pcie-nv12-pairs-4numa-matrix-only.txt", "--count", "1", "--busy", "0"}},
	}
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			code, out, errOut := runCLI(t, "", c.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if strings.Contains(out, "\x1b") {
				t.Fatal("colour escapes without a terminal")
			}
			assertGolden(t, c.golden, out)
		})
	}
}

var ansiEscape = regexp.MustCompile("\x1b\\[[0-9;]*m")

func TestTopoColourViewIsThePlainViewStyled(t *testing.T) {
	r := lipgloss.NewRenderer(os.Stdout)
	r.SetColorProfile(termenv.ANSI256)
	colour := colorTopoStyles(r)
	for _, path := range topoFiles(t) {
		m := parseFile(t, path)
		styled := renderTopoShow(m, colour)
		if !strings.Contains(styled, "\x1b[") {
			t.Fatalf("%s: no styling in the colour view", path)
		}
		if plain := renderTopoShow(m, plainTopoStyles()); ansiEscape.ReplaceAllString(styled, "") != plain {
			t.Fatalf("%s: colour view differs from the plain view in text:\n%s\n%s", path, styled, plain)
		}
	}
}

func TestTopoSummaryLine(t *testing.T) {
	cases := map[string]string{
		"dgx-a100-8x-nv12-8nic-mlx5.txt":                                    "8 GPUs, all NV12; NUMA 0: GPU0-3, NUMA 1: GPU4-7; 8 NICs",
		"azure-nc96ads-a100v4-4x-a100pcie-nv12-pairs-4numa-matrix-only.txt": "4 GPUs, NV12 x2, SYS x4; NVLink islands GPU0-1, GPU2-3; NUMA 0: GPU0, NUMA 1: GPU1, NUMA 2: GPU2, NUMA 3: GPU3; no NICs",
		"dgx-spark-gb10-1gpu-single.txt":                                    "1 GPU; NUMA 0: GPU0; no NICs",
		"4x-gpu-phb-soc-mlx4-tabs-tf-gdr.txt":                               "4 GPUs, PHB x2, SYS x4; NUMA unknown; 1 NIC",
	}
	for file, want := range cases {
		if got := topoSummary(parseFile(t, "../../testdata/topo/"+file)); got != want {
			t.Errorf("%s:\n got %q\nwant %q", file, got, want)
		}
	}
}

func TestTopoReadsStdin(t *testing.T) {
	b, err := os.ReadFile("../../testdata/topo/dgx1-v100-8x-nv1-nv2-mlx5-driver440-CRLF.txt")
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, string(b), "topo", "pick", "-", "--count", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, `"bottleneck": "NV2"`) {
		t.Fatalf("pick from stdin: %s", out)
	}
}

func TestTopoBadInputExitsOneWithTheReason(t *testing.T) {
	dir := t.TempDir()
	damaged := filepath.Join(dir, "damaged.txt")
	text := "        GPU0    GPU1    CPU Affinity\nGPU0     X      NV2     0-23\nGPU1    NVx      X      0-23\n"
	if err := os.WriteFile(damaged, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	dgx := "../../testdata/topo/dgx-a100-8x-nv12-8nic-mlx5.txt"
	cases := []struct {
		name  string
		stdin string
		args  []string
		says  string
	}{
		{"damaged file", "", []string{"topo", "show", damaged}, damaged + `: line 3: row GPU1, column GPU0: unknown link "NVx"`},
		{"damaged stdin", text, []string{"topo", "pick", "-", "--count", "1", "--json"}, "stdin: line 3:"},
		{"empty stdin", "", []string{"topo", "show", "-"}, "stdin: line 1: no header naming GPU0"},
		{"missing file", "", []string{"topo", "show", filepath.Join(dir, "nope.txt")}, "no such file"},
		{"too many GPUs", "", []string{"topo", "pick", dgx, "--count", "8", "--busy", "2"}, "8 GPUs requested, 7 free"},
		{"busy GPU not on the machine", "", []string{"topo", "pick", dgx, "--count", "1", "--busy", "8"}, "--busy 8: this machine has GPU0 to GPU7"},
		{"negative count", "", []string{"topo", "pick", dgx, "--count", "-1"}, "--count -1"},
		{"count required", "", []string{"topo", "pick", dgx}, `"count" not set`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, c.stdin, c.args...)
			if code != 1 {
				t.Fatalf("exit %d, want 1 (stdout %q)", code, out)
			}
			if !strings.Contains(errOut, c.says) {
				t.Fatalf("stderr %q, want %q", errOut, c.says)
			}
		})
	}
}

// fakeNvidiaSMI puts an executable nvidia-smi on PATH that runs script.
func fakeNvidiaSMI(t *testing.T, script string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
}

func TestTopoWithoutFileRunsNvidiaSMI(t *testing.T) {
	rec, err := filepath.Abs("../../testdata/topo/hgx-h200-8x-nv18-10nic-raw-tabs.txt")
	if err != nil {
		t.Fatal(err)
	}
	fakeNvidiaSMI(t, `[ "$1 $2" = "topo -m" ] || exit 3`+"\nexec /bin/cat '"+rec+"'\n")
	code, out, errOut := runCLI(t, "", "topo", "show", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	_, want, _ := runCLI(t, "", "topo", "show", rec, "--json")
	if out != want {
		t.Fatalf("this machine's view differs from the file's:\n%s", out)
	}
}

func TestTopoWithoutFileReportsNvidiaSMIFailures(t *testing.T) {
	cases := []struct {
		name, script, says string
	}{
		{"failing", "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.' >&2\nexit 9\n", "nvidia-smi topo -m: exit status 9: NVIDIA-SMI has failed"},
		{"garbage", "echo 'No devices were found'\n", "nvidia-smi topo -m: line 1: no header naming GPU0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fakeNvidiaSMI(t, c.script)
			code, _, errOut := runCLI(t, "", "topo", "show")
			if code != 1 || !strings.Contains(errOut, c.says) {
				t.Fatalf("exit %d, stderr %q, want %q", code, errOut, c.says)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		code, _, errOut := runCLI(t, "", "topo", "pick", "--count", "1")
		if code != 1 || !strings.Contains(errOut, "nvidia-smi not found") {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
	})
}

// writeSMIText writes `nvidia-smi topo -m` output of n GPUs, link(i, j)
// between GPUs i < j, to a file and returns its path.
func writeSMIText(t *testing.T, n int, link func(i, j int) string) string {
	t.Helper()
	var b strings.Builder
	for j := 0; j < n; j++ {
		fmt.Fprintf(&b, "\tGPU%d", j)
	}
	b.WriteString("\tCPU Affinity\tNUMA Affinity\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "GPU%d", i)
		for j := 0; j < n; j++ {
			switch {
			case i == j:
				b.WriteString("\t X ")
			case i < j:
				b.WriteString("\t" + link(i, j))
			default:
				b.WriteString("\t" + link(j, i))
			}
		}
		fmt.Fprintf(&b, "\t0-7\t%d\n", i%4)
	}
	path := filepath.Join(t.TempDir(), fmt.Sprintf("%d-gpus.txt", n))
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// pairs joins GPUs in NV4 pairs (0-1, 2-3, ...), SYS otherwise.
func pairs(i, j int) string {
	if i/2 == j/2 {
		return "NV4"
	}
	return "SYS"
}

func TestTopoShowAndPickStateTheGPULimitTheSameWay(t *testing.T) {
	path := writeSMIText(t, topology.MaxGPUs+1, pairs)
	want := path + ": line 1: " + topology.CheckGPUCount(topology.MaxGPUs+1).Error()
	for _, args := range [][]string{{"topo", "show", path}, {"topo", "show", path, "--json"}, {"topo", "pick", path, "--count", "2"}} {
		code, out, errOut := runCLI(t, "", args...)
		if code != 1 || strings.TrimSpace(errOut) != "Error: "+want {
			t.Errorf("%v: exit %d, stderr %q (stdout %q), want exit 1 and %q", args, code, errOut, out, want)
		}
	}

	// At the limit every GPU is shown in its island, and pick agrees.
	path = writeSMIText(t, topology.MaxGPUs, pairs)
	code, out, errOut := runCLI(t, "", "topo", "show", path)
	if code != 0 {
		t.Fatalf("show %d GPUs: exit %d: %s", topology.MaxGPUs, code, errOut)
	}
	if !strings.Contains(out, "GPU58-59, GPU60-61, GPU62-63;") || !regexp.MustCompile(`(?m)^GPU63 .* island 32 `).MatchString(out) {
		t.Errorf("show %d GPUs misses the last islands:\n%s", topology.MaxGPUs, out)
	}
	code, out, errOut = runCLI(t, "", "topo", "pick", path, "--count", "2", "--busy", "0", "--json")
	if code != 0 || !strings.Contains(out, `"gpus": [
    2,
    3
  ]`) {
		t.Errorf("pick 2 of %d GPUs: exit %d, %s%s", topology.MaxGPUs, code, out, errOut)
	}
}

// hostileLinks are random links of three kinds between 64 GPUs (seeded):
// no real machine is wired so, and the exact pick of 24 of them would take
// minutes.
func hostileLinks() func(i, j int) string {
	kinds := []string{"SYS", "PHB", "NV1"}
	rng := rand.New(rand.NewSource(1))
	var cells [topology.MaxGPUs][topology.MaxGPUs]string
	for i := range cells {
		for j := i + 1; j < len(cells); j++ {
			cells[i][j] = kinds[rng.Intn(len(kinds))]
		}
	}
	return func(i, j int) string { return cells[i][j] }
}

func TestTopoPickSaysWhenItsPickIsNotProvenOptimal(t *testing.T) {
	path := writeSMIText(t, topology.MaxGPUs, hostileLinks())
	code, out, errOut := runCLI(t, "", "topo", "pick", path, "--count", "24", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got topoPickJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.Optimal || !strings.Contains(out, `"optimal": false`) || len(got.GPUs) != 24 {
		t.Fatalf("want 24 GPUs and \"optimal\": false:\n%s", out)
	}
	code, out, errOut = runCLI(t, "", "topo", "pick", path, "--count", "24")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// The same inputs give the same pick, byte for byte.
	assertGolden(t, "topo/pick-64-random-links-not-proven.golden", out)
}

func TestTopoShowSanitizesNICNamesByteForByte(t *testing.T) {
	// A NIC named with an 8-bit CSI (0x9b), a zero-width space and a byte
	// that is not UTF-8, each of which a terminal would act on or hide.
	text := "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n" +
		"GPU0\t X \tPHB\tNODE\t0-23\t0\n" +
		"GPU1\tPHB\t X \tNODE\t0-23\t0\n" +
		"NIC0\tNODE\tNODE\t X \n\nNIC Legend:\n\n  NIC0: mlx5\x9b2J\u200bx\xff\n"
	path := filepath.Join(t.TempDir(), "evil-nic.txt")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	const shown = "mlx5\uFFFD2J\uFFFDx\uFFFD"
	for _, args := range [][]string{{"topo", "show", path}, {"topo", "show", path, "--json"}} {
		code, out, errOut := runCLI(t, "", args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		if !utf8.ValidString(out) || !strings.Contains(out, shown) {
			t.Fatalf("%v: want valid UTF-8 showing %q:\n%q", args, shown, out)
		}
	}
	// Columns line up by characters, not bytes: each U+FFFD is three.
	_, out, _ := runCLI(t, "", "topo", "show", path)
	lines := strings.Split(out, "\n")
	at := func(line, word string) int { return utf8.RuneCountInString(line[:strings.Index(line, word)]) }
	if head, row := lines[2], lines[3]; at(head, "NVLink") != at(row, "  -  ")+2 {
		t.Errorf("the NVLink column is misaligned after the NIC name:\n%s\n%s", head, row)
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/providers/sandbox"
	"github.com/gpulayer/gpulayer/reconcile/facts"
)

func startProbeSandbox(t *testing.T, hosts int) *sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.Start(sandbox.Options{Hosts: hosts, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	return sb
}

func TestProbeTableSanitizesWhatMachinesReport(t *testing.T) {
	sb := startProbeSandbox(t, 2)
	// Hostile machines name their GPUs with escapes that would clear the
	// terminal and set its title, in 7 bits and, alone, in 8 (0x9b is CSI).
	for i, name := range []string{"EVIL\x1b[2J\x1b]0;owned\x07GPU", "EVIL\x9b2JGPU"} {
		m := sb.Machines[i]
		gpus, err := os.ReadFile(filepath.Join(m.Dir, "gpus"))
		if err != nil {
			t.Fatal(err)
		}
		evil := strings.ReplaceAll(string(gpus), m.Model.GPUName, name)
		if err := os.WriteFile(filepath.Join(m.Dir, "gpus"), []byte(evil), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	io, _, out, errOut := iostreams.Test()
	if code := run([]string{"probe", sb.Dir}, io); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	text := out.String()
	if strings.ContainsAny(text, "\x1b\x07") || !utf8.ValidString(text) {
		t.Fatalf("raw control bytes in the table:\n%q", text)
	}
	if !strings.Contains(text, "EVIL\uFFFD[2J\uFFFD]0;owned\uFFFDGPU") || !strings.Contains(text, "EVIL\uFFFD2JGPU") {
		t.Errorf("hostile GPU name not shown sanitized:\n%s", text)
	}
	for _, m := range sb.Machines {
		if !strings.Contains(text, m.Name) || !strings.Contains(text, m.Zone) {
			t.Errorf("table lacks %s in %s:\n%s", m.Name, m.Zone, text)
		}
	}
	if !strings.Contains(text, "2 of 2 hosts probed") {
		t.Errorf("no summary:\n%s", text)
	}
	if errOut.Len() != 0 {
		t.Errorf("progress or errors on a non-terminal stderr: %q", errOut.String())
	}
}

func TestProbeJSONAndOutWriteTheFactsDocument(t *testing.T) {
	sb := startProbeSandbox(t, 3)
	outFile := filepath.Join(t.TempDir(), "facts.json")
	io, _, out, errOut := iostreams.Test()
	if code := run([]string{"probe", sb.Dir, "--json", "--out", outFile, "--parallelism", "2"}, io); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var printed, saved facts.Document
	if err := json.Unmarshal(out.Bytes(), &printed); err != nil {
		t.Fatalf("--json: %v\n%s", err, out.String())
	}
	b, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &saved); err != nil {
		t.Fatalf("--out: %v", err)
	}
	for _, doc := range []facts.Document{printed, saved} {
		if doc.Version != facts.Version || len(doc.Hosts) != 3 {
			t.Fatalf("document: version %d, %d hosts", doc.Version, len(doc.Hosts))
		}
		for _, h := range doc.Hosts {
			if h.Status != facts.StatusOK || len(h.GPUs) == 0 || h.Topology.GPUs() != len(h.GPUs) {
				t.Errorf("%s: %s %s, %d GPUs", h.Name, h.Status, h.Error, len(h.GPUs))
			}
		}
	}
}

func TestProbeExitsOneWhenAHostCannotBeProbed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	hcl := fmt.Sprintf(`ssh "s" {
  known_hosts = %q
}
fleet "f" {
  ssh = ssh.s
  host "gone" { address = "127.0.0.1:%d" }
}
`, filepath.Join(dir, "known_hosts"), port)
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	io, _, out, errOut := iostreams.Test()
	if code := run([]string{"probe", dir}, io); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(errOut.String(), "1 of 1 hosts could not be probed") || !strings.Contains(out.String(), "unreachable") {
		t.Fatalf("stdout %q stderr %q", out.String(), errOut.String())
	}
}

func TestProbeRejectsBadInput(t *testing.T) {
	noHosts, shared := t.TempDir(), t.TempDir()
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(noHosts, "main.hcl"), []byte("ssh \"s\" {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"probe", "--parallelism", "0", t.TempDir()}, "--parallelism must be at least 1"},
		{[]string{"probe", "--timeout", "0", t.TempDir()}, "--timeout must be more than 0, got 0s"},
		{[]string{"probe", "--timeout", "-5s", t.TempDir()}, "--timeout must be more than 0, got -5s"},
		{[]string{"probe", noHosts}, "declares no hosts"},
		{[]string{"probe", t.TempDir()}, "No configuration files"},
		{[]string{"sandbox", "--hosts", "0"}, "--hosts must be from 1"},
		{[]string{"sandbox", "--once", "--dir", t.TempDir(), "--shell", "sh"}, "absolute path of a POSIX shell"},
		{[]string{"sandbox", "--once", "--dir", shared}, "sandbox: " + shared + " can be written by its group or others (mode 0777)"},
	}
	for _, c := range cases {
		io, _, _, errOut := iostreams.Test()
		if code := run(c.args, io); code != 1 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, errOut.String(), c.want)
		}
	}
}

func TestSandboxOnceProbesItsFleetAndStops(t *testing.T) {
	for _, shell := range []string{sandbox.InProcess, "/bin/sh"} {
		t.Run(shell, func(t *testing.T) {
			dir := t.TempDir()
			io, _, out, errOut := iostreams.Test()
			if code := run([]string{"sandbox", "--hosts", "4", "--dir", dir, "--once", "--shell", shell}, io); code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			if !strings.Contains(out.String(), "4 of 4 hosts probed") {
				t.Fatalf("output:\n%s", out.String())
			}
			for _, f := range []string{sandbox.ConfigFile, sandbox.KnownHostsFile, sandbox.KeyFile} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("--dir lacks %s: %v", f, err)
				}
			}
		})
	}
}

func TestProbeShowsProgressOnlyOnATerminal(t *testing.T) {
	sb := startProbeSandbox(t, 2)
	io, _, _, errOut := iostreams.Test()
	io.SetStderrTTY(true)
	if code := run([]string{"probe", sb.Dir}, io); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), "probing: 2/2 hosts") {
		t.Fatalf("no progress on a terminal stderr: %q", errOut.String())
	}
}

func TestProbeOutWritesThroughASymbolicLink(t *testing.T) {
	sb := startProbeSandbox(t, 1)
	dir := t.TempDir()
	target, link := filepath.Join(dir, "facts-2026.json"), filepath.Join(dir, "facts.json")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("facts-2026.json", link); err != nil {
		t.Fatal(err)
	}
	io, _, _, errOut := iostreams.Test()
	if code := run([]string{"probe", sb.Dir, "--out", link}, io); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("--out replaced the link: %v %v", st.Mode(), err)
	}
	var doc facts.Document
	if b, err := os.ReadFile(target); err != nil || json.Unmarshal(b, &doc) != nil || len(doc.Hosts) != 1 {
		t.Fatalf("the link's target holds %q: %v", b, err)
	}

	dangling := filepath.Join(dir, "dangling.json")
	if err := os.Symlink(filepath.Join(dir, "no", "such.json"), dangling); err != nil {
		t.Fatal(err)
	}
	io, _, _, errOut = iostreams.Test()
	if code := run([]string{"probe", sb.Dir, "--out", dangling}, io); code != 1 || !strings.Contains(errOut.String(), "--out "+dangling+": a symbolic link to a file that cannot be reached") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

// A machine whose nvidia-smi topo -m prints 2 MiB is failed for it, and
// the others are probed.
func TestProbeFailsAHostThatPrintsMoreThanAProbeMay(t *testing.T) {
	sb := startProbeSandbox(t, 2)
	m := sb.Machines[0]
	huge := m.Model.Topology() + strings.Repeat("GPU9\tSYS\n", 2<<20/9)
	if err := os.WriteFile(filepath.Join(m.Dir, "topo.txt"), []byte(huge), 0o644); err != nil {
		t.Fatal(err)
	}
	io, _, out, errOut := iostreams.Test()
	if code := run([]string{"probe", sb.Dir, "--json"}, io); code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, errOut.String())
	}
	var doc facts.Document
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	h := doc.Find(m.Name)
	// The second part is the pool's: it kept no more than that, rather
	// than the 64 MiB a pool keeps by default.
	if h.Status != facts.StatusFailed || !strings.Contains(h.Error, "the probe's stdout reached 1048576 bytes") ||
		!strings.Contains(h.Error, "more than 1048576 bytes to stdout") || len(h.GPUs) != 0 {
		t.Errorf("%s: status %q error %q, %d GPUs", m.Name, h.Status, h.Error, len(h.GPUs))
	}
	if other := doc.Find(sb.Machines[1].Name); other.Status != facts.StatusOK {
		t.Errorf("%s: %s %s", other.Name, other.Status, other.Error)
	}
}

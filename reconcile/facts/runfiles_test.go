package facts

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// probeShells are the shells machines have as sh that exist here (dash is
// Debian's and Ubuntu's, busybox Alpine's), each as a PATH directory
// holding sh and the commands the probe reads run files with. Under CI
// dash, bash and busybox must all exist (.ci/run installs them).
func probeShells(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, c := range []struct{ name, prog string }{{"sh", "/bin/sh"}, {"dash", "dash"}, {"bash", "bash"}, {"busybox", "busybox"}} {
		path, err := exec.LookPath(c.prog)
		if err != nil {
			if os.Getenv("CI") != "" && c.name != "sh" {
				t.Fatalf("%s is not installed; .ci/run installs it", c.prog)
			}
			continue
		}
		bin := binWith(t, "uname", "timeout", "head", "tail")
		if err := os.Symlink(path, filepath.Join(bin, "sh")); err != nil {
			t.Fatal(err)
		}
		out[c.name] = bin
	}
	return out
}

// runProbeIn runs probe.sh as runScript does, with the sh of bin, within
// 30 s, and says how long it took.
func runProbeIn(t *testing.T, bin string, env []string, args ...string) ([]byte, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "sh"), append([]string{"-s", "--", testNonce}, args...)...)
	cmd.Stdin = strings.NewReader(Script())
	cmd.Env = append([]string{"PATH=" + bin}, env...)
	cmd.WaitDelay = 2 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("the probe did not finish in %s: %v", took, err)
	}
	if err != nil {
		t.Fatalf("probe script: %v\n%s", err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("probe script wrote to stderr: %s", stderr.String())
	}
	return out, took
}

// TestProbeNeverReadsARunFileThatCouldBlockOrNeverEnd: an ended process's
// exit file that is a FIFO (a read would block the probe until gpulayer
// gives up on the host), a log that is a link to /dev/zero (it never
// ends), an exit file of 100 MB without a newline (read whole it would
// take dash minutes and print 100 MB): none is read. The probe finishes at
// once; the status is unknown, and the files that are not regular files
// are named.
func TestProbeNeverReadsARunFileThatCouldBlockOrNeverEnd(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("7", 100<<20)), 0o600); err != nil {
		t.Fatal(err)
	}
	const node = "train/r0123456789abcdef/node-1"
	cases := []struct {
		name, exit, log string
		status          *int
		notRegular      []string
		logTail         []string
	}{
		{"a FIFO at the exit file, /dev/zero as the log", "fifo", "zero", nil, []string{NodeFileExit, NodeFileLog}, nil},
		{"a 100 MB exit file without a newline", "big", "epoch 1\nbye\n", nil, nil, []string{"epoch 1", "bye"}},
		{"a FIFO as the log", "3\n", "fifo", new(3), []string{NodeFileLog}, nil},
		{"regular files", "0\n", "done\n", new(0), nil, []string{"done"}},
	}
	for shName, bin := range probeShells(t) {
		for _, c := range cases {
			t.Run(shName+"/"+c.name, func(t *testing.T) {
				home := t.TempDir()
				stem := filepath.Join(home, ".gpulayer", "runs", node)
				if err := os.MkdirAll(filepath.Dir(stem), 0o700); err != nil {
					t.Fatal(err)
				}
				place(t, stem+".exit", c.exit, big)
				place(t, stem+".log", c.log, big)
				out, took := runProbeIn(t, bin, []string{"HOME=" + home}, "2147483646:"+node)
				if took > 8*time.Second {
					t.Errorf("the probe took %s", took)
				}
				if len(out) > 64<<10 {
					t.Fatalf("the probe printed %d bytes: it read a file it should not have", len(out))
				}
				h := Parse(out, testNonce)
				if len(h.PIDs) != 1 {
					t.Fatalf("pids %+v\n%s", h.PIDs, out)
				}
				p := h.PIDs[0]
				if p.Alive || (p.ExitStatus == nil) != (c.status == nil) || (p.ExitStatus != nil && *p.ExitStatus != *c.status) {
					t.Errorf("pid %+v, want exit status %v", p, c.status)
				}
				if !slices.Equal(p.NotRegular, c.notRegular) || !slices.Equal(p.LogTail, c.logTail) {
					t.Errorf("not regular %q, log tail %q; want %q, %q", p.NotRegular, p.LogTail, c.notRegular, c.logTail)
				}
				warned := strings.Contains(strings.Join(h.Warnings, "\n"), "not a regular file")
				if warned != (len(c.notRegular) > 0) {
					t.Errorf("warnings %q", h.Warnings)
				}
			})
		}
	}
}

// place puts what at path: "fifo", "zero" (a link to /dev/zero), "big"
// (a link to the file big), or the text of a regular file.
func place(t *testing.T, path, what, big string) {
	t.Helper()
	var err error
	switch what {
	case "fifo":
		err = syscall.Mkfifo(path, 0o600)
	case "zero":
		err = os.Symlink("/dev/zero", path)
	case "big":
		err = os.Symlink(big, path)
	default:
		err = os.WriteFile(path, []byte(what), 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
}

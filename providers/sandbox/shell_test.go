package sandbox

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/ssh"
)

// runIn runs command with the in-process shell of a one-machine sandbox
// directory and returns its status, stdout and stderr.
func runIn(t *testing.T, command, stdin string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	m, env, err := Prepare(dir, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	sh := &inProcessShell{loginShell: filepath.Join(dir, "bin", "sandbox-shell")}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Locked, as an SSH channel is: the shell and the real processes it
	// starts write at once.
	var out, errOut lockedBuffer
	status, err := sh.Run(ctx, command, env, filepath.Join(m.Dir, "home"), strings.NewReader(stdin), &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	return status, out.String(), errOut.String()
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestInProcessShellInterpretsShAndShScriptsWithoutAProcess(t *testing.T) {
	// $PPID is the parent of the process that runs the shell: for an
	// interpreted shell, this test's parent; for a real one, this test
	// or a shell it started.
	want := strconv.Itoa(os.Getppid())
	script := filepath.Join(t.TempDir(), "ppid")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$PPID $1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, command, stdin, stdout string }{
		{"login shell", `echo $PPID`, "", want + "\n"},
		{"sh -c", `sh -c 'echo $PPID $0 $1' name arg`, "", want + " name arg\n"},
		{"sh -s", `sh -s -- a b`, "echo $PPID $2", want + " b\n"},
		{"#!/bin/sh script", script + " x", "", want + " x\n"},
		{"under timeout", "timeout 10 " + script + " y", "", want + " y\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out, errOut := runIn(t, tc.command, tc.stdin)
			if status != 0 || out != tc.stdout {
				t.Errorf("status %d, stdout %q, stderr %q; want stdout %q", status, out, errOut, tc.stdout)
			}
		})
	}
}

func TestInProcessShellRunsOtherProgramsAsRealProcesses(t *testing.T) {
	status, out, _ := runIn(t, `printf 'a\nb\n' | grep -c b; sh -c 'echo $$' | grep -vx `+strconv.Itoa(os.Getpid())+` >/dev/null && echo real`, "")
	if status != 0 || out != "1\nreal\n" {
		t.Errorf("status %d, stdout %q", status, out)
	}
}

func TestInProcessTimeoutEndsTheCommandWith124(t *testing.T) {
	status, out, errOut := runIn(t, `timeout 0.2 sleep 10; echo $?; timeout 0.2s sh -c 'while :; do :; done'; echo $?`, "")
	if status != 0 || out != "124\n124\n" {
		t.Errorf("status %d, stdout %q, stderr %q", status, out, errOut)
	}
}

func TestInProcessShellFailsLoudlyOnWhatItCannotRun(t *testing.T) {
	for _, tc := range []struct{ name, command, stderr string }{
		{"background job in eval", `x='sleep 1 & echo $!'; eval "$x"`, "not supported in-process"},
		{"syntax error on stdin", `sh -s`, "syntax error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, errOut := runIn(t, tc.command, "if then fi (")
			if status == 0 || !strings.Contains(strings.ToLower(errOut), tc.stderr) {
				t.Errorf("status %d, stderr %q; want an error with %q", status, errOut, tc.stderr)
			}
		})
	}
}

// BenchmarkInProcessProbe runs the facts probe on one machine with the
// in-process shell: the sandbox's share of a probe's cost.
func BenchmarkInProcessProbe(b *testing.B) {
	dir := b.TempDir()
	m, env, err := Prepare(dir, 0, 1)
	if err != nil {
		b.Fatal(err)
	}
	sh := &inProcessShell{loginShell: filepath.Join(dir, "bin", "sandbox-shell")}
	script := facts.Script()
	command := probe.Command("nonce", nil)
	for b.Loop() {
		var out, errOut lockedBuffer
		status, err := sh.Run(context.Background(), command, env, filepath.Join(m.Dir, "home"), strings.NewReader(script), &out, &errOut)
		if err != nil || status != 0 || !strings.Contains(out.String(), ":done") {
			b.Fatalf("status %d %v: %s %s", status, err, out.String(), errOut.String())
		}
	}
}

// The login shell runs its command only after -c, in the interpreter and
// in each shell machines have as sh; anything else is a usage error.
func TestLoginShellTakesOnlyDashC(t *testing.T) {
	cases := []struct {
		args   []string
		status int
		out    string
	}{
		{[]string{"-c", "echo hi $#"}, 0, "hi 0\n"},
		{[]string{"-c", "echo hi $#", "a", "b"}, 0, "hi 2\n"},
		{[]string{"-x", "echo hi"}, 2, ""},
		{[]string{"--", "echo hi"}, 2, ""},
		{[]string{"c", "echo hi"}, 2, ""},
		{[]string{"-c"}, 2, ""},
		{[]string{"echo hi"}, 2, ""},
		{nil, 2, ""},
	}
	for _, c := range cases {
		cmd := "sandbox-shell"
		for _, a := range c.args {
			cmd += " " + ssh.Quote(a)
		}
		status, out, errOut := runIn(t, cmd, "")
		if status != c.status || out != c.out || (c.status == 2) != strings.Contains(errOut, "usage: sandbox-shell -c COMMAND") {
			t.Errorf("in-process %s: status %d, stdout %q, stderr %q; want %d, %q", cmd, status, out, errOut, c.status, c.out)
		}
		for _, shell := range []string{"dash", "bash", "busybox"} {
			path, err := exec.LookPath(shell)
			if err != nil {
				continue
			}
			argv := append([]string{filepath.Join("scripts", "sandbox-shell")}, c.args...)
			if shell == "busybox" {
				argv = append([]string{"sh"}, argv...)
			}
			real := exec.Command(path, argv...)
			real.Env = []string{"PATH=/usr/bin:/bin", "GPULAYER_SANDBOX_MACHINE=" + t.TempDir()}
			var stdout, stderr strings.Builder
			real.Stdout, real.Stderr = &stdout, &stderr
			err = real.Run()
			got := 0
			if ee, ok := err.(*exec.ExitError); ok {
				got = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if got != c.status || stdout.String() != c.out || (c.status == 2) != strings.Contains(stderr.String(), "usage: sandbox-shell -c COMMAND") {
				t.Errorf("%s %s: status %d, stdout %q, stderr %q; want %d, %q", shell, cmd, got, stdout.String(), stderr.String(), c.status, c.out)
			}
		}
	}
}

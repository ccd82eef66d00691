package main

import (
	"bufio"
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/ssh"
	"github.com/gpulayer/gpulayer/ssh/sshtest"
)

// runAsGpulayer is the variable that makes the test binary, started by a
// test, run as gpulayer with the arguments after "--".
const runAsGpulayer = "GPULAYER_TEST_RUN_AS_GPULAYER"

// TestRunAsGpulayer is not a test: it is how the test binary becomes
// gpulayer in a child process, for tests that signal the process.
func TestRunAsGpulayer(t *testing.T) {
	if os.Getenv(runAsGpulayer) != "1" {
		t.Skip("runs only as a child process of another test")
	}
	i := slices.Index(os.Args, "--")
	os.Exit(run(os.Args[i+1:], iostreams.System()))
}

// gpulayerProcess starts gpulayer with args in a child process, with
// TMPDIR set to tmp.
func gpulayerProcess(t testing.TB, tmp string, args ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestRunAsGpulayer$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), runAsGpulayer+"=1", "TMPDIR="+tmp)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if t.Failed() {
			t.Logf("gpulayer's stderr:\n%s", stderr.String())
		}
	})
	return cmd, bufio.NewScanner(out)
}

// A sandbox whose terminal goes away (SIGHUP) cleans up as on Ctrl-C: its
// temporary directory, with the private key, is removed and the processes
// launched on its machines are stopped. A client that connected to every
// machine and never authenticated does not hold up its exit.
func TestSandboxCleansUpOnSIGHUP(t *testing.T) {
	tmp := t.TempDir()
	cmd, out := gpulayerProcess(t, tmp, "sandbox", "--hosts", "2")
	ready := make(chan string, 1)
	go func() {
		var configPath string
		for out.Scan() {
			if f := strings.Fields(out.Text()); len(f) == 2 && f[0] == "configuration" {
				configPath = f[1]
			}
			if strings.HasPrefix(out.Text(), "Press Ctrl-C") {
				ready <- configPath
				return
			}
		}
		close(ready)
	}()
	var configPath string
	select {
	case configPath = <-ready:
	case <-time.After(60 * time.Second):
		t.Fatal("the sandbox did not start")
	}
	if configPath == "" {
		t.Fatal("the sandbox printed no configuration path")
	}
	dir := filepath.Dir(configPath)

	cfg, diags := config.Load(dir, config.LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	machines, err := probe.Machines(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pool := ssh.NewPool(ssh.Options{NoAgent: true})
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := pool.Run(ctx, machines[0].Target, "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!", nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("launch: %v %+v", err, res)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("launch printed %q", res.Stdout)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	for _, m := range machines {
		c, err := net.Dial("tcp", net.JoinHostPort(m.Target.Address, strconv.Itoa(m.Target.Port)))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}

	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("after SIGHUP: %v, want exit status 0", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the sandbox did not stop after SIGHUP")
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the temporary directory %s is left behind (%v)", dir, err)
	}
	if sshtest.ProcessRuns(pid) {
		t.Errorf("pid %d, launched on a machine, outlived the sandbox", pid)
	}
}

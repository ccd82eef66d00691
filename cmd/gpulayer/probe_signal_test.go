//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/ssh/sshtest"
)

// signalTestTimeout bounds what the tests here wait for; far below the
// probe's --timeout, so that only the signal can have ended it in time.
const signalTestTimeout = 20 * time.Second

func TestProbeInterruptedReportsTheHostsDoneSoFar(t *testing.T) {
	sb := startProbeSandbox(t, 2)
	// A machine that accepts the session and never answers its command,
	// declared in a fleet probed after the sandbox's.
	pub, err := os.ReadFile(sb.KeyPath() + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	stuck, err := sshtest.Start(sshtest.Options{AuthorizedKeys: []ssh.PublicKey{key}, Stall: sshtest.StallExec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stuck.Close() })
	known, err := os.OpenFile(sb.KnownHostsPath(), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fmt.Fprintln(known, stuck.KnownHostsLine("127.0.0.1"))
	known.Close()
	if err != nil {
		t.Fatal(err)
	}
	hcl := fmt.Sprintf("fleet \"zz-stuck\" {\n  ssh = ssh.sandbox\n  host \"stuck\" { address = %q }\n}\n", stuck.Addr)
	if err := os.WriteFile(filepath.Join(sb.Dir, "zz.hcl"), []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}

	io, _, out, errOut := iostreams.Test()
	exit := make(chan int, 1)
	go func() {
		// One host at a time: the sandbox's are done once the stuck one
		// is reached.
		exit <- run([]string{"probe", sb.Dir, "--parallelism", "1", "--timeout", "10m"}, io)
	}()
	deadline := time.Now().Add(signalTestTimeout)
	for stuck.Stats().Sessions == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the probe never reached the stuck host")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exit:
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
	case <-time.After(signalTestTimeout):
		t.Fatalf("probe did not return within %s of Ctrl-C", signalTestTimeout)
	}
	text := out.String()
	for _, m := range sb.Machines {
		if !strings.Contains(text, m.Name) {
			t.Errorf("the table lacks %s, probed before Ctrl-C:\n%s", m.Name, text)
		}
	}
	if !strings.Contains(text, "stuck") || !strings.Contains(text, "2 of 3 hosts probed") {
		t.Errorf("the table does not show the interrupted host as not probed:\n%s", text)
	}
	if !strings.Contains(errOut.String(), "1 of 3 hosts could not be probed") {
		t.Errorf("stderr %q", errOut.String())
	}
}

// TestInterruptibleHelperProcess is not a test: it is the child process of
// TestSecondInterruptEndsTheProcess.
func TestInterruptibleHelperProcess(t *testing.T) {
	if os.Getenv("GPULAYER_INTERRUPTIBLE_CHILD") != "1" {
		t.Skip("run by TestSecondInterruptEndsTheProcess")
	}
	ctx, stop := interruptible(context.Background())
	defer stop()
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	<-ctx.Done()
	// The default handling is back once the first signal was taken.
	for i := 0; i < 200; i++ {
		syscall.Kill(os.Getpid(), syscall.SIGINT)
		time.Sleep(10 * time.Millisecond)
	}
	os.Exit(0)
}

func TestSecondInterruptEndsTheProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), signalTestTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestInterruptibleHelperProcess$")
	cmd.Env = append(os.Environ(), "GPULAYER_INTERRUPTIBLE_CHILD=1")
	err := cmd.Run()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		t.Fatalf("child: %v, want it killed by the second SIGINT", err)
	}
	if ws, ok := exitErr.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Fatalf("child ended with %v, want the second SIGINT to kill it", err)
	}
}

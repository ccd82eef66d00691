//go:build unix

package main

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/iostreams"
)

// lockedBuffer is a buffer the test reads while the command writes it.
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

// TestWaitYieldsToCtrlC: wait on a job that sleeps 300 s, with no
// timeout, ends with 130 soon after SIGINT.
func TestWaitYieldsToCtrlC(t *testing.T) {
	applied(t, evalJob("sleep 300", ""))
	errOut := &lockedBuffer{}
	io := &iostreams.IOStreams{In: &bytes.Buffer{}, Out: &bytes.Buffer{}, ErrOut: errOut}
	exit := make(chan int, 1)
	go func() { exit <- run([]string{"wait", "eval", "--interval", "1s"}, io) }()
	// The first line comes once wait polls: its signal handler is set by
	// then (before it reads anything).
	deadline := time.Now().Add(signalTestTimeout)
	for !strings.Contains(errOut.String(), `wait: job "eval" running (2/2 nodes)`) {
		if time.Now().After(deadline) {
			t.Fatalf("wait never said the job runs:\n%s", errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exit:
		if code != 130 || !strings.Contains(errOut.String(), "wait interrupted") {
			t.Errorf("exit %d, want 130\n%s", code, errOut.String())
		}
	case <-time.After(signalTestTimeout):
		t.Fatalf("wait did not return within %s of Ctrl-C", signalTestTimeout)
	}
}

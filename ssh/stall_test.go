package ssh

import (
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gpulayer/gpulayer/ssh/sshtest"
)

// hostTimeout is the bound a test gives one host's command, as the probe
// gives each host its --timeout: shorter than testTimeout, so that a
// command that returns only when the test gives up is told apart from one
// that kept its bound.
const hostTimeout = 500 * time.Millisecond

type runOutcome struct {
	res Result
	err error
}

// runBounded runs command on tg with a context that ends after limit and
// fails the test when Run does not return before the test's own deadline.
func runBounded(t *testing.T, p *Pool, tg Target, command string, limit time.Duration) (Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	done := make(chan runOutcome, 1)
	go func() {
		res, err := p.Run(ctx, tg, command, nil)
		done <- runOutcome{res, err}
	}()
	select {
	case o := <-done:
		return o.res, o.err
	case <-time.After(testTimeout):
		t.Fatalf("Run on %s did not return within %s though its context ended after %s", tg.label(), testTimeout, limit)
		return Result{}, nil
	}
}

// closeBounded closes p and fails the test when Close does not return
// before the test's deadline.
func closeBounded(t *testing.T, p *Pool) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		p.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(testTimeout):
		t.Fatalf("Pool.Close did not return within %s", testTimeout)
	}
}

func TestRunEndsWithItsContextWhenTheServerStopsAnswering(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stall sshtest.Stall
		want  string
	}{
		{name: "channel-open never answered", stall: sshtest.StallChannelOpen, want: "open session"},
		{name: "exec never answered", stall: sshtest.StallExec, want: "start command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			srv := f.server(sshtest.Options{Stall: tc.stall})
			p := newPool(t, Options{Keepalive: 50 * time.Millisecond})
			_, err := runBounded(t, p, f.target("stuck", srv), "true", hostTimeout)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("got %v, want the context's deadline", err)
			}
			for _, want := range []string{"host stuck:", tc.want} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			closeBounded(t, p)
		})
	}
}

func TestOneStuckHostDoesNotDelayAnother(t *testing.T) {
	f := newFixture(t)
	stuck := f.server(sshtest.Options{Stall: sshtest.StallExec})
	good := f.server(sshtest.Options{})
	p := newPool(t, Options{MaxSessionsPerConn: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stuckDone := make(chan error, 1)
	go func() {
		_, err := p.Run(ctx, f.target("stuck", stuck), "true", nil)
		stuckDone <- err
	}()
	// Once the stuck host's exec is waiting, the other host still answers.
	deadline := time.Now().Add(testTimeout)
	for stuck.Stats().Sessions == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stuck host never got a session")
		}
		time.Sleep(5 * time.Millisecond)
	}
	res, err := runBounded(t, p, f.target("good", good), "echo fine", testTimeout/2)
	if err != nil || string(res.Stdout) != "fine\n" {
		t.Fatalf("good host: %q, %v", res.Stdout, err)
	}
	select {
	case err := <-stuckDone:
		t.Fatalf("the stuck host returned before its context ended: %v", err)
	default:
	}
	cancel()
	select {
	case err := <-stuckDone:
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "host stuck:") {
			t.Errorf("stuck host: got %v, want the cancellation naming the host", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("the stuck host's Run did not return after cancellation")
	}
}

func TestRunAfterItsContextEndedDialsNothing(t *testing.T) {
	f := newFixture(t)
	srv := f.server(sshtest.Options{})
	p := newPool(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Run(ctx, f.target("late", srv), "true", nil); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "host late:") {
		t.Fatalf("got %v, want the cancellation naming the host", err)
	}
	// A dial started in the background would be in the pool by now.
	p.mu.Lock()
	conns := len(p.conns)
	p.mu.Unlock()
	closeBounded(t, p)
	if n := p.dials.Load(); conns != 0 || n != 0 {
		t.Errorf("%d connections and %d dials for a command whose context had ended", conns, n)
	}
}

func TestCancelledCommandsGiveTheirSessionSlotBack(t *testing.T) {
	f := newFixture(t)
	srv := f.server(sshtest.Options{})
	p := newPool(t, Options{MaxSessionsPerConn: 1})
	tg := f.target("a1", srv)
	// The server kills a command whose session closes, so each ends
	// quickly after its cancellation, while Run may still be waiting.
	for i := 0; i < 6; i++ {
		pidFile := filepath.Join(f.dir, "pid"+strconv.Itoa(i))
		started, _ := pidWhenWritten(t, pidFile)
		ctx, cancel := context.WithTimeout(started, testTimeout/4)
		_, err := p.Run(ctx, tg, "echo $$ > "+Quote(pidFile)+"; exec sleep 30", nil)
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("command %d: got %v, want it cancelled once it ran", i, err)
		}
	}
	// With the only slot lost, this would wait for a free session.
	if res, err := runBounded(t, p, tg, "echo free", testTimeout/2); err != nil || string(res.Stdout) != "free\n" {
		t.Fatalf("got %q, %v", res.Stdout, err)
	}
}

// muteSocket is a unix socket that accepts connections and never answers,
// as a hung SSH agent does.
func muteSocket(t *testing.T) string {
	t.Helper()
	a := startAgent(t)
	a.Stall(sshtest.AgentStallsEverything)
	return a.Socket
}

func TestAStuckAgentIsGivenUpAndTheIdentityFileStillWorks(t *testing.T) {
	f := newFixture(t)
	srv := f.server(sshtest.Options{})
	p := newPool(t, Options{AgentSocket: muteSocket(t)})
	res, err := runBounded(t, p, f.target("a1", srv), "echo in", testTimeout/2)
	if err != nil || string(res.Stdout) != "in\n" {
		t.Fatalf("got %q, %v; want the identity file to authenticate without the agent", res.Stdout, err)
	}
	closeBounded(t, p)
}

func TestRunEndsWhenTheAgentStopsAnswering(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stall sshtest.AgentStall
		limit time.Duration // the host's own bound
		want  string
	}{
		{name: "agent never answers", stall: sshtest.AgentStallsEverything, limit: testTimeout / 2, want: "no answer within " + agentTimeout.String()},
		{name: "agent lists its keys and never signs", stall: sshtest.AgentStallsSigning, limit: testTimeout / 2, want: "no answer within " + agentTimeout.String()},
		{name: "host's bound is shorter than the agent's", stall: sshtest.AgentStallsSigning, limit: hostTimeout, want: "deadline exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			_, priv, _ := ed25519.GenerateKey(nil)
			signer, _ := ssh.NewSignerFromKey(priv)
			srv := f.server(sshtest.Options{AuthorizedKeys: []ssh.PublicKey{signer.PublicKey()}})
			a := startAgent(t, priv)
			a.Stall(tc.stall)
			p := newPool(t, Options{AgentSocket: a.Socket})
			tg := f.target("a1", srv)
			tg.IdentityFiles = nil
			_, err := runBounded(t, p, tg, "true", tc.limit)
			for _, want := range []string{"host a1:", tc.want} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("got %v, want an error saying %q", err, want)
				}
			}
			// The pool's dial in the background must end too.
			closeBounded(t, p)
		})
	}
}

func TestLocalFilesMustBeSmallRegularFiles(t *testing.T) {
	f := newFixture(t)
	srv := f.server(sshtest.Options{})
	fifo := filepath.Join(f.dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	big := filepath.Join(f.dir, "big_key")
	if err := os.WriteFile(big, make([]byte, maxIdentityFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		file string // "identity file" or "known_hosts"
		path string
		want string
	}{
		{name: "identity file is a named pipe", file: "identity file", path: fifo, want: "not a regular file (a named pipe)"},
		{name: "identity file is /dev/zero", file: "identity file", path: "/dev/zero", want: "not a regular file (a character device)"},
		{name: "identity file is a directory", file: "identity file", path: f.dir, want: "not a regular file (a directory)"},
		{name: "identity file is too large", file: "identity file", path: big, want: "at most 1 MiB is read"},
		{name: "known_hosts is a named pipe", file: "known_hosts", path: fifo, want: "not a regular file (a named pipe)"},
		{name: "known_hosts is /dev/zero", file: "known_hosts", path: "/dev/zero", want: "not a regular file (a character device)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := os.Stat(tc.path); err != nil {
				t.Skip(err)
			}
			p := newPool(t, Options{})
			tg := f.target("a1", srv)
			if tc.file == "identity file" {
				tg.IdentityFiles = []string{tc.path}
			} else {
				tg.KnownHostsFile = tc.path
			}
			_, err := runBounded(t, p, tg, "true", testTimeout/2)
			for _, want := range []string{"host a1:", tc.file + " " + tc.path + ": ", tc.want} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("got %v, want an error saying %q", err, want)
				}
			}
			closeBounded(t, p)
		})
	}
}

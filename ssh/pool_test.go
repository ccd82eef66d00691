package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gpulayer/gpulayer/ssh/sshtest"
)

func TestRunReturnsOutputExitCodeAndSignal(t *testing.T) {
	f := newFixture(t)
	srv := f.server(sshtest.Options{Env: []string{"GPULAYER_TEST=from-server"}})
	p := newPool(t, Options{})
	tg := f.target("a1", srv)
	for _, tc := range []struct {
		name, command, stdin string
		stdout, stderr       string
		exit                 int
		signal               string
	}{
		{name: "stdout", command: "echo hello", stdout: "hello\n"},
		{name: "stderr", command: "echo oops >&2", stderr: "oops\n"},
		{name: "non-zero exit is a result", command: "echo partial; exit 3", stdout: "partial\n", exit: 3},
		{name: "stdin", command: "tr a-z A-Z", stdin: "gpu\n", stdout: "GPU\n"},
		{name: "environment", command: `printf %s "$GPULAYER_TEST"`, stdout: "from-server"},
		{name: "signal", command: "kill -TERM $$", exit: 128 + 15, signal: "TERM"},
		{name: "quoted untrusted value", command: "printf %s " + Quote("$(echo pwned); 'x'"), stdout: "$(echo pwned); 'x'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			var stdin io.Reader
			if tc.stdin != "" {
				stdin = strings.NewReader(tc.stdin)
			}
			res, err := p.Run(ctx, tg, tc.command, stdin)
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Stdout) != tc.stdout || string(res.Stderr) != tc.stderr || res.ExitCode != tc.exit || res.Signal != tc.signal {
				t.Errorf("got stdout %q stderr %q exit %d signal %q; want %q %q %d %q",
					res.Stdout, res.Stderr, res.ExitCode, res.Signal, tc.stdout, tc.stderr, tc.exit, tc.signal)
			}
		})
	}
}

func TestPoolDialsEachHostOnceAndReusesTheConnection(t *testing.T) {
	f := newFixture(t)
	a, b := f.server(sshtest.Options{}), f.server(sshtest.Options{})
	p := newPool(t, Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 0; i < 20; i++ {
		for _, tg := range []Target{f.target("a", a), f.target("b", b)} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
				defer cancel()
				res, err := p.Run(ctx, tg, "echo "+strconv.Itoa(i), nil)
				if err == nil && string(res.Stdout) != fmt.Sprintf("%d\n", i) {
					err = fmt.Errorf("stdout %q", res.Stdout)
				}
				if err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for name, srv := range map[string]*sshtest.Server{"a": a, "b": b} {
		if st := srv.Stats(); st.Conns != 1 || st.Sessions != 20 {
			t.Errorf("server %s: %d connections, %d sessions; want 1 and 20", name, st.Conns, st.Sessions)
		}
	}
	if n := p.dials.Load(); n != 2 {
		t.Errorf("pool dialed %d times for 2 hosts", n)
	}
}

func TestPoolKeepsSessionsPerConnectionUnderTheLimit(t *testing.T) {
	for _, tc := range []struct {
		name        string
		limit       int // Options.MaxSessionsPerConn
		serverLimit int // sshd's MaxSessions
		want        int
	}{
		{name: "explicit limit", limit: 3, serverLimit: 3, want: 3},
		{name: "default stays below OpenSSH's MaxSessions", limit: 0, serverLimit: 10, want: DefaultMaxSessionsPerConn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			srv := f.server(sshtest.Options{MaxSessions: tc.serverLimit})
			p := newPool(t, Options{MaxSessionsPerConn: tc.limit})
			tg := f.target("a1", srv)
			var wg sync.WaitGroup
			var failed atomic.Int64
			for i := 0; i < 4*tc.want; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
					defer cancel()
					if _, err := p.Run(ctx, tg, "sleep 0.3", nil); err != nil {
						t.Error(err)
						failed.Add(1)
					}
				}()
			}
			wg.Wait()
			if st := srv.Stats(); st.PeakCommandsPerConn != tc.want || failed.Load() > 0 {
				t.Errorf("peak %d sessions at once on one connection, %d failed; want peak %d", st.PeakCommandsPerConn, failed.Load(), tc.want)
			}
		})
	}
}

func TestPoolBoundsConcurrentDials(t *testing.T) {
	f := newFixture(t)
	// A server that accepts TCP and never speaks keeps every dial in
	// flight until its timeout.
	silent := listenRaw(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	p := newPool(t, Options{Parallelism: 3, Retry: RetryPolicy{Attempts: 1}})
	var wg sync.WaitGroup
	for i := 0; i < 9; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tg := Target{Name: fmt.Sprint("h", i), Address: "127.0.0.1", Port: silent.port(), User: fmt.Sprint("u", i),
				IdentityFiles: []string{f.keyFile}, KnownHostsFile: f.knownHosts, ConnectTimeout: 500 * time.Millisecond}
			if _, err := p.Run(context.Background(), tg, "true", nil); err == nil {
				t.Error("Run against a silent server succeeded")
			}
		}()
	}
	wg.Wait()
	if got := p.peakDialing.Load(); got != 3 {
		t.Errorf("%d dials in flight at once, want 3 (Parallelism)", got)
	}
	if got := p.dials.Load(); got != 9 {
		t.Errorf("%d dials, want 9", got)
	}
}

func TestDialTimesOutWhenServerAcceptsButNeverSpeaks(t *testing.T) {
	f := newFixture(t)
	silent := listenRaw(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	p := newPool(t, Options{})
	tg := Target{Name: "mute", Address: "127.0.0.1", Port: silent.port(), IdentityFiles: []string{f.keyFile},
		KnownHostsFile: f.knownHosts, ConnectTimeout: 300 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	_, err := p.Run(ctx, tg, "true", nil)
	if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Fatalf("got %v (test context: %v), want the dial's own deadline", err, ctx.Err())
	}
	for _, want := range []string{"host mute:", "handshake", "300ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// droppingListener resets the first n connections it accepts, as sshd
// does to connections beyond MaxStartups.
type droppingListener struct {
	net.Listener
	drop atomic.Int64
}

func (l *droppingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.drop.Add(-1) < 0 {
			return c, nil
		}
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
	}
}

func TestDialRetriesWhenServerResetsConnections(t *testing.T) {
	for _, tc := range []struct {
		name     string
		drop     int
		attempts int
		wantErr  string
		dials    int64
	}{
		{name: "recovers after two resets", drop: 2, attempts: 4, dials: 3},
		{name: "gives up after its attempts", drop: 100, attempts: 3, dials: 3, wantErr: "MaxStartups"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			dl := &droppingListener{Listener: l}
			dl.drop.Store(int64(tc.drop))
			srv := f.server(sshtest.Options{Listener: dl})
			p := newPool(t, Options{Retry: RetryPolicy{Attempts: tc.attempts, InitialBackoff: 10 * time.Millisecond}})
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			res, err := p.Run(ctx, f.target("a1", srv), "echo up", nil)
			if tc.wantErr == "" {
				if err != nil || string(res.Stdout) != "up\n" {
					t.Fatalf("got %q, %v", res.Stdout, err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), fmt.Sprintf("after %d attempts", tc.attempts)) {
				t.Fatalf("got error %v, want one mentioning %q and the attempts", err, tc.wantErr)
			}
			if got := p.dials.Load(); got != tc.dials {
				t.Errorf("%d dials, want %d", got, tc.dials)
			}
		})
	}
}

func TestDialDoesNotRetryRefusedConnections(t *testing.T) {
	f := newFixture(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	p := newPool(t, Options{})
	_, err = p.Run(context.Background(), Target{Name: "down", Address: "127.0.0.1", Port: port, IdentityFiles: []string{f.keyFile}, KnownHostsFile: f.knownHosts}, "true", nil)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("got %v, want connection refused", err)
	}
	if got := p.dials.Load(); got != 1 {
		t.Errorf("%d dials, want 1", got)
	}
}

// freezingProxy forwards TCP connections to a server. freeze makes the
// connections open at that moment stop passing bytes either way without
// closing anything, as a dead network path does; later connections work.
type freezingProxy struct {
	upstream string
	mu       sync.Mutex
	links    []*proxyLink
}

type proxyLink struct {
	down, up net.Conn
	frozen   chan struct{}
}

func (fp *freezingProxy) serve(c net.Conn) {
	up, err := net.Dial("tcp", fp.upstream)
	if err != nil {
		c.Close()
		return
	}
	l := &proxyLink{down: c, up: up, frozen: make(chan struct{})}
	fp.mu.Lock()
	fp.links = append(fp.links, l)
	fp.mu.Unlock()
	go l.copy(up, c)
	l.copy(c, up)
}

func (fp *freezingProxy) freeze() {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	for _, l := range fp.links {
		close(l.frozen)
	}
	fp.links = nil
}

func (fp *freezingProxy) closeAll() {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	for _, l := range fp.links {
		l.down.Close()
		l.up.Close()
	}
}

func (l *proxyLink) copy(dst, src net.Conn) {
	defer l.up.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-l.frozen:
			// Hold the connection open, passing nothing, until the test ends.
			io.Copy(io.Discard, src)
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func TestKeepaliveDropsADeadConnectionAndTheNextRunRedials(t *testing.T) {
	f := newFixture(t)
	srv := f.server(sshtest.Options{})
	fp := &freezingProxy{upstream: srv.Addr}
	proxy := listenRaw(t, fp.serve)
	t.Cleanup(fp.closeAll) // before listenRaw's cleanup waits for its handlers
	p := newPool(t, Options{Keepalive: 200 * time.Millisecond})
	tg := f.target("a1", srv)
	tg.Port = proxy.port()
	// The proxy forwards to srv: known_hosts lists srv's key at the proxy's port.
	appendLine(t, f.knownHosts, strings.Replace(srv.KnownHostsLine("127.0.0.1"), strconv.Itoa(srv.Port), strconv.Itoa(proxy.port()), 1))
	run(t, p, tg, "true")
	p.mu.Lock()
	var c *hostConn
	for _, hc := range p.conns {
		c = hc
	}
	p.mu.Unlock()
	fp.freeze()
	deadline := time.Now().Add(testTimeout)
	for !c.dead.Load() {
		if time.Now().After(deadline) {
			t.Fatal("keepalive did not notice the dead connection")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if res := run(t, p, tg, "echo back"); string(res.Stdout) != "back\n" {
		t.Errorf("after redial: stdout %q", res.Stdout)
	}
	if got := p.dials.Load(); got != 2 {
		t.Errorf("%d dials, want 2", got)
	}
}

func TestRunStopsTheCommandWhenTheContextEnds(t *testing.T) {
	f := newFixture(t)
	srv := f.server(sshtest.Options{})
	p := newPool(t, Options{})
	pidFile := filepath.Join(f.dir, "pid")
	ctx, started := pidWhenWritten(t, pidFile)
	res, err := p.Run(ctx, f.target("a1", srv), "echo started; sleep 0.2; echo $$ > "+Quote(pidFile)+"; exec sleep 30", nil)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "host a1:") {
		t.Fatalf("got %v, want the context's error naming the host", err)
	}
	if res.ExitCode != -1 || string(res.Stdout) != "started\n" {
		t.Errorf("got exit %d stdout %q, want -1 and the output so far", res.ExitCode, res.Stdout)
	}
	pid := started()
	if pid == 0 {
		t.Fatal("the command never started")
	}
	deadline := time.Now().Add(testTimeout)
	for sshtest.ProcessRuns(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("remote command %d still runs", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The connection is still good for the next command.
	if res := run(t, p, f.target("a1", srv), "echo again"); string(res.Stdout) != "again\n" {
		t.Errorf("next command printed %q", res.Stdout)
	}
}

// Streams larger than the pooled copy buffer arrive whole, in order, in
// both directions: stdin from a reader that is not a strings.Reader (so
// it goes through the buffer), stdout and stderr in many reads.
func TestRunCopiesStreamsLargerThanItsBuffers(t *testing.T) {
	f := newFixture(t)
	srv := f.server(sshtest.Options{})
	p := newPool(t, Options{})
	var in bytes.Buffer
	for i := range 20000 {
		fmt.Fprintf(&in, "%d\n", i)
	}
	want := in.String()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	res, err := p.Run(ctx, f.target("a1", srv), "tee /dev/stderr", io.MultiReader(strings.NewReader(want[:7]), strings.NewReader(want[7:])))
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != want || string(res.Stderr) != want || res.ExitCode != 0 {
		t.Errorf("stdout %d bytes, stderr %d, exit %d; want %d bytes each, exit 0", len(res.Stdout), len(res.Stderr), res.ExitCode, len(want))
	}
}

func TestRunRefusesOutputBeyondTheLimit(t *testing.T) {
	f := newFixture(t)
	srv := f.server(sshtest.Options{})
	p := newPool(t, Options{MaxOutputBytes: 1000})
	res, err := p.Run(context.Background(), f.target("a1", srv), "head -c 5000 /dev/zero", nil)
	if err == nil || !strings.Contains(err.Error(), "more than 1000 bytes to stdout") {
		t.Fatalf("got %v", err)
	}
	if len(res.Stdout) != 1000 || !bytes.Equal(res.Stdout, make([]byte, 1000)) {
		t.Errorf("kept %d bytes, want the first 1000", len(res.Stdout))
	}
}

func TestRunSendsTheTargetsUser(t *testing.T) {
	f := newFixture(t)
	srv := f.server(sshtest.Options{Users: []string{"gpu"}})
	p := newPool(t, Options{})
	tg := f.target("a1", srv)
	tg.User = "gpu"
	run(t, p, tg, "true")
	tg.User = "someone-else"
	_, err := p.Run(context.Background(), tg, "true", nil)
	if err == nil || !strings.Contains(err.Error(), `authentication as "someone-else"`) {
		t.Fatalf("got %v, want an authentication error naming the user", err)
	}
}

func TestRunAfterCloseFails(t *testing.T) {
	f := newFixture(t)
	srv := f.server(sshtest.Options{})
	p := newPool(t, Options{})
	run(t, p, f.target("a1", srv), "true")
	p.Close()
	if _, err := p.Run(context.Background(), f.target("a1", srv), "true", nil); !errors.Is(err, ErrPoolClosed) {
		t.Fatalf("got %v, want ErrPoolClosed", err)
	}
}

// TestRunSaysWhichHostKeyTheMachineProved: every result carries the key
// the host was reached with, as an authorized_keys line that pins it.
func TestRunSaysWhichHostKeyTheMachineProved(t *testing.T) {
	f := newFixture(t)
	srv := f.server(sshtest.Options{})
	p := newPool(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for range 2 { // the dial's result, then a reused connection's
		res, err := p.Run(ctx, f.target("a1", srv), "true", nil)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(srv.HostKey.PublicKey())))
		if res.HostKey != want {
			t.Fatalf("host key %q, want %q", res.HostKey, want)
		}
		pinned := f.target("a1", srv)
		pinned.HostKeys, pinned.KnownHostsFile = []string{res.HostKey}, filepath.Join(t.TempDir(), "none")
		if _, err := p.Run(ctx, pinned, "true", nil); err != nil {
			t.Fatalf("pinned to the recorded key: %v", err)
		}
	}
}

package ssh

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gpulayer/gpulayer/ssh/sshtest"
)

// testTimeout bounds every command a test runs, so that a bug hangs no
// test for long.
const testTimeout = 20 * time.Second

// fixture is a client key, a known_hosts file and a HOME of its own.
type fixture struct {
	t          *testing.T
	dir        string
	keyFile    string
	key        ssh.Signer
	knownHosts string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv("SSH_AUTH_SOCK", "")
	// The machine's own /etc/ssh/ssh_known_hosts must not leak in.
	saved := globalKnownHostsFile
	globalKnownHostsFile = filepath.Join(dir, "ssh_known_hosts")
	t.Cleanup(func() { globalKnownHostsFile = saved })
	keyFile, key, err := sshtest.WriteClientKey(filepath.Join(dir, "keys"))
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, dir: dir, keyFile: keyFile, key: key, knownHosts: filepath.Join(dir, "known_hosts")}
}

// server starts an in-process server that accepts the fixture's key and
// is listed in its known_hosts file.
func (f *fixture) server(opts sshtest.Options) *sshtest.Server {
	f.t.Helper()
	srv := f.unlistedServer(opts)
	f.trust(srv)
	return srv
}

// unlistedServer is a server that known_hosts does not list.
func (f *fixture) unlistedServer(opts sshtest.Options) *sshtest.Server {
	f.t.Helper()
	opts.AuthorizedKeys = append(opts.AuthorizedKeys, f.key.PublicKey())
	srv, err := sshtest.Start(opts)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { srv.Close() })
	return srv
}

func (f *fixture) trust(srv *sshtest.Server) {
	f.t.Helper()
	appendLine(f.t, f.knownHosts, srv.KnownHostsLine("127.0.0.1"))
}

func appendLine(t *testing.T, path, line string) {
	t.Helper()
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) target(name string, srv *sshtest.Server) Target {
	return Target{
		Name:           name,
		Address:        "127.0.0.1",
		Port:           srv.Port,
		IdentityFiles:  []string{f.keyFile},
		KnownHostsFile: f.knownHosts,
	}
}

func newPool(t *testing.T, opts Options) *Pool {
	t.Helper()
	if opts.AgentSocket == "" {
		opts.NoAgent = true
	}
	p := NewPool(opts)
	t.Cleanup(func() { p.Close() })
	return p
}

func run(t *testing.T, p *Pool, tg Target, command string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	res, err := p.Run(ctx, tg, command, nil)
	if err != nil {
		t.Fatalf("Run(%q): %v", command, err)
	}
	return res
}

// rawListener accepts TCP connections on 127.0.0.1 and hands each to
// serve; it tracks them so the test can close them all.
type rawListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func listenRaw(t *testing.T, serve func(net.Conn)) *rawListener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &rawListener{Listener: l}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.conns = append(r.conns, c)
			r.mu.Unlock()
			r.wg.Add(1)
			go func() { defer r.wg.Done(); serve(c) }()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		r.mu.Lock()
		for _, c := range r.conns {
			c.Close()
		}
		r.mu.Unlock()
		r.wg.Wait()
	})
	return r
}

func (r *rawListener) port() int { return r.Addr().(*net.TCPAddr).Port }

// pidWhenWritten returns a context that is cancelled once path holds a
// pid, so that a test stops a remote command only after it started, however
// loaded the machine; and a function returning that pid.
func pidWhenWritten(t *testing.T, path string) (context.Context, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var pid atomic.Int64
	go func() {
		defer cancel()
		deadline := time.Now().Add(testTimeout)
		for time.Now().Before(deadline) {
			data, _ := os.ReadFile(path)
			if n, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && n > 0 {
				pid.Store(int64(n))
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	t.Cleanup(cancel)
	return ctx, func() int { <-ctx.Done(); return int(pid.Load()) }
}

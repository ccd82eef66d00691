//go:build unix

// Package sshdtest starts OpenSSH's sshd for tests: a real server, on
// 127.0.0.1, with a configuration, host key and authorized keys of the
// test's own, so that gpulayer's SSH client and probe are tested against
// what production machines run, not only against the in-process
// sshtest server.
//
// sshd runs as root (it must, to log users in); Start skips the test when
// sshd is not installed or the test does not run as root, except under
// CI=true, where that is a failure: CI installs openssh-server (.ci/run)
// and must not pass by skipping.
//
// It is for tests only: it writes into the test's temporary directory and
// creates /run/sshd, sshd's privilege separation directory.
package sshdtest

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Options configure the sshd a test starts.
type Options struct {
	// AuthorizedKeys may log in as the user running the test.
	AuthorizedKeys []ssh.PublicKey
	// HostKey is sshd's host key (ed25519.PrivateKey, *ecdsa.PrivateKey or
	// *rsa.PrivateKey); nil generates an ed25519 key.
	HostKey crypto.PrivateKey
	// SetEnv are "NAME=value" variables sshd sets in every session (its
	// SetEnv option), e.g. a PATH that puts a fake nvidia-smi first.
	SetEnv []string
	// Config are further sshd_config lines, e.g. "MaxSessions 4". They
	// come before the defaults, so they override them. (SetEnv goes in
	// SetEnv: sshd reads only one SetEnv line.)
	Config []string
}

// Server is a running sshd.
type Server struct {
	// Addr is "127.0.0.1:port".
	Addr string
	Port int
	// HostKey is the public host key sshd presents.
	HostKey ssh.PublicKey
	// User is the user that AuthorizedKeys log in as: the current user.
	User string
	// Dir holds the configuration, keys and pid file.
	Dir string

	cmd  *exec.Cmd
	log  *syncBuffer
	done chan struct{}
}

// Path is where sshd is looked for first; PATH is searched after it.
const Path = "/usr/sbin/sshd"

// startupTimeout bounds how long sshd may take to accept connections.
const startupTimeout = 10 * time.Second

// Start starts sshd for the test and stops it when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	bin := Path
	if _, err := os.Stat(bin); err != nil {
		found, lerr := exec.LookPath("sshd")
		if lerr != nil {
			unavailable(t, "OpenSSH's sshd is not installed (Debian package openssh-server)")
		}
		bin = found
	}
	if os.Geteuid() != 0 {
		unavailable(t, "sshd must run as root to log users in; this test does not run as root")
	}
	s := &Server{Dir: t.TempDir(), User: currentUser()}
	if err := s.writeFiles(opts); err != nil {
		t.Fatalf("sshdtest: %v", err)
	}
	// sshd's privilege separation directory; Debian's init script makes it.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatalf("sshdtest: %v", err)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		if lastErr = s.start(bin, opts); lastErr == nil {
			t.Cleanup(func() {
				s.stop()
				if t.Failed() {
					t.Logf("sshd log:\n%s", s.log.String())
				}
			})
			return s
		}
	}
	t.Fatalf("sshdtest: %v", lastErr)
	return nil
}

// unavailable skips the test, or fails it under CI.
func unavailable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("sshdtest: %s, and CI=true: CI must run the OpenSSH tests (.ci/run installs openssh-server)", why)
		return
	}
	t.Skipf("sshdtest: %s", why)
}

func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "root"
}

func (s *Server) writeFiles(opts Options) error {
	key := opts.HostKey
	if key == nil {
		_, priv, err := ed25519.GenerateKey(nil)
		if err != nil {
			return err
		}
		key = priv
	}
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		return fmt.Errorf("host key: %w", err)
	}
	s.HostKey = signer.PublicKey()
	block, err := ssh.MarshalPrivateKey(key, "sshdtest")
	if err != nil {
		return fmt.Errorf("host key: %w", err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "host_key"), pem.EncodeToMemory(block), 0o600); err != nil {
		return err
	}
	var keys bytes.Buffer
	for _, k := range opts.AuthorizedKeys {
		keys.Write(ssh.MarshalAuthorizedKey(k))
	}
	return os.WriteFile(filepath.Join(s.Dir, "authorized_keys"), keys.Bytes(), 0o600)
}

// freePort returns a port nothing listens on at the moment. sshd may lose
// it to another process before it binds; Start then tries again.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) config(port int, opts Options) string {
	// sshd keeps the first value it reads for an option: the caller's
	// lines come first so that they override the defaults below.
	lines := append([]string{}, opts.Config...)
	lines = append(lines,
		"Port "+strconv.Itoa(port),
		"ListenAddress 127.0.0.1",
		"HostKey "+filepath.Join(s.Dir, "host_key"),
		"AuthorizedKeysFile "+filepath.Join(s.Dir, "authorized_keys"),
		"PidFile "+filepath.Join(s.Dir, "sshd.pid"),
		"UsePAM no",
		"StrictModes no",
		"PubkeyAuthentication yes",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"PermitRootLogin prohibit-password",
		"AllowTcpForwarding yes",
		"LogLevel VERBOSE",
	)
	// Debian's bash sources ~/.bashrc for commands run by sshd unless it
	// is a nested shell; a user's dotfiles (pyenv init, ...) can take
	// seconds and must not make tests slow or flaky. sshd uses only the
	// first SetEnv line, so all variables go on one.
	setEnv := "SetEnv SHLVL=1"
	for _, kv := range opts.SetEnv {
		setEnv += " " + quoteConfig(kv)
	}
	lines = append(lines, setEnv)
	return strings.Join(lines, "\n") + "\n"
}

// quoteConfig quotes an sshd_config argument that holds spaces.
func quoteConfig(s string) string {
	if !strings.ContainsAny(s, " \t\"") {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

func (s *Server) start(bin string, opts Options) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	cfg := filepath.Join(s.Dir, "sshd_config")
	if err := os.WriteFile(cfg, []byte(s.config(port, opts)), 0o600); err != nil {
		return err
	}
	// Check the configuration first: its errors are clearer than a dead
	// server's.
	if out, err := exec.Command(bin, "-t", "-f", cfg).CombinedOutput(); err != nil {
		return fmt.Errorf("sshd -t: %v\n%s", err, out)
	}
	s.log = &syncBuffer{}
	cmd := exec.Command(bin, "-D", "-e", "-f", cfg)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start sshd: %w", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(s.done) }()
	s.Port = port
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(startupTimeout)
	for {
		if err := s.greets(); err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("sshd exited: %v\n%s", cmd.ProcessState, s.log.String())
		default:
		}
		if time.Now().After(deadline) {
			s.stop()
			return fmt.Errorf("sshd did not accept connections on %s within %s\n%s", s.Addr, startupTimeout, s.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// greets reports whether sshd accepts a connection and sends its version.
func (s *Server) greets() error {
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 8)
	if _, err := c.Read(buf); err != nil {
		return err
	}
	if !bytes.HasPrefix(buf, []byte("SSH-")) {
		return fmt.Errorf("unexpected greeting %q", buf)
	}
	return nil
}

// stop ends sshd and the sessions it forked.
func (s *Server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}

// KnownHostsLine is the known_hosts line for this sshd reached as
// hostname, e.g. "[127.0.0.1]:40123 ssh-ed25519 AAAA...".
func (s *Server) KnownHostsLine(hostname string) string {
	return knownhosts.Line([]string{knownhosts.Normalize(net.JoinHostPort(hostname, strconv.Itoa(s.Port)))}, s.HostKey)
}

// Log returns what sshd has logged so far.
func (s *Server) Log() string { return s.log.String() }

// syncBuffer is a bytes.Buffer safe for the writer goroutine of exec and
// a reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

package sshtest

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Options configure a Server.
type Options struct {
	// HostKey is the server's host key; nil generates an ed25519 key.
	HostKey ssh.Signer
	// ExtraHostKeys are further host keys, of other types, that the server
	// can prove its identity with; the client picks one type.
	ExtraHostKeys []ssh.Signer
	// AuthorizedKeys are the client keys the server accepts. With none,
	// every client is refused.
	AuthorizedKeys []ssh.PublicKey
	// Users are the user names the server accepts; empty means any.
	Users []string
	// Env is added to each command's environment ("NAME=value"), after the
	// server process's own environment, so it overrides it.
	Env []string
	// EnvOnly makes Env the commands' whole environment: nothing of the
	// server process's own (its SSH agent socket, its secrets) is passed
	// on, as sshd passes little of its own.
	EnvOnly bool
	// Dir is the commands' working directory; empty means the server
	// process's.
	Dir string
	// Shell runs each command as `Shell -c command`; empty means /bin/sh.
	// Runner, when set, replaces it.
	Shell string
	// Runner runs each command instead of `Shell -c`, for servers that
	// interpret commands in-process; nil runs them with Shell.
	Runner CommandRunner
	// Listener is where the server accepts connections; nil listens on a
	// free port of 127.0.0.1. The server closes it.
	Listener net.Listener
	// MaxSessions refuses a connection's sessions beyond this many open at
	// once, as sshd's MaxSessions does; 0 means no limit.
	MaxSessions int
	// AllowTCPForwarding accepts "direct-tcpip" channels, so the server
	// can serve as a bastion.
	AllowTCPForwarding bool
	// HandshakeTimeout bounds a client's handshake; 0 means 30s.
	HandshakeTimeout time.Duration
	// KeyExchanges are the key exchange algorithms the server offers; nil
	// offers x/crypto/ssh's defaults.
	KeyExchanges []string
	// Stall makes the server stop answering at one step of every session,
	// as a hung or hostile sshd does, for tests of clients' timeouts. It
	// still answers keepalives, so the connection looks alive.
	Stall Stall
}

// Stall is a step of a session at which a server stops answering.
type Stall int

const (
	// StallNothing answers every step.
	StallNothing Stall = iota
	// StallChannelOpen never answers a session's channel-open request.
	StallChannelOpen
	// StallExec accepts sessions and never answers their exec requests.
	StallExec
)

// Server is a running SSH server.
type Server struct {
	// Addr is where it listens, "127.0.0.1:port".
	Addr string
	// Port is the port of Addr.
	Port int
	// HostKey is the key the server proves its identity with.
	HostKey ssh.Signer

	opts     Options
	config   *ssh.ServerConfig
	listener net.Listener
	env      []string

	mu     sync.Mutex
	conns  map[*ssh.ServerConn]struct{}
	closed bool
	down   bool // SetDown: every connection is dropped at once
	wg     sync.WaitGroup

	stats struct {
		conns, sessions, peak atomic.Int64
	}
}

// Stats counts what a server has served.
type Stats struct {
	// Conns is the number of connections that finished the handshake.
	Conns int
	// Sessions is the number of sessions opened.
	Sessions int
	// PeakCommandsPerConn is the most commands running at once on one
	// connection. (A count of open sessions would lag: the server learns
	// that a session closed after the client may have opened the next.)
	PeakCommandsPerConn int
}

// Start starts a server and returns once it accepts connections.
func Start(opts Options) (*Server, error) {
	if opts.HostKey == nil {
		k, err := GenerateKey()
		if err != nil {
			return nil, err
		}
		opts.HostKey = k
	}
	if opts.Shell == "" {
		opts.Shell = "/bin/sh"
	}
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = 30 * time.Second
	}
	authorized := map[string]bool{}
	for _, k := range opts.AuthorizedKeys {
		authorized[string(k.Marshal())] = true
	}
	users := map[string]bool{}
	for _, u := range opts.Users {
		users[u] = true
	}
	config := &ssh.ServerConfig{
		PublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if len(users) > 0 && !users[meta.User()] {
				return nil, fmt.Errorf("user %q is not allowed", meta.User())
			}
			if authorized[string(key.Marshal())] {
				return nil, nil
			}
			return nil, fmt.Errorf("key %s is not authorized", ssh.FingerprintSHA256(key))
		},
	}
	config.KeyExchanges = opts.KeyExchanges
	config.AddHostKey(opts.HostKey)
	for _, k := range opts.ExtraHostKeys {
		config.AddHostKey(k)
	}

	l := opts.Listener
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("sshtest: listen: %w", err)
		}
	}
	s := &Server{
		Addr:     l.Addr().String(),
		HostKey:  opts.HostKey,
		opts:     opts,
		config:   config,
		listener: l,
		env:      commandEnv(opts.Env, opts.EnvOnly),
		conns:    map[*ssh.ServerConn]struct{}{},
	}
	if _, port, err := net.SplitHostPort(s.Addr); err == nil {
		s.Port, _ = strconv.Atoi(port)
	}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// GenerateKey returns a new ed25519 key, for a host or a client.
func GenerateKey() (ssh.Signer, error) {
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, fmt.Errorf("sshtest: generate key: %w", err)
	}
	return ssh.NewSignerFromKey(priv)
}

// KnownHostsLine is the known_hosts line for this server reached as
// hostname on its port, e.g. "[127.0.0.1]:40123 ssh-ed25519 AAAA...".
func (s *Server) KnownHostsLine(hostname string) string {
	return knownhosts.Line([]string{knownhosts.Normalize(net.JoinHostPort(hostname, strconv.Itoa(s.Port)))}, s.HostKey.PublicKey())
}

// Stats returns what the server has served so far.
func (s *Server) Stats() Stats {
	return Stats{
		Conns:               int(s.stats.conns.Load()),
		Sessions:            int(s.stats.sessions.Load()),
		PeakCommandsPerConn: int(s.stats.peak.Load()),
	}
}

// closeWait bounds how long Close waits for connections to wind down.
const closeWait = 10 * time.Second

// Close stops accepting, closes every connection and kills the commands
// still running.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	err := s.listener.Close()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeWait):
		return errors.New("sshtest: connections still open after close")
	}
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// SetDown makes the server behave as a machine that stopped answering
// (down = true: its connections are closed, and new ones are dropped
// before the handshake) or answers again (false), keeping its address and
// host key: what a network partition or a reboot looks like from a client.
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
	if down {
		for c := range s.conns {
			c.Close()
		}
	}
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(nc)
		}()
	}
}

func (s *Server) serve(nc net.Conn) {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down {
		nc.Close()
		return
	}
	nc.SetDeadline(time.Now().Add(s.opts.HandshakeTimeout))
	sc, chans, reqs, err := ssh.NewServerConn(nc, s.config)
	if err != nil {
		nc.Close()
		return
	}
	nc.SetDeadline(time.Time{})
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		sc.Close()
		return
	}
	s.conns[sc] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, sc)
		s.mu.Unlock()
		sc.Close()
	}()
	s.stats.conns.Add(1)

	// Global requests (keepalive@openssh.com, forwarding) are refused,
	// which still answers a keepalive.
	go ssh.DiscardRequests(reqs)

	var open, running atomic.Int64
	var handlers sync.WaitGroup
	for nch := range chans {
		switch nch.ChannelType() {
		case "session":
			if s.opts.Stall == StallChannelOpen {
				// Neither accepted nor rejected: the client waits for an
				// answer until it gives up or the connection closes.
				continue
			}
			if !s.roomForSession(&open) {
				nch.Reject(ssh.Prohibited, "too many sessions on this connection")
				continue
			}
			ch, chReqs, err := nch.Accept()
			if err != nil {
				open.Add(-1)
				continue
			}
			s.stats.sessions.Add(1)
			handlers.Add(1)
			go func() {
				defer handlers.Done()
				s.session(ch, chReqs, &open, &running)
			}()
		case "direct-tcpip":
			if !s.opts.AllowTCPForwarding {
				nch.Reject(ssh.Prohibited, "TCP forwarding is off")
				continue
			}
			handlers.Add(1)
			go func() {
				defer handlers.Done()
				forward(nch)
			}()
		default:
			nch.Reject(ssh.UnknownChannelType, "unsupported channel type")
		}
	}
	handlers.Wait()
}

// settleWait is how long a session beyond MaxSessions waits for sessions
// that are closing to be counted out before it is refused.
const settleWait = 200 * time.Millisecond

// roomForSession counts a new session in, unless MaxSessions are open.
// x/crypto tells the server a session closed (by closing its request
// channel) before it hands over the next one, but the goroutine that counts
// it out may not have run yet; sshd, which counts synchronously, would not
// refuse that session, so neither does this server.
func (s *Server) roomForSession(open *atomic.Int64) bool {
	max := int64(s.opts.MaxSessions)
	if max <= 0 {
		open.Add(1)
		return true
	}
	deadline := time.Now().Add(settleWait)
	for {
		n := open.Load()
		if n < max {
			if open.CompareAndSwap(n, n+1) {
				return true
			}
			continue
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

func (s *Server) notePeak(n int64) {
	for {
		p := s.stats.peak.Load()
		if n <= p || s.stats.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

// CommandRunner runs a session's exec command some other way than a
// shell process, for example with a shell interpreter in this process.
type CommandRunner interface {
	// Run runs command with env (the complete environment) in dir, reading
	// stdin and writing stdout and stderr, and returns its exit status.
	// ctx is cancelled when the client signals the command or the session
	// goes away before it exited; Run must then stop it and return. A
	// non-nil error is written to the session's stderr.
	Run(ctx context.Context, command string, env []string, dir string,
		stdin io.Reader, stdout, stderr io.Writer) (exitStatus int, err error)
}

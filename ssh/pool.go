package ssh

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gpulayer/gpulayer/internal/iostreams"
)

// Defaults of Options.
const (
	DefaultParallelism        = 64
	DefaultMaxSessionsPerConn = 8 // below OpenSSH's MaxSessions of 10
	DefaultKeepalive          = 15 * time.Second
	DefaultMaxOutputBytes     = 64 << 20
)

// keepaliveCountMax is how many keepalive intervals may pass without an
// answer before the connection is given up, as OpenSSH's ServerAliveCountMax.
const keepaliveCountMax = 3

// Options tune a Pool. The zero value gives the defaults.
type Options struct {
	// Parallelism bounds the dials (TCP connect and SSH handshake) in
	// flight at once; 0 means DefaultParallelism.
	Parallelism int
	// MaxSessionsPerConn bounds the sessions open at once on one
	// connection; later commands wait. 0 means DefaultMaxSessionsPerConn.
	MaxSessionsPerConn int
	// Keepalive is the interval between keepalive requests on an idle or
	// busy connection; a connection that leaves three unanswered is
	// closed. 0 means DefaultKeepalive; a negative value turns them off.
	Keepalive time.Duration
	// AgentSocket is the SSH agent's socket; empty means $SSH_AUTH_SOCK.
	AgentSocket string
	// NoAgent turns the agent off, whatever AgentSocket and the
	// environment say.
	NoAgent bool
	// Retry says how dials that the server reset are tried again.
	Retry RetryPolicy
	// MaxOutputBytes bounds what one command may write to stdout and to
	// stderr, each; what goes beyond is dropped and Run returns an error.
	// 0 means DefaultMaxOutputBytes.
	MaxOutputBytes int
}

// RetryPolicy says how a dial is tried again after the server closed or
// reset the connection before the handshake finished, which is what sshd
// does to a burst of new connections beyond its MaxStartups. Timeouts,
// refused connections, authentication and host key failures are never
// retried.
type RetryPolicy struct {
	// Attempts is the number of tries in all; 0 means 4, 1 turns retries off.
	Attempts int
	// InitialBackoff is the wait before the second try, doubled for each
	// later one, with jitter; 0 means 100ms.
	InitialBackoff time.Duration
	// MaxBackoff caps one wait; 0 means 2s.
	MaxBackoff time.Duration
}

func (o Options) withDefaults() Options {
	if o.Parallelism <= 0 {
		o.Parallelism = DefaultParallelism
	}
	if o.MaxSessionsPerConn <= 0 {
		o.MaxSessionsPerConn = DefaultMaxSessionsPerConn
	}
	if o.Keepalive == 0 {
		o.Keepalive = DefaultKeepalive
	}
	if o.AgentSocket == "" {
		o.AgentSocket = os.Getenv("SSH_AUTH_SOCK")
	}
	if o.NoAgent {
		o.AgentSocket = ""
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if o.Retry.Attempts <= 0 {
		o.Retry.Attempts = 4
	}
	if o.Retry.InitialBackoff <= 0 {
		o.Retry.InitialBackoff = 100 * time.Millisecond
	}
	if o.Retry.MaxBackoff <= 0 {
		o.Retry.MaxBackoff = 2 * time.Second
	}
	return o
}

// Pool keeps one SSH connection per host and runs commands as sessions on
// it. It is safe for concurrent use. Close it when done.
type Pool struct {
	opts    Options
	ctx     context.Context // cancelled by Close; bounds dials
	cancel  context.CancelFunc
	dialSem chan struct{}
	keys    *keySource

	mu         sync.Mutex // never held across I/O
	conns      map[string]*hostConn
	knownHosts map[string]*pending[*knownHostsFile]
	closed     bool
	wg         sync.WaitGroup // dials, keepalives and watchers

	// For tests: dial attempts made, and the most in flight at once.
	dials, dialing, peakDialing atomic.Int64
}

// hostConn is the pool's connection to one host. ready is closed once the
// dial finished, with client or err set.
type hostConn struct {
	key      string
	ready    chan struct{}
	client   *ssh.Client
	hostKey  string // the key the host proved it holds (authorized_keys form)
	err      error
	sessions chan struct{} // semaphore of MaxSessionsPerConn
	dead     atomic.Bool   // the connection ended
}

// NewPool returns a pool with no connections yet.
func NewPool(opts Options) *Pool {
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool{
		opts:       opts,
		ctx:        ctx,
		cancel:     cancel,
		dialSem:    make(chan struct{}, opts.Parallelism),
		keys:       &keySource{agentSocket: opts.AgentSocket},
		conns:      map[string]*hostConn{},
		knownHosts: map[string]*pending[*knownHostsFile]{},
	}
}

// ErrPoolClosed is returned by Run after Close.
var ErrPoolClosed = errors.New("ssh pool is closed")

// closeWait bounds how long Close waits for the pool's goroutines. Closing
// the connections ends them (every wait of theirs also ends with the
// pool's context), so it is only a guard.
const closeWait = 5 * time.Second

// Close closes every connection, and the agent's, and waits for the pool's
// goroutines, at most closeWait. Commands still running fail; dials still
// in flight end.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	conns := p.conns
	p.conns = map[string]*hostConn{}
	p.mu.Unlock()
	p.cancel()
	p.keys.close()
	for _, c := range conns {
		select {
		case <-c.ready:
			if c.client != nil {
				c.client.Close()
			}
		default:
			// Still dialing: establish closes what it makes, seeing
			// p.closed.
		}
	}
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(closeWait):
		return fmt.Errorf("ssh pool: dials or connections had not ended %s after Close", closeWait)
	}
}

// conn returns the connection for r, dialing it if no live one exists.
// Concurrent callers for the same host share one dial; a failed dial is
// not remembered, so a later call dials again.
func (p *Pool) conn(ctx context.Context, r *resolved) (*hostConn, error) {
	key := r.key()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrPoolClosed
	}
	c := p.conns[key]
	if c == nil || c.dead.Load() {
		c = &hostConn{key: key, ready: make(chan struct{}), sessions: make(chan struct{}, p.opts.MaxSessionsPerConn)}
		p.conns[key] = c
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.establish(r, c)
		}()
	}
	p.mu.Unlock()
	select {
	case <-c.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("connect to %s: not connected yet: %w", r.hostPort(), ctx.Err())
	}
	if c.err != nil {
		return nil, c.err
	}
	return c, nil
}

// establish dials c and, once it is up, watches it: a connection that ends
// leaves the pool so the next command dials again.
func (p *Pool) establish(r *resolved, c *hostConn) {
	client, hostKey, err := p.dial(r)
	c.client, c.hostKey, c.err = client, hostKey, err
	if err != nil {
		p.forget(c)
		close(c.ready)
		return
	}
	close(c.ready)
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		// Close ran while this dial was in flight and left it to us.
		client.Close()
	}
	done := make(chan struct{})
	if p.opts.Keepalive > 0 {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			keepalive(client, p.opts.Keepalive, done)
		}()
	}
	client.Wait()
	close(done)
	c.dead.Store(true)
	p.forget(c)
}

// forget drops c from the pool if it is still the pool's connection.
func (p *Pool) forget(c *hostConn) {
	p.mu.Lock()
	if p.conns[c.key] == c {
		delete(p.conns, c.key)
	}
	p.mu.Unlock()
}

// keepalive sends keepalive@openssh.com requests every interval and closes
// the connection when keepaliveCountMax intervals pass without an answer.
// Any answer counts, including sshd's refusal of the unknown request.
func keepalive(client *ssh.Client, interval time.Duration, done <-chan struct{}) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		answered := make(chan error, 1)
		go func() {
			_, _, err := client.SendRequest("keepalive@openssh.com", true, nil)
			answered <- err
		}()
		timer := time.NewTimer(interval * keepaliveCountMax)
		select {
		case err := <-answered:
			timer.Stop()
			if err != nil {
				client.Close()
				return
			}
		case <-timer.C:
			client.Close()
			return
		case <-done:
			timer.Stop()
			return
		}
	}
}

// knownHostsFor returns the pool's parsed copy of r's known_hosts files,
// reading them on first use. A read that fails is tried again by the next
// dial.
func (p *Pool) knownHostsFor(ctx context.Context, r *resolved) (*knownHostsFile, error) {
	key := strings.Join(append([]string{r.knownHosts}, r.globalKnownHosts...), "\x00")
	p.mu.Lock()
	f := p.knownHosts[key]
	if f == nil || (f.made() && f.err != nil) {
		f = startPending(func() (*knownHostsFile, error) { return newKnownHostsFile(r.knownHosts, r.globalKnownHosts) })
		p.knownHosts[key] = f
	}
	p.mu.Unlock()
	kh, err := f.wait(ctx)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("known_hosts %s: not read in time: %w", r.knownHosts, err)
	}
	return kh, err
}

// HostError is how Run and WriteFile fail: the host's name and what went
// wrong there.
type HostError struct {
	Host string // Target.Name, or its Address when it has no name
	Err  error
}

// Error reads "host a3: ...". Parts of Err can come from the machine (a
// disconnect reason, a channel refusal): control bytes are replaced so
// that printing the error cannot drive the terminal.
func (e *HostError) Error() string {
	return "host " + e.Host + ": " + iostreams.Sanitize(e.Err.Error(), false)
}

func (e *HostError) Unwrap() error { return e.Err }

func hostError(t Target, err error) error {
	return &HostError{Host: t.label(), Err: err}
}

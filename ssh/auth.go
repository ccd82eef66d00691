package ssh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// keySource finds the keys a pool offers: the SSH agent's and those of
// identity files. Files are read once per pool; the agent connection is
// shared by all dials and made again if it breaks, but not after the
// agent left a request unanswered: a hung agent would hold every dial.
// mu is never held while a file is read or the agent is asked.
type keySource struct {
	agentSocket string

	mu     sync.Mutex
	files  map[string]*pending[fileKey]
	agent  *pending[*agentLink] // nil until a dial needs the agent
	closed bool
}

// fileKey is the outcome of reading one identity file.
type fileKey struct {
	signer    ssh.Signer
	encrypted bool
	err       error // nil also when the file does not exist
	missing   bool
}

// offered is what a dial offers a host, and what it could not use.
type offered struct {
	signers   []ssh.Signer
	agentKeys int
	agentErr  error
	files     []string // identity files that gave a key
	encrypted []string // identity files skipped because they need a passphrase
}

func (o *offered) describe() string {
	var parts []string
	if o.agentKeys > 0 {
		parts = append(parts, fmt.Sprintf("%d agent key(s)", o.agentKeys))
	}
	if len(o.files) > 0 {
		parts = append(parts, "identity file(s) "+strings.Join(o.files, ", "))
	}
	if len(parts) == 0 {
		return "no keys"
	}
	return strings.Join(parts, " and ")
}

// hint says how to make the missing keys usable, or "" when nothing can be
// suggested.
func (o *offered) hint(agentSocket string) string {
	var h []string
	if len(o.encrypted) > 0 {
		h = append(h, fmt.Sprintf("%s is passphrase protected and gpulayer does not prompt for passphrases; load it into the SSH agent with `ssh-add %s`",
			strings.Join(o.encrypted, ", "), strings.Join(quoteAll(o.encrypted), " ")))
	}
	if agentSocket == "" {
		h = append(h, "no SSH agent is running (SSH_AUTH_SOCK is not set)")
	} else if o.agentErr != nil {
		h = append(h, fmt.Sprintf("the SSH agent at %s could not be used: %v", agentSocket, o.agentErr))
	}
	return strings.Join(h, "; ")
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = Quote(s)
	}
	return out
}

// keysFor returns the keys to offer r. An identity file that the user
// named and that cannot be read is an error; the default files are only
// offered when they exist. ctx bounds the wait for files and the agent.
func (k *keySource) keysFor(ctx context.Context, r *resolved) (*offered, error) {
	o := &offered{}
	fromFiles := map[string]bool{}
	for _, path := range r.identities {
		fk, err := k.file(path).wait(ctx)
		switch {
		case err != nil:
			return nil, fmt.Errorf("identity file %s: not read in time: %w", path, err)
		case fk.missing && !r.explicitID:
			continue
		case fk.missing:
			return nil, fmt.Errorf("identity file %s does not exist", path)
		case fk.encrypted:
			o.encrypted = append(o.encrypted, path)
		case fk.err != nil:
			return nil, fmt.Errorf("identity file %s: %w", path, fk.err)
		default:
			o.signers = append(o.signers, fk.signer)
			o.files = append(o.files, path)
			fromFiles[string(fk.signer.PublicKey().Marshal())] = true
		}
	}
	// As OpenSSH does, the identity files come first and the agent's other
	// keys after them: sshd drops a client after MaxAuthTries (6) refused
	// keys, and an agent can hold more than that.
	signers, err := k.agentSigners(ctx)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("waiting for the SSH agent at %s: %w", k.agentSocket, ctx.Err())
	}
	o.agentErr = err
	for _, s := range signers {
		if !fromFiles[string(s.PublicKey().Marshal())] {
			o.signers = append(o.signers, s)
			o.agentKeys++
		}
	}
	if len(o.signers) == 0 {
		msg := "no SSH key to offer"
		if h := o.hint(k.agentSocket); h != "" {
			msg += ": " + h
		}
		return nil, errors.New(msg)
	}
	return o, nil
}

// file returns the reading of the identity file at path, started by the
// first dial that needs it.
func (k *keySource) file(path string) *pending[fileKey] {
	k.mu.Lock()
	defer k.mu.Unlock()
	if fk := k.files[path]; fk != nil {
		return fk
	}
	fk := startPending(func() (fileKey, error) { return readIdentityFile(path), nil })
	if k.files == nil {
		k.files = map[string]*pending[fileKey]{}
	}
	k.files[path] = fk
	return fk
}

func readIdentityFile(path string) fileKey {
	data, err := readRegularFile(path, maxIdentityFileBytes)
	if errors.Is(err, os.ErrNotExist) {
		return fileKey{missing: true}
	}
	if err != nil {
		return fileKey{err: err}
	}
	signer, err := ssh.ParsePrivateKey(data)
	var pm *ssh.PassphraseMissingError
	if errors.As(err, &pm) {
		return fileKey{encrypted: true}
	}
	if err != nil {
		return fileKey{err: fmt.Errorf("not a private key OpenSSH can read: %w", err)}
	}
	return fileKey{signer: signer}
}

// agentTimeout bounds connecting to the agent socket, and each request to
// the agent with its answer. An agent that asks its user to confirm each
// use of a key (ssh-add -c) needs the user to answer within it.
const agentTimeout = 2 * time.Second

// agentLink is one connection to the agent.
type agentLink struct {
	conn   *agentConn
	client agent.ExtendedAgent
}

// agentSigners lists the agent's keys, connecting again once if the shared
// connection broke. Signing with them is bounded by agentTimeout too.
func (k *keySource) agentSigners(ctx context.Context) ([]ssh.Signer, error) {
	if k.agentSocket == "" {
		return nil, nil
	}
	for attempt := 0; ; attempt++ {
		link, err := k.agentLink(ctx)
		if err != nil {
			return nil, err
		}
		signers, _, err := await(ctx, link.client.Signers, nil)
		if err == nil || ctx.Err() != nil || link.conn.stuck() || attempt == 1 {
			return signers, err
		}
	}
}

// agentLink returns the pool's connection to the agent, connecting when
// there is none or the last one broke. One that timed out is kept, with
// its error: the agent is not asked again.
func (k *keySource) agentLink(ctx context.Context) (*agentLink, error) {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil, ErrPoolClosed
	}
	link := k.agent
	if link != nil && link.made() && (link.err != nil || (link.v.conn.failed() != nil && !link.v.conn.stuck())) {
		link = nil // could not connect, or the connection broke: try again
	}
	if link == nil {
		socket := k.agentSocket
		link = startPending(func() (*agentLink, error) {
			var d net.Dialer
			ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
			defer cancel()
			conn, err := d.DialContext(ctx, "unix", socket)
			if err != nil {
				return nil, err
			}
			c := &agentConn{conn: conn, timeout: agentTimeout}
			// c is no io.Closer, so the client makes one request at a
			// time, each bounded by c's deadline (see agentConn).
			return &agentLink{conn: c, client: agent.NewClient(c)}, nil
		})
		k.agent = link
	}
	k.mu.Unlock()
	l, err := link.wait(ctx)
	if err == nil && l.conn.stuck() {
		return nil, l.conn.failed()
	}
	return l, err
}

func (k *keySource) close() {
	k.mu.Lock()
	k.closed = true
	link := k.agent
	k.mu.Unlock()
	if link == nil {
		return
	}
	if link.made() {
		if link.err == nil {
			link.v.conn.close(ErrPoolClosed)
		}
		return
	}
	// A connection still being made (within agentTimeout) is closed as
	// soon as it is.
	go func() {
		if l, err := link.wait(context.Background()); err == nil {
			l.conn.close(ErrPoolClosed)
		}
	}()
}

// agentConn is a connection to the agent on which every request and its
// answer must finish within timeout. The agent client writes each request
// in one Write and then reads the answer, one request at a time when its
// connection is no io.Closer (this one is not, on purpose: the pipelining
// client reads in the background between requests, where a deadline does
// not fit). Each Write arms the deadline the reads then share. After a
// failure the connection is closed, since a late answer would be taken for
// the answer to the next request, and every later call fails at once.
type agentConn struct {
	conn    net.Conn
	timeout time.Duration

	mu       sync.Mutex
	err      error
	timedOut bool
}

func (c *agentConn) Write(p []byte) (int, error) {
	if err := c.failed(); err != nil {
		return 0, err
	}
	if err := c.conn.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, c.fail(err)
	}
	n, err := c.conn.Write(p)
	return n, c.fail(err)
}

func (c *agentConn) Read(p []byte) (int, error) {
	if err := c.failed(); err != nil {
		return 0, err
	}
	n, err := c.conn.Read(p)
	return n, c.fail(err)
}

// fail records err, if any, as the connection's end and closes it.
func (c *agentConn) fail(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = fmt.Errorf("no answer within %s", c.timeout)
		c.mu.Lock()
		c.timedOut = true
		c.mu.Unlock()
	}
	c.close(err)
	return c.failed()
}

// close ends the connection with err, unless it already ended.
func (c *agentConn) close(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		c.conn.Close()
	}
}

func (c *agentConn) failed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// stuck reports whether the agent left a request unanswered.
func (c *agentConn) stuck() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timedOut
}

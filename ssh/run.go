package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// Result is what a finished command left behind.
type Result struct {
	Stdout, Stderr []byte
	// ExitCode is the command's exit status; 128+n when signal n ended it
	// (as sh reports it), and -1 when the command did not finish.
	ExitCode int
	// Signal names the signal that ended the command ("KILL", "TERM"),
	// empty when it exited by itself.
	Signal string
	// HostKey is the host key the machine proved it holds on the
	// connection the command ran on, in authorized_keys form ("ssh-ed25519
	// AAAA..."): what gpulayer records to reach the machine again.
	HostKey string
}

// abandonWait bounds how long Run waits for a cancelled session to wind
// down before it returns anyway.
const abandonWait = 250 * time.Millisecond

// Run runs command on t with sh semantics (sshd hands it to the user's
// login shell) and returns its output and exit status. The first Run for a
// host dials it; later ones open a new session on the same connection,
// waiting while MaxSessionsPerConn sessions are open on it.
//
// A command that exits non-zero is not an error: its status is in
// Result.ExitCode. Errors are for everything else (cannot dial, cannot
// authenticate, host key refused, ctx done, output too large), each a
// *HostError naming the host; with ctx done, Result holds the output so
// far. When ctx is done first, the remote command is sent SIGTERM and its
// session is closed; sshd delivers the signal only to users other than
// root, and does not kill a command without a pty when its session
// closes, so slow commands should also be wrapped in the remote `timeout`
// utility. stdin may be nil; otherwise it must reach EOF, since the
// session waits until it has been sent.
//
// Command is given to the remote shell as is: quote every value that came
// from a file or a machine with Quote.
func (p *Pool) Run(ctx context.Context, t Target, command string, stdin io.Reader) (Result, error) {
	r, err := resolve(t)
	if err != nil {
		return Result{ExitCode: -1}, hostError(t, err)
	}
	if err := ctx.Err(); err != nil {
		// Cancelled before it began (Ctrl-C during a fan-out): no dial.
		return Result{ExitCode: -1}, hostError(t, err)
	}
	for attempt := 0; ; attempt++ {
		c, err := p.conn(ctx, r)
		if err != nil {
			return Result{ExitCode: -1}, hostError(t, err)
		}
		res, err := p.runSession(ctx, c, command, stdin)
		res.HostKey = c.hostKey
		var stale *staleConnError
		if errors.As(err, &stale) && attempt == 0 {
			// The connection died between commands (host rebooted,
			// keepalive gave up): dial again once.
			c.dead.Store(true)
			p.forget(c)
			continue
		}
		if err != nil {
			return res, hostError(t, err)
		}
		return res, nil
	}
}

// staleConnError is a session that could not be opened because its
// connection had ended.
type staleConnError struct{ err error }

func (e *staleConnError) Error() string { return "connection lost: " + e.err.Error() }
func (e *staleConnError) Unwrap() error { return e.err }

func (p *Pool) runSession(ctx context.Context, c *hostConn, command string, stdin io.Reader) (Result, error) {
	select {
	case c.sessions <- struct{}{}:
	case <-ctx.Done():
		return Result{ExitCode: -1}, fmt.Errorf("waiting for a free session: %w", ctx.Err())
	}
	// The slot is given back once the session is closed on both sides:
	// sshd counts a session against MaxSessions until then.
	release := func() { <-c.sessions }
	sess, err := openSession(ctx, c)
	if err != nil {
		release()
		return Result{ExitCode: -1}, err
	}

	stdout := &cappedBuffer{max: p.opts.MaxOutputBytes}
	stderr := &cappedBuffer{max: p.opts.MaxOutputBytes}
	sess.Stdout, sess.Stderr = stdout, stderr
	// stdin is written to the channel here, not by x/crypto (Session.Stdin
	// goes through an io.Pipe, a goroutine and a 32 KiB copy buffer per
	// session: a third of a 500-host probe's allocations): a strings or
	// bytes Reader (the probe script) is written at once. Its end or error
	// is waited for and reported as x/crypto did.
	var stdinPipe io.WriteCloser
	if stdin != nil {
		if stdinPipe, err = sess.StdinPipe(); err != nil {
			sess.Close()
			release()
			return Result{ExitCode: -1}, fmt.Errorf("stdin: %w", err)
		}
	}
	// A server that never answers exec would hold Start for ever; once
	// the caller left, the session is closed and its slot given back
	// when, if ever, the answer comes (at the latest when the pool closes
	// the connection).
	_, abandoned, err := await(ctx, func() (struct{}, error) { return struct{}{}, sess.Start(command) },
		func(_ struct{}, err error) {
			sess.Close()
			if err == nil {
				sess.Wait()
			}
			release()
		})
	if abandoned {
		return Result{ExitCode: -1}, fmt.Errorf("start command: no answer from the server: %w", err)
	}
	if err != nil {
		sess.Close()
		release()
		return Result{ExitCode: -1}, fmt.Errorf("start command: %w", err)
	}
	stdinDone := make(chan error, 1)
	if stdinPipe != nil {
		go func() { stdinDone <- sendStdin(stdinPipe, stdin) }()
	} else {
		stdinDone <- nil
	}
	// done is closed, not sent on: both the wait below and the slot's
	// release after a cancellation may be the one that sees it.
	done := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = sess.Wait()
		// As with Session.Stdin, the session ends once stdin was sent,
		// and a failure to send it is the session's error when the
		// command's status is not.
		if err := <-stdinDone; waitErr == nil {
			waitErr = err
		}
		close(done)
	}()

	select {
	case <-done:
		sess.Close()
		release()
	case <-ctx.Done():
		// Best effort: sshd delivers the signal only to users other than
		// root, and does not end a command without a pty when its
		// session closes; hence the remote `timeout` callers wrap slow
		// commands in. Sent in the background: a peer that stopped
		// reading could hold the writes.
		go func() {
			_ = sess.Signal(ssh.SIGTERM)
			sess.Close()
		}()
		go func() {
			// A command that keeps running keeps its session, and its
			// slot, until it ends.
			<-done
			release()
		}()
		select {
		case <-done:
		case <-time.After(abandonWait):
		}
		res := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: -1}
		return res, fmt.Errorf("command stopped: %w", ctx.Err())
	}

	res := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	var exitErr *ssh.ExitError
	var missing *ssh.ExitMissingError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &exitErr):
		res.ExitCode = exitErr.ExitStatus()
		res.Signal = exitErr.Signal()
	case errors.As(waitErr, &missing):
		res.ExitCode = -1
		return res, errors.New("command ended without an exit status (connection lost?)")
	default:
		res.ExitCode = -1
		return res, fmt.Errorf("command: %w", waitErr)
	}
	for _, b := range []struct {
		name string
		buf  *cappedBuffer
	}{{"stdout", stdout}, {"stderr", stderr}} {
		if b.buf.dropped > 0 {
			return res, fmt.Errorf("command wrote more than %d bytes to %s; %d bytes dropped", b.buf.max, b.name, b.buf.dropped)
		}
	}
	return res, nil
}

// sessionRetries bounds how often a session that sshd refused for lack of
// room is asked for again, starting after sessionBackoff and doubling.
const (
	sessionRetries = 7
	sessionBackoff = 10 * time.Millisecond
)

// openSession opens a session on c. sshd frees a closed session's slot
// only after the loop iteration that read the close, so when many commands
// end at once, the sessions that replace them can briefly exceed its
// MaxSessions ("no more sessions") even though the pool stays below it;
// such refusals are retried for about a second. A server configured with
// fewer sessions than MaxSessionsPerConn is handled the same way, slowly.
func openSession(ctx context.Context, c *hostConn) (*ssh.Session, error) {
	wait := sessionBackoff
	for attempt := 0; ; attempt++ {
		// A server that never answers the channel-open would hold
		// NewSession for ever; a session opened after the caller left is
		// closed at once.
		sess, abandoned, err := await(ctx, c.client.NewSession, func(s *ssh.Session, err error) {
			if err == nil {
				s.Close()
			}
		})
		if abandoned {
			return nil, fmt.Errorf("open session: no answer from the server: %w", err)
		}
		if err == nil {
			return sess, nil
		}
		if c.dead.Load() || errors.Is(err, io.EOF) {
			return nil, &staleConnError{err}
		}
		var refused *ssh.OpenChannelError
		if !errors.As(err, &refused) || attempt == sessionRetries {
			return nil, fmt.Errorf("open session: %w", err)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, fmt.Errorf("open session: %w (then %w)", err, ctx.Err())
		}
		wait *= 2
	}
}

// copyBuffers are the buffers sessions' streams are copied through, in
// place of io.Copy's 32 KiB allocated per call.
var copyBuffers = sync.Pool{New: func() any { return new([8 << 10]byte) }}

// sendStdin writes stdin to a session's standard input and closes it, as
// x/crypto's Session.Stdin does, and returns the same error.
func sendStdin(w io.WriteCloser, stdin io.Reader) error {
	buf := copyBuffers.Get().(*[8 << 10]byte)
	defer copyBuffers.Put(buf)
	_, err := io.CopyBuffer(w, stdin, buf[:])
	if err1 := w.Close(); err == nil && err1 != io.EOF {
		err = err1
	}
	return err
}

// cappedBuffer keeps the first max bytes written to it and counts the
// rest, so that a machine cannot exhaust our memory. It never fails a
// write: the session keeps draining the channel.
type cappedBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	max     int
	dropped int64
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.max - b.buf.Len()
	if room < len(p) {
		if room < 0 {
			room = 0
		}
		b.buf.Write(p[:room])
		b.dropped += int64(len(p) - room)
		return len(p), nil
	}
	b.buf.Write(p)
	return len(p), nil
}

// ReadFrom reads r to its end into b, as io.Copy(b, r) would, through a
// pooled buffer rather than a new 32 KiB one for every session's stdout
// and stderr.
func (b *cappedBuffer) ReadFrom(r io.Reader) (int64, error) {
	buf := copyBuffers.Get().(*[8 << 10]byte)
	defer copyBuffers.Put(buf)
	var n int64
	for {
		m, err := r.Read(buf[:])
		if m > 0 {
			b.Write(buf[:m])
			n += int64(m)
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// Bytes returns a copy of what was kept.
func (b *cappedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// dial connects to r, through its bastion if it has one, retrying when
// the server resets the connection before the handshake finished. It
// returns the host key the server proved it holds, in authorized_keys
// form (a certificate's own key, for a host certified by an authority).
func (p *Pool) dial(r *resolved) (*ssh.Client, string, error) {
	var bastion *ssh.Client
	if r.bastion != nil {
		bc, err := p.conn(p.ctx, r.bastion)
		if err != nil {
			return nil, "", fmt.Errorf("bastion %s: %w", r.bastion.label(), err)
		}
		bastion = bc.client
	}
	// Reading known_hosts and the keys is bounded like the connection, so
	// that a file that cannot be read in time or a slow agent fails the
	// dial with a reason rather than holding it.
	prep, cancel := context.WithTimeout(p.ctx, r.connectTimeout())
	defer cancel()
	kh, err := p.knownHostsFor(prep, r)
	if err != nil {
		return nil, "", p.closedOr(err)
	}
	keys, err := p.keys.keysFor(prep, r)
	if err != nil {
		return nil, "", p.closedOr(err)
	}
	mode := r.HostKeyCheck
	cfg := &ssh.ClientConfig{
		User: r.user,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(keys.signers...)},
		HostKeyCallback: func(address string, remote net.Addr, key ssh.PublicKey) error {
			return kh.check(address, remote, key, mode)
		},
		HostKeyAlgorithms: kh.hostKeyAlgorithms(r.hostPort()),
	}
	if len(r.pinned) > 0 {
		cfg.HostKeyCallback, cfg.HostKeyAlgorithms = pinnedHostKeys(r.hostPort(), r.pinned)
	}
	// The key the check accepted is kept, so that the caller can record
	// which key this machine was reached with (a stop of a host no
	// longer declared pins it).
	var accepted ssh.PublicKey
	check := cfg.HostKeyCallback
	cfg.HostKeyCallback = func(address string, remote net.Addr, key ssh.PublicKey) error {
		err := check(address, remote, key)
		if err == nil {
			accepted = key
			if cert, ok := key.(*ssh.Certificate); ok {
				accepted = cert.Key
			}
		}
		return err
	}

	retry := p.opts.Retry
	backoff := retry.InitialBackoff
	for attempt := 1; ; attempt++ {
		select {
		case p.dialSem <- struct{}{}:
		case <-p.ctx.Done():
			return nil, "", ErrPoolClosed
		}
		accepted = nil
		client, err := p.dialOnce(r, bastion, cfg)
		<-p.dialSem
		if err == nil {
			hostKey := ""
			if accepted != nil {
				hostKey = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(accepted)))
			}
			return client, hostKey, nil
		}
		if attempt >= retry.Attempts || !resetByServer(err) {
			if attempt > 1 {
				err = fmt.Errorf("%w (after %d attempts)", err, attempt)
			}
			return nil, "", explainDialError(err, r, keys, p.opts.AgentSocket, cfg.HostKeyAlgorithms)
		}
		// Jitter spreads out a burst of dials that were reset together.
		wait := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-time.After(wait):
		case <-p.ctx.Done():
			return nil, "", ErrPoolClosed
		}
		backoff = min(backoff*2, retry.MaxBackoff)
	}
}

// dialOnce makes one TCP connect and SSH handshake, bounded together by
// the target's connect timeout (ssh.ClientConfig.Timeout would bound only
// the connect, and a server that accepts and never speaks would hang the
// handshake forever).
func (p *Pool) dialOnce(r *resolved, bastion *ssh.Client, cfg *ssh.ClientConfig) (*ssh.Client, error) {
	p.dials.Add(1)
	n := p.dialing.Add(1)
	defer p.dialing.Add(-1)
	for peak := p.peakDialing.Load(); n > peak && !p.peakDialing.CompareAndSwap(peak, n); peak = p.peakDialing.Load() {
	}
	limit := r.connectTimeout()
	ctx, cancel := context.WithTimeout(p.ctx, limit)
	defer cancel()
	address := r.hostPort()

	var conn net.Conn
	var err error
	if bastion != nil {
		conn, err = bastion.DialContext(ctx, "tcp", address)
	} else {
		var d net.Dialer
		conn, err = d.DialContext(ctx, "tcp", address)
	}
	if err != nil {
		if p.ctx.Err() != nil {
			return nil, ErrPoolClosed
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("connect to %s: no answer within %s: %w", address, limit, context.DeadlineExceeded)
		}
		if bastion != nil {
			return nil, fmt.Errorf("connect to %s through bastion %s: %w", address, r.bastion.label(), err)
		}
		return nil, fmt.Errorf("connect to %s: %w", address, err)
	}

	// The deadline closes the connection under the handshake; await stops
	// waiting for a handshake held by something else (the agent signing).
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	type handshake struct {
		c     ssh.Conn
		chans <-chan ssh.NewChannel
		reqs  <-chan *ssh.Request
	}
	h, _, err := await(ctx, func() (handshake, error) {
		c, chans, reqs, err := ssh.NewClientConn(conn, address, cfg)
		return handshake{c, chans, reqs}, err
	}, func(h handshake, err error) {
		if err == nil {
			h.c.Close()
		}
	})
	if !stop() {
		if err == nil {
			h.c.Close()
		}
		if p.ctx.Err() != nil {
			return nil, ErrPoolClosed
		}
		return nil, fmt.Errorf("ssh handshake with %s did not finish within %s of connecting: %w", address, limit, context.DeadlineExceeded)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return ssh.NewClient(h.c, h.chans, h.reqs), nil
}

// closedOr is ErrPoolClosed once the pool is closed, err otherwise.
func (p *Pool) closedOr(err error) error {
	if p.ctx.Err() != nil {
		return ErrPoolClosed
	}
	return err
}

// resetByServer reports whether err is the server closing or resetting the
// connection before the handshake finished: what sshd does to connections
// beyond its MaxStartups, and worth another try.
func resetByServer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, syscall.EPIPE)
}

// explainDialError turns x/crypto's handshake errors into sentences that
// say what to do.
func explainDialError(err error, r *resolved, keys *offered, agentSocket string, hostKeyAlgos []string) error {
	var unknown *UnknownHostKeyError
	var changed *HostKeyChangedError
	switch {
	case errors.As(err, &changed):
		return changed
	case errors.As(err, &unknown):
		return unknown
	case strings.Contains(err.Error(), "unable to authenticate"), tooManyAuthFailures(err):
		msg := fmt.Sprintf("authentication as %q at %s failed: the server accepted none of %s", r.user, r.hostPort(), keys.describe())
		if tooManyAuthFailures(err) {
			msg += " before its MaxAuthTries ran out (name the right key with identity_file)"
		}
		if h := keys.hint(agentSocket); h != "" {
			msg += "; " + h
		}
		return errors.New(msg)
	case strings.Contains(err.Error(), "no common algorithm for host key"):
		return fmt.Errorf("%s offers no host key of the types %s lists for it (%s); if its keys were replaced, remove the old ones with: ssh-keygen -R %s -f %s",
			r.hostPort(), r.knownHosts, strings.Join(hostKeyAlgos, ", "), Quote(knownhosts.Normalize(r.hostPort())), Quote(r.knownHosts))
	case resetByServer(err):
		return fmt.Errorf("connection to %s closed by the server during the handshake (too many connections at once? see sshd's MaxStartups): %w", r.hostPort(), err)
	}
	return err
}

// tooManyAuthFailures reports whether the server hung up after refusing
// more keys than its MaxAuthTries (OpenSSH and x/crypto word it apart).
func tooManyAuthFailures(err error) bool {
	return strings.Contains(strings.ToLower(err.Error()), "too many authentication failures")
}

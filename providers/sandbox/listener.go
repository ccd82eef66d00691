package sandbox

import (
	"net"
	"sync"
)

// connListener listens on a free port of 127.0.0.1 and closes, when it is
// closed, every connection it accepted. sshtest.Server.Close closes the
// connections that finished their handshake but waits for the others: a
// client that connects to each machine and never speaks would hold up the
// sandbox's exit (and fail it) for as long as its handshake may take.
type connListener struct {
	net.Listener

	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
}

func listen() (*connListener, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &connListener{Listener: l, conns: map[*trackedConn]struct{}{}}, nil
}

func (l *connListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	tc := &trackedConn{Conn: c, l: l}
	l.conns[tc] = struct{}{}
	return tc, nil
}

// Close stops accepting and closes every connection still open.
func (l *connListener) Close() error {
	err := l.Listener.Close()
	l.mu.Lock()
	l.closed = true
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
	return err
}

// trackedConn is a connection its listener knows of until it is closed.
type trackedConn struct {
	net.Conn
	l *connListener
}

func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

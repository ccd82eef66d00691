package sshtest

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"

	"golang.org/x/crypto/ssh/agent"
)

// Agent is an in-process SSH agent on a unix socket, holding keys in
// memory, for tests of agent authentication.
type Agent struct {
	// Socket is the path to give as SSH_AUTH_SOCK.
	Socket  string
	Keyring agent.Agent

	listener net.Listener
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

// StartAgent serves an empty keyring at dir/agent.sock; add keys with
// Keyring.Add. Keep dir short: unix socket paths are limited to about 100
// bytes.
func StartAgent(dir string) (*Agent, error) {
	socket := filepath.Join(dir, "agent.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("sshtest: agent: %w", err)
	}
	a := &Agent{Socket: socket, Keyring: agent.NewKeyring(), listener: l, conns: map[net.Conn]struct{}{}}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			a.mu.Lock()
			a.conns[c] = struct{}{}
			a.mu.Unlock()
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				agent.ServeAgent(a.Keyring, c)
				a.mu.Lock()
				delete(a.conns, c)
				a.mu.Unlock()
				c.Close()
			}()
		}
	}()
	return a, nil
}

// Close stops the agent and closes its clients' connections.
func (a *Agent) Close() error {
	err := a.listener.Close()
	a.mu.Lock()
	for c := range a.conns {
		c.Close()
	}
	a.mu.Unlock()
	a.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

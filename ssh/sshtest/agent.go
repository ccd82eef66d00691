package sshtest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"

	"golang.org/x/crypto/ssh"
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
	stall    atomic.Int32 // an AgentStall
	closed   chan struct{}
}

// AgentStall is what an Agent stops answering, as a hung agent does (or
// one waiting for a confirmation nobody gives), for tests of clients'
// timeouts.
type AgentStall int32

const (
	// AgentAnswers answers every request.
	AgentAnswers AgentStall = iota
	// AgentStallsSigning lists its keys but never answers a sign request.
	AgentStallsSigning
	// AgentStallsEverything accepts connections and never answers.
	AgentStallsEverything
)

// Stall makes the agent stop answering from now on; requests waiting
// for an answer are let go only when the agent closes.
func (a *Agent) Stall(what AgentStall) { a.stall.Store(int32(what)) }

// StartAgent serves an empty keyring at dir/agent.sock; add keys with
// Keyring.Add. Keep dir short: unix socket paths are limited to about 100
// bytes.
func StartAgent(dir string) (*Agent, error) {
	socket := filepath.Join(dir, "agent.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("sshtest: agent: %w", err)
	}
	a := &Agent{Socket: socket, Keyring: agent.NewKeyring(), listener: l, conns: map[net.Conn]struct{}{}, closed: make(chan struct{})}
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
				if AgentStall(a.stall.Load()) == AgentStallsEverything {
					io.Copy(io.Discard, c) // until the client or Close closes c
				} else {
					agent.ServeAgent(stallingKeyring{a.Keyring, a}, c)
				}
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
	select {
	case <-a.closed:
	default:
		close(a.closed)
	}
	a.mu.Unlock()
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

// stallingKeyring is the agent's keyring, whose signing stops answering
// when the agent is told to stall.
type stallingKeyring struct {
	agent.Agent
	a *Agent
}

func (k stallingKeyring) Sign(key ssh.PublicKey, data []byte) (*ssh.Signature, error) {
	if AgentStall(k.a.stall.Load()) != AgentAnswers {
		<-k.a.closed
		return nil, errors.New("sshtest: agent closed")
	}
	return k.Agent.Sign(key, data)
}

package ssh

import (
	"context"
	"fmt"
	"sync"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpulayer/gpulayer/ssh/sshtest"
)

// BenchmarkRunOnWarmConnection is the cost of one command on a host the
// pool already reaches: a new session, sh -c true, the exit status.
func BenchmarkRunOnWarmConnection(b *testing.B) {
	benchRun(b, 1, false)
}

// BenchmarkDialAndRun is the cost of reaching a new host: TCP connect,
// key exchange, host key check, public key authentication, one command.
func BenchmarkDialAndRun(b *testing.B) { benchRun(b, 1, true) }

// BenchmarkFanOut32 runs one command on each of 32 hosts at once through
// one pool, dialing each: what a probe of a fleet costs in SSH alone.
func BenchmarkFanOut32(b *testing.B) { benchRun(b, 32, true) }

func benchRun(b *testing.B, hosts int, cold bool) {
	dir := b.TempDir()
	b.Setenv("HOME", dir)
	keyFile, key, err := sshtest.WriteClientKey(dir)
	if err != nil {
		b.Fatal(err)
	}
	knownHosts := dir + "/known_hosts"
	var targets []Target
	var lines []string
	for i := 0; i < hosts; i++ {
		srv, err := sshtest.Start(sshtest.Options{AuthorizedKeys: []gossh.PublicKey{key.PublicKey()}})
		if err != nil {
			b.Fatal(err)
		}
		defer srv.Close()
		lines = append(lines, srv.KnownHostsLine("127.0.0.1"))
		targets = append(targets, Target{Name: fmt.Sprint("h", i), Address: "127.0.0.1", Port: srv.Port,
			IdentityFiles: []string{keyFile}, KnownHostsFile: knownHosts})
	}
	if err := sshtest.WriteKnownHosts(knownHosts, lines...); err != nil {
		b.Fatal(err)
	}
	p := NewPool(Options{NoAgent: true})
	defer func() { p.Close() }()
	ctx := context.Background()
	for b.Loop() {
		if cold {
			p.Close()
			p = NewPool(Options{NoAgent: true})
		}
		var wg sync.WaitGroup
		for _, tg := range targets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if res, err := p.Run(ctx, tg, "true", nil); err != nil || res.ExitCode != 0 {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
	}
}

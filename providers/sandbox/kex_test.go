package sandbox_test

import (
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// A machine's sshd offers the key exchanges of today's distributions'
// OpenSSH, not ML-KEM (OpenSSH 9.9's): a client with x/crypto's defaults,
// as gpulayer's, agrees curve25519-sha256, and one that asks for ML-KEM
// only is refused.
func TestMachinesAgreeCurve25519NotMLKEM(t *testing.T) {
	sb := startSandbox(t, 1, "/bin/sh")
	key, err := os.ReadFile(sb.KeyPath())
	if err != nil {
		t.Fatal(err)
	}
	signer, err := gossh.ParsePrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	check, err := knownhosts.New(sb.KnownHostsPath())
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sb.Machines[0].Port))
	cfg := func(kex ...string) *gossh.ClientConfig {
		c := &gossh.ClientConfig{User: sb.User, Auth: []gossh.AuthMethod{gossh.PublicKeys(signer)},
			HostKeyCallback: check, Timeout: 10 * time.Second}
		c.KeyExchanges = kex
		return c
	}
	client, err := gossh.Dial("tcp", addr, cfg())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	algs := client.Conn.(gossh.AlgorithmsConnMetadata).Algorithms()
	if algs.KeyExchange != gossh.KeyExchangeCurve25519 {
		t.Errorf("key exchange %q, want %q", algs.KeyExchange, gossh.KeyExchangeCurve25519)
	}
	if c, err := gossh.Dial("tcp", addr, cfg(gossh.KeyExchangeMLKEM768X25519)); err == nil {
		c.Close()
		t.Error("a client asking for ML-KEM only was served")
	}
}

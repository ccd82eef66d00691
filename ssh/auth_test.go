package ssh

import (
	"context"
	"crypto/ed25519"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/gpulayer/gpulayer/ssh/sshtest"
)

// startAgent serves keys from an in-process agent. Its socket lives in a
// short directory: unix socket paths are limited to about 100 bytes.
func startAgent(t *testing.T, keys ...ed25519.PrivateKey) *sshtest.Agent {
	t.Helper()
	dir, err := os.MkdirTemp("", "gla")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	a, err := sshtest.StartAgent(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	for _, k := range keys {
		if err := a.Keyring.Add(agent.AddedKey{PrivateKey: k}); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

func TestAgentKeyAuthenticates(t *testing.T) {
	f := newFixture(t)
	_, priv, _ := ed25519.GenerateKey(nil)
	signer, _ := ssh.NewSignerFromKey(priv)
	srv := f.server(sshtest.Options{AuthorizedKeys: []ssh.PublicKey{signer.PublicKey()}})
	a := startAgent(t, priv)
	p := newPool(t, Options{AgentSocket: a.Socket})
	tg := f.target("a1", srv)
	tg.IdentityFiles = nil
	if res := run(t, p, tg, "echo agent"); string(res.Stdout) != "agent\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
}

func TestAgentFromEnvironment(t *testing.T) {
	f := newFixture(t)
	_, priv, _ := ed25519.GenerateKey(nil)
	a := startAgent(t, priv)
	signer, _ := ssh.NewSignerFromKey(priv)
	srv := f.server(sshtest.Options{AuthorizedKeys: []ssh.PublicKey{signer.PublicKey()}})
	t.Setenv("SSH_AUTH_SOCK", a.Socket)
	p := NewPool(Options{})
	defer p.Close()
	tg := f.target("a1", srv)
	tg.IdentityFiles = nil
	run(t, p, tg, "true")
}

func TestDefaultIdentityFileAuthenticates(t *testing.T) {
	f := newFixture(t)
	srv := f.server(sshtest.Options{})
	// HOME is the fixture's directory: put the key where ssh looks for it.
	sshDir := filepath.Join(f.dir, ".ssh")
	os.MkdirAll(sshDir, 0o700)
	data, _ := os.ReadFile(f.keyFile)
	os.WriteFile(filepath.Join(sshDir, "id_ed25519"), data, 0o600)
	tg := f.target("a1", srv)
	tg.IdentityFiles = nil
	run(t, newPool(t, Options{}), tg, "true")
}

func TestIdentityFileErrors(t *testing.T) {
	f := newFixture(t)
	srv := f.server(sshtest.Options{})
	_, priv, _ := ed25519.GenerateKey(nil)
	block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	encrypted := filepath.Join(f.dir, "id_encrypted")
	os.WriteFile(encrypted, pem.EncodeToMemory(block), 0o600)
	garbage := filepath.Join(f.dir, "id_garbage")
	os.WriteFile(garbage, []byte("not a key"), 0o600)
	unauthorized, _, _ := sshtest.WriteClientKey(filepath.Join(f.dir, "other"))

	for _, tc := range []struct {
		name  string
		files []string
		want  []string
	}{
		{name: "encrypted key suggests the agent", files: []string{encrypted},
			want: []string{"host a1:", encrypted, "passphrase protected", "ssh-add " + encrypted, "SSH_AUTH_SOCK"}},
		{name: "encrypted key beside a refused key", files: []string{unauthorized, encrypted},
			want: []string{`authentication as "`, "identity file(s) " + unauthorized, "ssh-add " + encrypted}},
		{name: "missing file", files: []string{filepath.Join(f.dir, "nope")}, want: []string{"nope does not exist"}},
		{name: "not a key", files: []string{garbage}, want: []string{garbage, "not a private key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := f.target("a1", srv)
			tg.IdentityFiles = tc.files
			_, err := newPool(t, Options{}).Run(context.Background(), tg, "true", nil)
			if err == nil {
				t.Fatal("Run succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestTildeInPathsIsTheHomeDirectory(t *testing.T) {
	f := newFixture(t)
	srv := f.server(sshtest.Options{})
	tg := f.target("a1", srv)
	tg.IdentityFiles = []string{"~/keys/id_ed25519"}
	tg.KnownHostsFile = "~/known_hosts"
	run(t, newPool(t, Options{}), tg, "true")
}

func TestIdentityFilesAreOfferedBeforeTheAgentsManyKeys(t *testing.T) {
	f := newFixture(t)
	srv := f.server(sshtest.Options{}) // accepts only the fixture's file key
	var others []ed25519.PrivateKey
	// More than a server lets a client try: OpenSSH's MaxAuthTries is 6;
	// x/crypto's server forgives 6 more refused key queries.
	for i := 0; i < 16; i++ {
		_, k, _ := ed25519.GenerateKey(nil)
		others = append(others, k)
	}
	a := startAgent(t, others...)
	p := newPool(t, Options{AgentSocket: a.Socket})
	run(t, p, f.target("a1", srv), "true")
}

package sshtest

import (
	"crypto/ed25519"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"
)

// WriteClientKey generates an ed25519 client key and writes it to
// dir/id_ed25519 (0600, OpenSSH format, unencrypted) and
// dir/id_ed25519.pub. It returns the private key file's path and the key.
func WriteClientKey(dir string) (string, ssh.Signer, error) {
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return "", nil, fmt.Errorf("sshtest: generate key: %w", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return "", nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "gpulayer-test")
	if err != nil {
		return "", nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	path := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return "", nil, err
	}
	if err := os.WriteFile(path+".pub", ssh.MarshalAuthorizedKey(signer.PublicKey()), 0o644); err != nil {
		return "", nil, err
	}
	return path, signer, nil
}

// WriteKnownHosts writes a known_hosts file (0600) holding lines, such as
// those of Server.KnownHostsLine.
func WriteKnownHosts(path string, lines ...string) error {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(strings.TrimRight(l, "\n"))
		b.WriteByte('\n')
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

package ssh

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gpulayer/gpulayer/ssh/sshtest"
)

// hostCertSigner returns a host key certified by ca for principals, as
// `ssh-keygen -s ca -h -n principals` makes, and the signer that presents
// it.
func hostCertSigner(t *testing.T, ca ssh.Signer, principals ...string) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	host, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cert := &ssh.Certificate{
		Key:             host.PublicKey(),
		CertType:        ssh.HostCert,
		KeyId:           "gpu host",
		ValidPrincipals: principals,
		ValidAfter:      uint64(time.Now().Add(-time.Hour).Unix()),
		ValidBefore:     uint64(time.Now().Add(time.Hour).Unix()),
	}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewCertSigner(cert, host)
	if err != nil {
		t.Fatal(err)
	}
	return signer
}

func newCA(t *testing.T) ssh.Signer {
	t.Helper()
	ca, err := sshtest.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// Fleets whose sshd presents host certificates are trusted through one
// `@cert-authority` line in known_hosts, as OpenSSH does, with no line per
// host; a certificate from another authority, or for another host name,
// is refused.
func TestHostCertificatesFromAKnownAuthority(t *testing.T) {
	ca := newCA(t)
	tests := []struct {
		name       string
		signer     ssh.Signer
		principals []string
		ok         bool
	}{
		{"signed by the authority for this host", ca, []string{"127.0.0.1"}, true},
		{"signed by another authority", newCA(t), []string{"127.0.0.1"}, false},
		{"signed for another host", ca, []string{"gpu-99.example.org"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			srv := f.unlistedServer(sshtest.Options{HostKey: hostCertSigner(t, tc.signer, tc.principals...)})
			// x/crypto's knownhosts matches a pattern's port exactly (22
			// when it names none), where OpenSSH's `*` also covers other
			// ports; the sandbox's servers listen on random ones.
			appendLine(t, f.knownHosts, fmt.Sprintf("@cert-authority [127.0.0.1]:%d %s", srv.Port,
				strings.TrimSpace(string(ssh.MarshalAuthorizedKey(ca.PublicKey())))))
			p := newPool(t, Options{})
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			res, err := p.Run(ctx, f.target("gpu-1", srv), "echo hi", nil)
			if tc.ok {
				if err != nil || strings.TrimSpace(string(res.Stdout)) != "hi" {
					t.Fatalf("Run: %v %+v", err, res)
				}
				return
			}
			if err == nil {
				t.Fatal("a certificate the known authority did not sign for this host was accepted")
			}
			if !strings.Contains(err.Error(), "host certificate of") || !strings.Contains(err.Error(), ssh.FingerprintSHA256(tc.signer.PublicKey())) {
				t.Errorf("error does not say whose certificate, signed by which key, was refused: %v", err)
			}
			var he *HostError
			if !errors.As(err, &he) || !strings.Contains(err.Error(), "gpu-1") {
				t.Errorf("error %v does not name the host", err)
			}
		})
	}
}

// A host an authority covers that shows a plain key, not a certificate,
// is an unknown host (OpenSSH's "No ED25519 host key is known"), not one
// whose key changed: the authority's key is not the host's.
func TestPlainKeyOfAHostAnAuthorityCoversIsUnknownNotChanged(t *testing.T) {
	f := newFixture(t)
	srv := f.unlistedServer(sshtest.Options{})
	ca := newCA(t)
	appendLine(t, f.knownHosts, fmt.Sprintf("@cert-authority [127.0.0.1]:%d %s", srv.Port,
		strings.TrimSpace(string(ssh.MarshalAuthorizedKey(ca.PublicKey())))))
	p := newPool(t, Options{})
	_, err := p.Run(context.Background(), f.target("gpu-2", srv), "true", nil)
	var unknown *UnknownHostKeyError
	var changed *HostKeyChangedError
	if !errors.As(err, &unknown) || errors.As(err, &changed) {
		t.Fatalf("got %v, want an UnknownHostKeyError", err)
	}
}

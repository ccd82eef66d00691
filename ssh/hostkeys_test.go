package ssh

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gpulayer/gpulayer/ssh/sshtest"
)

func TestUnknownHostIsRefusedWithItsFingerprintAndHowToAcceptIt(t *testing.T) {
	f := newFixture(t)
	srv := f.unlistedServer(sshtest.Options{})
	p := newPool(t, Options{})
	_, err := p.Run(context.Background(), f.target("gpu-7", srv), "true", nil)
	var unknown *UnknownHostKeyError
	if !errors.As(err, &unknown) {
		t.Fatalf("got %v, want UnknownHostKeyError", err)
	}
	for _, want := range []string{
		"host gpu-7:",
		fmt.Sprintf("[127.0.0.1]:%d", srv.Port),
		"ssh-ed25519",
		ssh.FingerprintSHA256(srv.HostKey.PublicKey()),
		`host_key_check = "accept-new"`,
		fmt.Sprintf("ssh-keyscan -p %d -t ed25519 127.0.0.1", srv.Port),
		f.knownHosts,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if _, statErr := os.Stat(f.knownHosts); !os.IsNotExist(statErr) {
		t.Errorf("strict checking touched known_hosts: %v", statErr)
	}
}

func TestChangedHostKeyIsRefusedInEveryMode(t *testing.T) {
	for _, mode := range []string{"", HostKeyStrict, HostKeyAcceptNew} {
		t.Run("mode="+mode, func(t *testing.T) {
			f := newFixture(t)
			srv := f.unlistedServer(sshtest.Options{})
			impostor, err := sshtest.GenerateKey()
			if err != nil {
				t.Fatal(err)
			}
			old := &sshtest.Server{Port: srv.Port, HostKey: impostor}
			f.trust(old)
			before, _ := os.ReadFile(f.knownHosts)
			p := newPool(t, Options{})
			tg := f.target("a1", srv)
			tg.HostKeyCheck = mode
			_, err = p.Run(context.Background(), tg, "true", nil)
			var changed *HostKeyChangedError
			if !errors.As(err, &changed) {
				t.Fatalf("got %v, want HostKeyChangedError", err)
			}
			for _, want := range []string{
				"host a1:", "REMOTE HOST IDENTIFICATION HAS CHANGED",
				ssh.FingerprintSHA256(srv.HostKey.PublicKey()), ssh.FingerprintSHA256(impostor.PublicKey()),
				f.knownHosts + ":1", "ssh-keygen -R",
			} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not mention %q:\n%v", want, err)
				}
			}
			if after, _ := os.ReadFile(f.knownHosts); string(after) != string(before) {
				t.Errorf("known_hosts changed:\n%s", after)
			}
		})
	}
}

func TestAcceptNewRecordsTheKeyInANewPrivateFile(t *testing.T) {
	f := newFixture(t)
	srv := f.unlistedServer(sshtest.Options{})
	f.knownHosts = filepath.Join(f.dir, "fresh", "ssh", "known_hosts")
	p := newPool(t, Options{})
	tg := f.target("a1", srv)
	tg.HostKeyCheck = HostKeyAcceptNew
	run(t, p, tg, "true")

	data, err := os.ReadFile(f.knownHosts)
	if err != nil {
		t.Fatal(err)
	}
	if want := srv.KnownHostsLine("127.0.0.1") + "\n"; string(data) != want {
		t.Errorf("known_hosts holds\n%q\nwant\n%q", data, want)
	}
	for path, want := range map[string]os.FileMode{f.knownHosts: 0o600, filepath.Dir(f.knownHosts): 0o700} {
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", path, st.Mode().Perm(), err, want)
		}
	}
	// A later strict run trusts the recorded key.
	tg.HostKeyCheck = HostKeyStrict
	run(t, newPool(t, Options{}), tg, "true")
}

func TestAcceptNewFromManyHostsAtOnceWritesEachLineOnce(t *testing.T) {
	f := newFixture(t)
	// A file without a final newline must not have its last line joined.
	last := "# written by hand"
	if err := os.WriteFile(f.knownHosts, []byte(last), 0o600); err != nil {
		t.Fatal(err)
	}
	var servers []*sshtest.Server
	for i := 0; i < 12; i++ {
		servers = append(servers, f.unlistedServer(sshtest.Options{}))
	}
	// Two pools, as two gpulayer processes would be.
	pools := []*Pool{newPool(t, Options{}), newPool(t, Options{})}
	var wg sync.WaitGroup
	for i, srv := range servers {
		for _, p := range pools {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tg := f.target(fmt.Sprint("h", i), srv)
				tg.HostKeyCheck = HostKeyAcceptNew
				if _, err := p.Run(context.Background(), tg, "true", nil); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	data, err := os.ReadFile(f.knownHosts)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if lines[0] != last || len(lines) != 1+len(servers) {
		t.Fatalf("known_hosts has %d lines, first %q; want %q and one per host:\n%s", len(lines), lines[0], last, data)
	}
	for _, srv := range servers {
		if n := strings.Count(string(data), srv.KnownHostsLine("127.0.0.1")+"\n"); n != 1 {
			t.Errorf("host on port %d recorded %d times", srv.Port, n)
		}
	}
}

func TestPoolOffersOnlyTheHostKeyTypesKnownHostsHolds(t *testing.T) {
	f := newFixture(t)
	ecdsaKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecdsaSigner, err := ssh.NewSignerFromKey(ecdsaKey)
	if err != nil {
		t.Fatal(err)
	}
	// The server has an ECDSA key, which x/crypto would prefer, and an
	// ed25519 key, which OpenSSH's client records.
	srv := f.server(sshtest.Options{ExtraHostKeys: []ssh.Signer{ecdsaSigner}})
	p := newPool(t, Options{})
	if res := run(t, p, f.target("a1", srv), "echo ok"); string(res.Stdout) != "ok\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
}

func TestKnownHostsEntries(t *testing.T) {
	f := newFixture(t)
	srv := f.unlistedServer(sshtest.Options{})
	key := srv.HostKey.PublicKey()
	other, _ := sshtest.GenerateKey()
	port := fmt.Sprint(srv.Port)
	for _, tc := range []struct {
		name string
		line string
		ok   bool
	}{
		{name: "[host]:port", line: knownhosts.Line([]string{"[127.0.0.1]:" + port}, key), ok: true},
		{name: "hashed [host]:port", line: knownhosts.Line([]string{knownhosts.HashHostname("[127.0.0.1]:" + port)}, key), ok: true},
		{name: "pattern list", line: knownhosts.Line([]string{"gpu1", "[127.0.0.1]:" + port}, key), ok: true},
		{name: "bare host is port 22 only", line: knownhosts.Line([]string{"127.0.0.1"}, key)},
		{name: "other port", line: knownhosts.Line([]string{"[127.0.0.1]:1"}, key)},
		{name: "revoked", line: "@revoked " + knownhosts.Line([]string{"[127.0.0.1]:" + port}, key)},
		{name: "other key for another host only", line: knownhosts.Line([]string{"[127.0.0.2]:" + port}, other.PublicKey())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := sshtest.WriteKnownHosts(f.knownHosts, tc.line); err != nil {
				t.Fatal(err)
			}
			_, err := newPool(t, Options{}).Run(context.Background(), f.target("a1", srv), "true", nil)
			if (err == nil) != tc.ok {
				t.Fatalf("got %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestHostThatLostTheKnownKeyTypeIsExplained(t *testing.T) {
	f := newFixture(t)
	ecdsaKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecdsaSigner, _ := ssh.NewSignerFromKey(ecdsaKey)
	srv := f.unlistedServer(sshtest.Options{HostKey: ecdsaSigner})
	// known_hosts holds an ed25519 key for the host, which now has only ECDSA.
	old, _ := sshtest.GenerateKey()
	f.trust(&sshtest.Server{Port: srv.Port, HostKey: old})
	_, err = newPool(t, Options{}).Run(context.Background(), f.target("a1", srv), "true", nil)
	for _, want := range []string{"host a1:", "offers no host key of the types", "ssh-ed25519", "ssh-keygen -R"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %q", err, want)
		}
	}
}

func TestDefaultKnownHostsAlsoReadsTheSystemFileButWritesTheUsers(t *testing.T) {
	f := newFixture(t)
	listed := f.unlistedServer(sshtest.Options{})
	fresh := f.unlistedServer(sshtest.Options{})
	if err := sshtest.WriteKnownHosts(globalKnownHostsFile, listed.KnownHostsLine("127.0.0.1")); err != nil {
		t.Fatal(err)
	}
	system, _ := os.ReadFile(globalKnownHostsFile)
	p := newPool(t, Options{})
	tg := f.target("listed", listed)
	tg.KnownHostsFile = ""
	run(t, p, tg, "true")

	tg = f.target("fresh", fresh)
	tg.KnownHostsFile = ""
	tg.HostKeyCheck = HostKeyAcceptNew
	run(t, p, tg, "true")
	user, err := os.ReadFile(filepath.Join(f.dir, ".ssh", "known_hosts"))
	if err != nil || string(user) != fresh.KnownHostsLine("127.0.0.1")+"\n" {
		t.Errorf("user known_hosts %q (%v), want the new host's line", user, err)
	}
	if after, _ := os.ReadFile(globalKnownHostsFile); string(after) != string(system) {
		t.Errorf("system known_hosts changed:\n%s", after)
	}
	// A key the system file holds cannot be replaced by accept-new.
	impostor := f.unlistedServer(sshtest.Options{})
	if err := sshtest.WriteKnownHosts(globalKnownHostsFile, (&sshtest.Server{Port: impostor.Port, HostKey: listed.HostKey}).KnownHostsLine("127.0.0.1")); err != nil {
		t.Fatal(err)
	}
	tg = f.target("impostor", impostor)
	tg.KnownHostsFile = ""
	tg.HostKeyCheck = HostKeyAcceptNew
	var changed *HostKeyChangedError
	if _, err := newPool(t, Options{}).Run(context.Background(), tg, "true", nil); !errors.As(err, &changed) {
		t.Fatalf("got %v, want HostKeyChangedError", err)
	}
}

func TestKeyscanAdviceUsesTheShortKeyTypeName(t *testing.T) {
	for keyType, want := range map[string]string{
		ssh.KeyAlgoED25519: " -t ed25519 ", ssh.KeyAlgoECDSA256: " -t ecdsa ", ssh.KeyAlgoECDSA521: " -t ecdsa ",
		ssh.KeyAlgoRSA: " -t rsa ", ssh.KeyAlgoSKED25519: "ssh-keyscan 10.0.0.1 ",
	} {
		e := &UnknownHostKeyError{Address: "10.0.0.1:22", KeyType: keyType, Fingerprint: "SHA256:x", KnownHostsFile: "/k"}
		if !strings.Contains(e.Error(), want) {
			t.Errorf("%s: %q lacks %q", keyType, e.Error(), want)
		}
	}
}

func TestStrictTargetIsNotServedByAConnectionAnotherPolicyAccepted(t *testing.T) {
	f := newFixture(t)
	srv := f.unlistedServer(sshtest.Options{})
	p := newPool(t, Options{})

	// A fleet with accept-new and a known_hosts of its own connects first.
	lenient := f.target("lab-a1", srv)
	lenient.HostKeyCheck = HostKeyAcceptNew
	lenient.KnownHostsFile = filepath.Join(f.dir, "lenient_known_hosts")
	run(t, p, lenient, "true")

	// A strict fleet pins another key for the same address.
	pinned, err := sshtest.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	strict := f.target("prod-a1", srv)
	strict.HostKeyCheck = HostKeyStrict
	strict.KnownHostsFile = filepath.Join(f.dir, "strict_known_hosts")
	appendLine(t, strict.KnownHostsFile, (&sshtest.Server{Port: srv.Port, HostKey: pinned}).KnownHostsLine("127.0.0.1"))

	_, err = p.Run(context.Background(), strict, "true", nil)
	var changed *HostKeyChangedError
	if !errors.As(err, &changed) || !strings.Contains(err.Error(), "host prod-a1:") {
		t.Fatalf("strict target got %v, want its pinned key to refuse the host", err)
	}
}

func TestTargetsThatTrustAlikeShareOneConnection(t *testing.T) {
	f := newFixture(t)
	srv := f.server(sshtest.Options{})
	p := newPool(t, Options{})
	for _, name := range []string{"a1", "a1-again", "a1-alias"} {
		run(t, p, f.target(name, srv), "true")
	}
	if n, conns := p.dials.Load(), srv.Stats().Conns; n != 1 || conns != 1 {
		t.Errorf("%d dials and %d connections for three alike targets, want 1", n, conns)
	}
}

// TestPinnedHostKeysAreTheOnlyKeysAccepted: a machine gpulayer created is
// reached with the keys its provider published, whatever known_hosts
// says, and another key is refused even with accept-new; a connection made
// under pinned keys is not shared with a target that pins others.
func TestPinnedHostKeysAreTheOnlyKeysAccepted(t *testing.T) {
	f := newFixture(t)
	srv := f.unlistedServer(sshtest.Options{})
	p := newPool(t, Options{})
	right := string(ssh.MarshalAuthorizedKey(srv.HostKey.PublicKey()))
	tg := f.target("cloud-0", srv)
	tg.HostKeys = []string{strings.TrimSpace(right)}
	if _, err := p.Run(context.Background(), tg, "true", nil); err != nil {
		t.Fatalf("pinned to its own key: %v", err)
	}
	if _, err := os.Stat(f.knownHosts); !os.IsNotExist(err) {
		t.Errorf("a pinned connection wrote known_hosts: %v", err)
	}
	other, err := sshtest.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	wrong := f.target("cloud-0", srv)
	wrong.HostKeyCheck = HostKeyAcceptNew
	wrong.HostKeys = []string{strings.TrimSpace(string(ssh.MarshalAuthorizedKey(other.PublicKey())))}
	_, err = p.Run(context.Background(), wrong, "true", nil)
	var pinned *PinnedHostKeyError
	if !errors.As(err, &pinned) || !strings.Contains(err.Error(), ssh.FingerprintSHA256(srv.HostKey.PublicKey())) {
		t.Fatalf("pinned to another key: got %v, want PinnedHostKeyError naming the offered key", err)
	}
	bad := f.target("cloud-0", srv)
	bad.HostKeys = []string{"ssh-ed25519 not-base64"}
	if _, err := p.Run(context.Background(), bad, "true", nil); err == nil || !strings.Contains(err.Error(), "pinned host key 1 of 1") {
		t.Fatalf("unparseable pinned key: %v", err)
	}
}

//go:build unix

package ssh

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gpulayer/gpulayer/ssh/sshdtest"
	"github.com/gpulayer/gpulayer/ssh/sshtest"
)

// openSSH starts OpenSSH's sshd that accepts the fixture's key, with a
// directory holding a fake tool first on the sessions' PATH.
func (f *fixture) openSSH(opts sshdtest.Options) (*sshdtest.Server, string) {
	f.t.Helper()
	bin := filepath.Join(f.dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "fake-tool"), []byte("#!/bin/sh\necho fake tool \"$@\"\n"), 0o755); err != nil {
		f.t.Fatal(err)
	}
	opts.AuthorizedKeys = append(opts.AuthorizedKeys, f.key.PublicKey())
	opts.SetEnv = append(opts.SetEnv, "PATH="+bin+":/usr/local/bin:/usr/bin:/bin")
	return sshdtest.Start(f.t, opts), bin
}

func (f *fixture) openSSHTarget(name string, srv *sshdtest.Server) Target {
	return Target{Name: name, Address: "127.0.0.1", Port: srv.Port, IdentityFiles: []string{f.keyFile}, KnownHostsFile: f.knownHosts}
}

func TestOpenSSHRunsCommandsThroughThePool(t *testing.T) {
	f := newFixture(t)
	srv, _ := f.openSSH(sshdtest.Options{})
	appendLine(t, f.knownHosts, srv.KnownHostsLine("127.0.0.1"))
	p := newPool(t, Options{})
	tg := f.openSSHTarget("real", srv)

	res := run(t, p, tg, "fake-tool "+Quote("a b")+"; echo err >&2; exit 3")
	if string(res.Stdout) != "fake tool a b\n" || string(res.Stderr) != "err\n" || res.ExitCode != 3 {
		t.Errorf("got stdout %q stderr %q exit %d", res.Stdout, res.Stderr, res.ExitCode)
	}

	// More commands at once than sshd's MaxSessions (10): the pool keeps
	// each connection under it, so none is refused.
	var wg sync.WaitGroup
	for i := 0; i < 24; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			res, err := p.Run(ctx, tg, "sleep 0.1; echo "+strconv.Itoa(i), nil)
			if err != nil || string(res.Stdout) != strconv.Itoa(i)+"\n" {
				t.Errorf("command %d: %q, %v", i, res.Stdout, err)
			}
		}()
	}
	wg.Wait()
	if n := p.dials.Load(); n != 1 {
		t.Errorf("%d dials, want 1", n)
	}
}

func TestOpenSSHCommandStopsWhenTheContextEndsIfWrappedInTimeout(t *testing.T) {
	f := newFixture(t)
	srv, _ := f.openSSH(sshdtest.Options{})
	appendLine(t, f.knownHosts, srv.KnownHostsLine("127.0.0.1"))
	p := newPool(t, Options{})
	tg := f.openSSHTarget("real", srv)
	for _, tc := range []struct {
		name    string
		wrap    string
		mustEnd bool
	}{
		// sshd delivers the signal Run sends only to users other than root
		// (root logins have no privilege-separated child to do it), and
		// does not kill a command without a pty when its session closes.
		{name: "bare", wrap: "", mustEnd: srv.User != "root"},
		{name: "in remote timeout", wrap: "timeout 1 ", mustEnd: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidFile := filepath.Join(f.dir, "pid-"+strings.ReplaceAll(tc.name, " ", "-"))
			ctx, started := pidWhenWritten(t, pidFile)
			_, err := p.Run(ctx, tg, tc.wrap+"sh -c "+Quote("echo $$ > "+Quote(pidFile)+"; exec sleep 30"), nil)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v", err)
			}
			pid := started()
			if pid == 0 {
				t.Fatal("the command never started")
			}
			deadline := time.Now().Add(testTimeout)
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			if !tc.mustEnd {
				deadline = time.Now().Add(time.Second)
			}
			for sshtest.ProcessRuns(pid) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if ended := !sshtest.ProcessRuns(pid); tc.mustEnd && !ended {
				t.Errorf("the remote command still runs")
			} else {
				t.Logf("remote command ended: %v", ended)
			}
		})
	}
}

func TestOpenSSHHostKeys(t *testing.T) {
	f := newFixture(t)
	srv, _ := f.openSSH(sshdtest.Options{})
	other, err := sshtest.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	impostor := &sshtest.Server{Port: srv.Port, HostKey: other}

	t.Run("changed key is refused", func(t *testing.T) {
		if err := sshtest.WriteKnownHosts(f.knownHosts, impostor.KnownHostsLine("127.0.0.1")); err != nil {
			t.Fatal(err)
		}
		tg := f.openSSHTarget("real", srv)
		tg.HostKeyCheck = HostKeyAcceptNew
		_, err := newPool(t, Options{}).Run(context.Background(), tg, "true", nil)
		var changed *HostKeyChangedError
		if !errors.As(err, &changed) || !strings.Contains(err.Error(), "REMOTE HOST IDENTIFICATION HAS CHANGED") ||
			!strings.Contains(err.Error(), ssh.FingerprintSHA256(srv.HostKey)) {
			t.Fatalf("got %v", err)
		}
		// The advice works: once the old key is removed as it says,
		// accept-new records the new one.
		_, advice, ok := strings.Cut(err.Error(), "remove the old key with: ")
		if !ok || !strings.HasPrefix(advice, "ssh-keygen -R ") {
			t.Fatalf("no ssh-keygen advice in %v", err)
		}
		if out, err := exec.Command("/bin/sh", "-c", advice).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", advice, err, out)
		}
		run(t, newPool(t, Options{}), tg, "true")
	})
	t.Run("unknown key is refused when strict", func(t *testing.T) {
		os.Remove(f.knownHosts)
		_, err := newPool(t, Options{}).Run(context.Background(), f.openSSHTarget("real", srv), "true", nil)
		var unknown *UnknownHostKeyError
		if !errors.As(err, &unknown) || unknown.Fingerprint != ssh.FingerprintSHA256(srv.HostKey) {
			t.Fatalf("got %v", err)
		}
		// The advice works: run the ssh-keyscan command it gives.
		_, advice, ok := strings.Cut(err.Error(), "record it with: ")
		if !ok || !strings.HasPrefix(advice, "ssh-keyscan ") {
			t.Fatalf("no ssh-keyscan advice in %v", err)
		}
		if _, lerr := exec.LookPath("ssh-keyscan"); lerr != nil {
			t.Skip("ssh-keyscan is not installed")
		}
		if out, err := exec.Command("/bin/sh", "-c", advice).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", advice, err, out)
		}
		run(t, newPool(t, Options{}), f.openSSHTarget("real", srv), "true")
	})
	t.Run("accept-new records the key sshd presents", func(t *testing.T) {
		os.Remove(f.knownHosts)
		tg := f.openSSHTarget("real", srv)
		tg.HostKeyCheck = HostKeyAcceptNew
		run(t, newPool(t, Options{}), tg, "true")
		data, _ := os.ReadFile(f.knownHosts)
		if string(data) != srv.KnownHostsLine("127.0.0.1")+"\n" {
			t.Errorf("known_hosts:\n%s", data)
		}
	})
}

func TestOpenSSHAsBastion(t *testing.T) {
	f := newFixture(t)
	jump, _ := f.openSSH(sshdtest.Options{Config: []string{"LogLevel DEBUG1"}})
	appendLine(t, f.knownHosts, jump.KnownHostsLine("127.0.0.1"))
	inner := f.server(sshtest.Options{})
	bastion := f.openSSHTarget("jump", jump)
	tg := f.target("inner", inner)
	tg.Bastion = &bastion
	p := newPool(t, Options{})
	if res := run(t, p, tg, "echo behind"); string(res.Stdout) != "behind\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
	if want := fmt.Sprintf("target 127.0.0.1 port %d", inner.Port); !strings.Contains(jump.Log(), want) {
		t.Errorf("sshd did not carry the connection:\n%s", jump.Log())
	}
	if st := inner.Stats(); st.Conns != 1 {
		t.Errorf("inner host: %d connections", st.Conns)
	}
}

// TestOpenSSHHostCertificate: sshd presents a host certificate made by
// OpenSSH's own ssh-keygen, and the pool trusts it through one
// @cert-authority line, with no line for the host itself.
func TestOpenSSHHostCertificate(t *testing.T) {
	keygen, err := exec.LookPath("ssh-keygen")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("ssh-keygen is not installed (Debian package openssh-client)")
		}
		t.Skip("ssh-keygen is not installed")
	}
	f := newFixture(t)
	dir := t.TempDir()
	_, hostKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostPub, err := ssh.NewPublicKey(hostKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "host.pub"), ssh.MarshalAuthorizedKey(hostPub), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-q", "-t", "ed25519", "-N", "", "-C", "fleet CA", "-f", filepath.Join(dir, "ca")},
		{"-q", "-s", filepath.Join(dir, "ca"), "-I", "gpu host", "-h", "-n", "127.0.0.1", "-V", "-5m:+1h", filepath.Join(dir, "host.pub")},
	} {
		if out, err := exec.Command(keygen, args...).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	srv, _ := f.openSSH(sshdtest.Options{HostKey: hostKey, Config: []string{"HostCertificate " + filepath.Join(dir, "host-cert.pub")}})
	caPub, err := os.ReadFile(filepath.Join(dir, "ca.pub"))
	if err != nil {
		t.Fatal(err)
	}
	appendLine(t, f.knownHosts, fmt.Sprintf("@cert-authority [127.0.0.1]:%d %s", srv.Port, strings.TrimSpace(string(caPub))))
	res := run(t, newPool(t, Options{}), f.openSSHTarget("certified", srv), "echo certified")
	if string(res.Stdout) != "certified\n" {
		t.Fatalf("stdout %q\nsshd log:\n%s", res.Stdout, srv.Log())
	}
}

package probe_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpulayer/gpulayer/providers/sandbox"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/ssh"
	"github.com/gpulayer/gpulayer/ssh/sshdtest"
	"github.com/gpulayer/gpulayer/topology"
)

// TestProbeOverOpenSSH probes a machine served by OpenSSH's sshd, whose
// sessions find the sandbox's fake nvidia-smi first on PATH: what
// production machines run, with a GPU recording. It is skipped where sshd
// cannot run (not installed, not root), except under CI=true.
func TestProbeOverOpenSSH(t *testing.T) {
	dir := t.TempDir()
	m, env, err := sandbox.Prepare(dir, 0, 1) // a DGX A100
	if err != nil {
		t.Fatal(err)
	}
	keyFile, pub := writeClientKey(t, dir)
	srv := sshdtest.Start(t, sshdtest.Options{AuthorizedKeys: []gossh.PublicKey{pub}, SetEnv: env})
	knownHosts := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(knownHosts, []byte(srv.KnownHostsLine("127.0.0.1")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	machine := probe.Machine{
		Name: "sshd", Fleet: "lab",
		Target: ssh.Target{Name: "sshd", Address: "127.0.0.1", Port: srv.Port, User: srv.User,
			IdentityFiles: []string{keyFile}, KnownHostsFile: knownHosts, HostKeyCheck: "strict",
			ConnectTimeout: 10 * time.Second},
		Host: facts.LocationClaim{Zone: "paris-1"}, FleetDefaults: facts.LocationClaim{Region: "paris", NetworkGroup: "rack-3"},
		Watch: []probe.Watch{{PID: os.Getpid()}},
	}

	pool := ssh.NewPool(ssh.Options{})
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := probe.Fleet(ctx, pool, []probe.Machine{machine}, probe.Options{Timeout: 30 * time.Second}).Hosts[0]
	if h.Status != facts.StatusOK {
		t.Fatalf("probe over sshd: %s: %s\nsshd log:\n%s", h.Status, h.Error, srv.Log())
	}
	for _, w := range h.Warnings {
		t.Errorf("warning: %s", w)
	}
	want, err := topology.ParseSMI(m.Model.Topology())
	if err != nil {
		t.Fatal(err)
	}
	if h.TopologyRaw != m.Model.Topology() || !reflect.DeepEqual(h.Topology, want) {
		t.Errorf("topology differs from the recording %s", m.Model.TopologyFile)
	}
	if len(h.GPUs) != m.Model.GPUs || len(h.FreeGPUs) != m.Model.GPUs || h.GPUs[0].UUID != m.GPUUUIDs[0] {
		t.Errorf("gpus %+v", h.GPUs)
	}
	if h.TorchVersion != m.Torch || h.CUDADriverVersion != m.Model.Driver {
		t.Errorf("torch %q driver %q", h.TorchVersion, h.CUDADriverVersion)
	}
	if want := (facts.Location{Region: "paris", Zone: "paris-1", NetworkGroup: "rack-3", Source: facts.SourceHost}); h.Location != want {
		t.Errorf("location %+v, want %+v", h.Location, want)
	}
	// sshd runs on this computer, so this test process is a live pid there.
	if len(h.PIDs) != 1 || !h.PIDs[0].Alive || h.PIDs[0].StartTime == 0 {
		t.Errorf("pids %+v", h.PIDs)
	}
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if h.BootID != strings.TrimSpace(string(boot)) {
		t.Errorf("boot id %q", h.BootID)
	}

	// The same sshd behind a known_hosts entry with another key: refused,
	// recorded in the host's facts, never probed.
	_, other := writeClientKeyPair(t)
	otherLine := strings.Replace(srv.KnownHostsLine("127.0.0.1"),
		strings.TrimSpace(string(gossh.MarshalAuthorizedKey(srv.HostKey))),
		strings.TrimSpace(string(gossh.MarshalAuthorizedKey(other))), 1)
	changed := filepath.Join(dir, "known_hosts.changed")
	if err := os.WriteFile(changed, []byte(otherLine+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	machine.Target.KnownHostsFile = changed
	fresh := ssh.NewPool(ssh.Options{})
	defer fresh.Close()
	h = probe.Fleet(ctx, fresh, []probe.Machine{machine}, probe.Options{Timeout: 30 * time.Second}).Hosts[0]
	if h.Status != facts.StatusUnreachable || !strings.Contains(strings.ToLower(h.Error), "host key") || len(h.GPUs) != 0 {
		t.Fatalf("changed host key: status %q error %q", h.Status, h.Error)
	}
	t.Logf("changed host key: %s", h.Error)
}

func writeClientKeyPair(t *testing.T) (ed25519.PrivateKey, gossh.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := gossh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return priv, sshPub
}

func writeClientKey(t *testing.T, dir string) (string, gossh.PublicKey) {
	t.Helper()
	priv, pub := writeClientKeyPair(t)
	block, err := gossh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, pub
}

package probe_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/providers/sandbox"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/ssh"
)

func sandboxMachines(t *testing.T, hosts int) []probe.Machine {
	t.Helper()
	_, ms := startSandbox(t, hosts)
	return ms
}

func startSandbox(t *testing.T, hosts int) (*sandbox.Sandbox, []probe.Machine) {
	t.Helper()
	sb, err := sandbox.Start(sandbox.Options{Hosts: hosts, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	cfg, diags := config.Load(sb.Dir, config.LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	ms, err := probe.Machines(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sb, ms
}

// silentListener accepts connections and never says a word, as a host
// whose sshd hangs does.
func silentListener(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return l.Addr().(*net.TCPAddr).Port
}

// closedPort is a port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func TestOneUnreachableOrSlowHostDoesNotStopTheOthers(t *testing.T) {
	sb, all := startSandbox(t, 4)
	// The fourth machine hangs in the middle of the probe: its GPU list
	// becomes a FIFO nobody writes, so its nvidia-smi blocks on opening it
	// after the first sections were printed.
	hung := all[3]
	gpus := filepath.Join(sb.Machines[3].Dir, "gpus")
	if err := os.Remove(gpus); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(gpus, 0o644); err != nil {
		t.Fatal(err)
	}
	good := all[:3]
	refused, silent := good[0], good[0]
	refused.Name, refused.Target.Name, refused.Target.Port = "refused", "refused", closedPort(t)
	silent.Name, silent.Target.Name, silent.Target.Port = "silent", "silent", silentListener(t)
	silent.Target.ConnectTimeout = 2 * time.Second
	machines := []probe.Machine{silent, good[0], refused, good[1], hung, good[2]}

	for _, par := range []int{1, 4} {
		pool := ssh.NewPool(ssh.Options{Parallelism: par})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		doc := probe.Fleet(ctx, pool, machines, probe.Options{Parallelism: par, Timeout: 4 * time.Second})
		cancel()
		_ = pool.Close()

		var names []string
		for _, h := range doc.Hosts {
			names = append(names, h.Name)
		}
		if want := []string{"silent", good[0].Name, "refused", good[1].Name, hung.Name, good[2].Name}; !reflect.DeepEqual(names, want) {
			t.Fatalf("parallelism %d: hosts %v, want them in the order given %v", par, names, want)
		}
		for _, h := range doc.Hosts {
			switch h.Name {
			case hung.Name:
				// What arrived before it hung is kept; the host failed.
				if h.Status != facts.StatusFailed || !strings.Contains(h.Error, "timed out") || h.TorchVersion == "" {
					t.Errorf("parallelism %d: hung host: status %q error %q torch %q", par, h.Status, h.Error, h.TorchVersion)
				}
			case "silent", "refused":
				if h.Status == facts.StatusOK || h.Error == "" {
					t.Errorf("parallelism %d: %s: status %q error %q", par, h.Name, h.Status, h.Error)
				}
				if len(h.GPUs) != 0 || h.GPUs == nil {
					t.Errorf("parallelism %d: %s: gpus %v", par, h.Name, h.GPUs)
				}
			default:
				if h.Status != facts.StatusOK || len(h.GPUs) == 0 {
					t.Errorf("parallelism %d: %s: %s %s, %d GPUs", par, h.Name, h.Status, h.Error, len(h.GPUs))
				}
			}
		}
		if h := doc.Find("refused"); h.Status != facts.StatusUnreachable {
			t.Errorf("parallelism %d: refused host has status %q: %s", par, h.Status, h.Error)
		}
	}
}

func TestProgressIsReportedOncePerHost(t *testing.T) {
	machines := sandboxMachines(t, 4)
	pool := ssh.NewPool(ssh.Options{})
	defer pool.Close()
	var seen []int
	names := map[string]bool{}
	doc := probe.Fleet(context.Background(), pool, machines, probe.Options{
		Progress: func(done, total int, h *facts.Host) {
			if total != 4 {
				t.Errorf("total %d", total)
			}
			seen = append(seen, done)
			names[h.Name] = true
		},
	})
	if !reflect.DeepEqual(seen, []int{1, 2, 3, 4}) || len(names) != 4 {
		t.Fatalf("progress %v for %v", seen, names)
	}
	if doc.Version != facts.Version {
		t.Fatalf("version %d", doc.Version)
	}
}

func TestMachinesFromConfigurationResolveTargetsAndLocationClaims(t *testing.T) {
	cfg, diags := config.Load(filepath.Join("testdata", "config"), config.LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	ms, err := probe.Machines(cfg)
	if err != nil {
		t.Fatal(err)
	}
	home, _ := os.UserHomeDir()
	dir := filepath.Join("testdata", "config")
	byName := map[string]probe.Machine{}
	for _, m := range ms {
		byName[m.Name] = m
	}
	a3 := byName["a3"]
	wantBastion := &ssh.Target{Name: "bastion bastion.lab.example.org", Address: "bastion.lab.example.org", Port: 2200, User: "jump",
		IdentityFiles: []string{filepath.Join(dir, "keys/id_ed25519")}, KnownHostsFile: filepath.Join(home, ".ssh/lab_known_hosts"),
		HostKeyCheck: "accept-new", ConnectTimeout: 7 * time.Second}
	wantA3 := ssh.Target{Name: "a3", Address: "10.1.0.13", Port: 2222, User: "ubuntu",
		IdentityFiles: []string{filepath.Join(dir, "keys/id_ed25519")}, KnownHostsFile: filepath.Join(home, ".ssh/lab_known_hosts"),
		HostKeyCheck: "accept-new", ConnectTimeout: 7 * time.Second, Bastion: wantBastion}
	if !reflect.DeepEqual(a3.Target, wantA3) {
		t.Errorf("a3 target\n%+v\nwant\n%+v", a3.Target, wantA3)
	}
	if a1 := byName["a1"]; a1.Target.Port != 22 || a1.Host != (facts.LocationClaim{}) ||
		a1.FleetDefaults != (facts.LocationClaim{Region: "paris", Zone: "paris-1", NetworkGroup: "rack-3"}) {
		t.Errorf("a1: %+v", a1)
	}
	if a4 := byName["a4"]; a4.Host != (facts.LocationClaim{Zone: "paris-1"}) {
		t.Errorf("a4 restates its fleet's zone in its own block: claim %+v, want its zone as the host's own", a4.Host)
	}
	if b1 := byName["b1"]; b1.Target.Address != "fd00:10:1::21" || b1.Host != (facts.LocationClaim{Zone: "paris-2", NetworkGroup: "rack-4"}) {
		t.Errorf("b1: %+v", b1)
	}
	desk := byName["desk"]
	if desk.Target.KnownHostsFile != filepath.Join(home, ".ssh/known_hosts") || desk.Target.HostKeyCheck != "strict" || desk.Target.User == "" {
		t.Errorf("desk (no ssh block) target %+v", desk.Target)
	}
}

func TestCommandPassesOnlyPositivePIDsQuoted(t *testing.T) {
	got := probe.Command("abc123", []probe.Watch{{PID: 12}, {PID: 0}, {PID: -5}, {PID: 40000, Node: "train/r01/node-1"}, {PID: 7, Node: "../x"}})
	want := "sh -s -- " + ssh.Quote("abc123") + " " + ssh.Quote("12") + " " + ssh.Quote("40000:train/r01/node-1") + " " + ssh.Quote("7")
	if got != want {
		t.Fatalf("Command = %q, want %q", got, want)
	}
	if strings.Contains(got, "-5") {
		t.Fatal("negative pid passed")
	}
}

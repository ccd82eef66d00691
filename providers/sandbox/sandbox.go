package sandbox

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gpulayer/gpulayer/providers/sandbox/recordings"
	"github.com/gpulayer/gpulayer/ssh/sshtest"
)

// scripts are the machines' programs written in sh; the Go ones (tools.go)
// get a shim each in bin/.
//
//go:embed scripts/python3 scripts/sandbox-shell scripts/torchrun
var scripts embed.FS

// Files Start writes into the sandbox directory.
const (
	ConfigFile     = "sandbox.hcl"
	KnownHostsFile = "known_hosts"
	KeyFile        = "client_key" // OpenSSH private key, mode 0600; .pub beside it
)

// MaxHosts bounds --hosts: each machine is a listening socket and a few
// files.
const MaxHosts = 2000

// Options describe the fleet to simulate.
type Options struct {
	// Hosts is the number of machines, 1 to MaxHosts.
	Hosts int
	// Dir receives the configuration, keys and the machines' files. It is
	// created if missing; files of an earlier sandbox there are replaced.
	Dir string
	// Shell is how machines run their sessions' commands: "" or InProcess
	// interprets them in this process (real processes only for programs
	// that are not sandbox shell scripts); the absolute path of a POSIX
	// shell, such as /bin/sh, runs every command, nvidia-smi and python3
	// as real processes of that shell.
	Shell string
	// Like, when not empty, names the machines and places them: machine i
	// takes Like[i]'s name, fleet and location (models and torch versions
	// are dealt as usual), and Hosts is len(Like). A sandbox like a
	// configuration's declared hosts (LikeConfig) lets its jobs be planned
	// and applied on simulated machines.
	Like []Spot
	// Torch, when set, is every machine's torch version, instead of a
	// fleet in the middle of an upgrade (every fourth machine older).
	Torch string
	// NVLinkDomain adds this many machines, 0 to MaxNVLinkDomain, after
	// the Hosts others: the compute trays of one simulated GB200 NVL72
	// rack (recordings.NVLinkTray), named nvl-01, nvl-02, ..., in one
	// zone and network group (fleet nvl72), whose GPUs' fabric
	// registration puts them all in one multi-node NVLink domain. Not
	// with Like, whose machines are the configuration's.
	NVLinkDomain int
}

// Spot is where one machine of a sandbox is, and what it is called.
type Spot struct {
	Name, Fleet                string
	Region, Zone, NetworkGroup string
}

// Machine is one simulated machine.
type Machine struct {
	Name     string
	Fleet    string // the region: one fleet per region
	Region   string
	Zone     string
	Network  string // network group
	Model    recordings.Machine
	Torch    string
	GPUUUIDs []string
	// Fabric is the NVLink fabric clique every GPU of the machine is
	// registered with; nil outside the simulated NVLink domain.
	Fabric *Fabric
	Port   int    // on 127.0.0.1
	Dir    string // its files: gpus, topo.txt, home/
}

// Sandbox is a running fleet. Close stops it.
type Sandbox struct {
	Dir      string
	User     string
	Machines []Machine
	servers  []*sshtest.Server
}

// SetReachable makes machine name stop answering SSH (false: its
// connections are dropped, as a partitioned or powered-off machine's
// would be) or answer again (true). Its processes keep running either way.
func (s *Sandbox) SetReachable(name string, reachable bool) error {
	for i, m := range s.Machines {
		if m.Name == name && i < len(s.servers) {
			s.servers[i].SetDown(!reachable)
			return nil
		}
	}
	return fmt.Errorf("sandbox: no machine %q", name)
}

// ConfigPath, KnownHostsPath and KeyPath are the files Start wrote.
func (s *Sandbox) ConfigPath() string     { return filepath.Join(s.Dir, ConfigFile) }
func (s *Sandbox) KnownHostsPath() string { return filepath.Join(s.Dir, KnownHostsFile) }
func (s *Sandbox) KeyPath() string        { return filepath.Join(s.Dir, KeyFile) }

// Start writes the sandbox's files into opts.Dir and starts its machines.
// On error nothing is left running.
func Start(opts Options) (_ *Sandbox, err error) {
	if len(opts.Like) > 0 {
		opts.Hosts = len(opts.Like)
		if opts.NVLinkDomain > 0 {
			return nil, errors.New("sandbox: an NVLink domain cannot be added to machines like a configuration's")
		}
	}
	if opts.NVLinkDomain < 0 || opts.NVLinkDomain > MaxNVLinkDomain {
		return nil, fmt.Errorf("sandbox: --nvlink-domain must be from 0 to %d, got %d", MaxNVLinkDomain, opts.NVLinkDomain)
	}
	total := opts.Hosts + opts.NVLinkDomain
	if opts.Hosts < 0 || total < 1 || total > MaxHosts {
		return nil, fmt.Errorf("sandbox: --hosts must be from 1 to %d, got %d", MaxHosts, opts.Hosts)
	}
	if opts.Dir == "" {
		return nil, errors.New("sandbox: no directory given for its configuration and keys")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	shell := opts.Shell
	if shell != "" && shell != InProcess {
		if !filepath.IsAbs(shell) {
			return nil, fmt.Errorf("sandbox: --shell must be %q or the absolute path of a POSIX shell, got %q", InProcess, shell)
		}
		if st, err := os.Stat(shell); err != nil || st.IsDir() || st.Mode().Perm()&0o111 == 0 {
			return nil, fmt.Errorf("sandbox: --shell %s is not an executable file", shell)
		}
	}
	s := &Sandbox{Dir: dir, User: currentUser()}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	if err := ownDirs(dir); err != nil {
		return nil, err
	}
	// Always rewritten, so a directory of an older sandbox gets this
	// version's scripts.
	if err := writeScripts(filepath.Join(dir, "bin")); err != nil {
		return nil, err
	}
	loginShell := filepath.Join(dir, "bin", "sandbox-shell")
	var runner sshtest.CommandRunner
	if shell == "" || shell == InProcess {
		// One runner for all machines: it holds the parsed scripts.
		runner = &inProcessShell{loginShell: loginShell}
	} else if shell != "/bin/sh" {
		// The login shell script runs under the chosen shell.
		if err := setInterpreter(loginShell, shell); err != nil {
			return nil, err
		}
	}
	client, err := writeClientKey(s.KeyPath())
	if err != nil {
		return nil, err
	}
	var known strings.Builder
	for i := 0; i < total; i++ {
		var m Machine
		switch {
		case i >= opts.Hosts:
			m = planTray(i-opts.Hosts, opts.NVLinkDomain)
		case len(opts.Like) > 0:
			m = planLike(plan(i, opts.Hosts, recordings.Machines()), opts.Like[i])
		default:
			m = plan(i, opts.Hosts, recordings.Machines())
		}
		if opts.Torch != "" {
			m.Torch = opts.Torch
		}
		m, env, err := prepare(dir, m)
		if err != nil {
			return nil, err
		}
		hostKey, err := newSigner()
		if err != nil {
			return nil, err
		}
		l, err := listen()
		if err != nil {
			return nil, fmt.Errorf("sandbox: machine %s: %w", m.Name, err)
		}
		srv, err := sshtest.Start(sshtest.Options{
			HostKey:        hostKey,
			AuthorizedKeys: []gossh.PublicKey{client},
			Env:            env,
			EnvOnly:        true,
			Dir:            filepath.Join(m.Dir, "home"),
			Shell:          loginShell,
			Runner:         runner,
			Listener:       l,
			KeyExchanges:   machineKeyExchanges,
		})
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("sandbox: machine %s: %w", m.Name, err)
		}
		s.servers = append(s.servers, srv)
		m.Port = srv.Port
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(m.Port))
		known.WriteString(knownhosts.Line([]string{knownhosts.Normalize(addr)}, hostKey.PublicKey()))
		known.WriteByte('\n')
		s.Machines = append(s.Machines, m)
	}
	if err := writeFile(s.KnownHostsPath(), []byte(known.String()), 0o644); err != nil {
		return nil, err
	}
	if err := writeFile(s.ConfigPath(), Config(s), 0o644); err != nil {
		return nil, err
	}
	return s, nil
}

// Prepare writes the files of machine i of an n-machine sandbox in dir (the
// shared bin/ with the fake nvidia-smi, python3 and login shell, and
// machines/NAME/) and returns the machine and its sessions' whole
// environment. Start serves each machine with an in-process SSH server; a
// test can serve one with OpenSSH's sshd instead (SetEnv). dir, and bin/
// and machines/ in it, must be the current user's and writable by no one
// else (they are created so when missing).
func Prepare(dir string, i, n int) (Machine, []string, error) {
	return prepare(dir, plan(i, n, recordings.Machines()))
}

// prepare writes the files of the planned machine m.
func prepare(dir string, m Machine) (Machine, []string, error) {
	if err := ownDirs(dir); err != nil {
		return Machine{}, nil, err
	}
	bin := filepath.Join(dir, "bin")
	if _, err := os.Lstat(filepath.Join(bin, "sandbox-shell")); err != nil {
		if err := writeScripts(bin); err != nil {
			return Machine{}, nil, err
		}
	}
	m.Dir = filepath.Join(dir, "machines", m.Name)
	if err := writeMachine(&m); err != nil {
		return Machine{}, nil, err
	}
	env := append(baseEnv(bin),
		"HOME="+filepath.Join(m.Dir, "home"),
		machineEnv+"="+m.Dir,
		"GPULAYER_SANDBOX_TORCH="+m.Torch,
	)
	return m, env, nil
}

// Close stops every machine's SSH server and ends the processes that were
// started on the machines, so that nothing outlives the sandbox.
func (s *Sandbox) Close() error {
	var errs []error
	for _, srv := range s.servers {
		if err := srv.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	s.servers = nil
	if err := stopProcesses(filepath.Join(s.Dir, "machines") + string(filepath.Separator)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// regions over which machines are spread: two regions of two zones each.
var regions = []struct {
	name  string
	zones []string
}{
	{"europe-west1", []string{"europe-west1-b", "europe-west1-c"}},
	{"us-central1", []string{"us-central1-a", "us-central1-f"}},
}

// plan decides machine i's name, location, model and torch version. The
// spread is deterministic: machines come in pairs that share a network
// group, two pairs per region (one per zone), and models are dealt in turn
// so that each zone holds different topologies.
func plan(i, n int, models []recordings.Machine) Machine {
	width := max(2, len(strconv.Itoa(n)))
	r := regions[(i/4)%len(regions)]
	zone := r.zones[(i/2)%len(r.zones)]
	m := Machine{
		Name:    fmt.Sprintf("gpu-%0*d", width, i+1),
		Fleet:   r.name,
		Region:  r.name,
		Zone:    zone,
		Network: fmt.Sprintf("%s-rack%d", zone, i/8+1),
		Model:   models[i%len(models)],
		Torch:   "2.5.1+cu124",
	}
	if i%4 == 3 {
		// Every fourth machine runs an older torch, as fleets do while
		// they are being upgraded.
		m.Torch = "2.4.1+cu121"
	}
	for g := 0; g < m.Model.GPUs; g++ {
		m.GPUUUIDs = append(m.GPUUUIDs, gpuUUID(m.Name, g))
	}
	return m
}

// planLike is machine m named and placed as spot says.
func planLike(m Machine, spot Spot) Machine {
	m.Name, m.Fleet = spot.Name, spot.Fleet
	m.Region, m.Zone, m.Network = spot.Region, spot.Zone, spot.NetworkGroup
	m.GPUUUIDs = m.GPUUUIDs[:0]
	for g := 0; g < m.Model.GPUs; g++ {
		m.GPUUUIDs = append(m.GPUUUIDs, gpuUUID(m.Name, g))
	}
	return m
}

// planTray is tray k of an n-tray simulated NVL72 rack: one zone and
// network group, one torch version, every GPU registered with the rack's
// fabric clique.
func planTray(k, n int) Machine {
	m := Machine{
		Name:    fmt.Sprintf("nvl-%0*d", max(2, len(strconv.Itoa(n))), k+1),
		Fleet:   "nvl72",
		Region:  regions[0].name,
		Zone:    regions[0].zones[0],
		Network: regions[0].zones[0] + "-nvl72",
		Model:   recordings.NVLinkTray(),
		Torch:   "2.5.1+cu124",
		Fabric:  domainFabric(),
	}
	for g := 0; g < m.Model.GPUs; g++ {
		m.GPUUUIDs = append(m.GPUUUIDs, gpuUUID(m.Name, g))
	}
	return m
}

// gpuUUID is a stable UUID for GPU g of machine name.
func gpuUUID(name string, g int) string {
	h := sha256.Sum256([]byte(name + "/" + strconv.Itoa(g)))
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// PCIBusID is the bus id the sandbox gives GPU g.
func PCIBusID(g int) string { return fmt.Sprintf("00000000:%02X:00.0", 0x07+g*0x10) }

func writeMachine(m *Machine) error {
	for _, d := range []string{m.Dir, filepath.Join(m.Dir, "home")} {
		if err := ownDir(d); err != nil {
			return err
		}
	}
	// A machine that ran GPU processes before is idle again.
	_ = os.Remove(filepath.Join(m.Dir, launchedFile))
	var gpus strings.Builder
	for g, uuid := range m.GPUUUIDs {
		fmt.Fprintf(&gpus, "%d|%s|%s|%s|%d|%s\n", g, uuid, m.Model.GPUName, PCIBusID(g), m.Model.MemoryMiB, m.Model.Driver)
	}
	files := map[string]string{gpusFile: gpus.String(), topoFile: m.Model.Topology()}
	if fabric := fabricRecord(m); fabric != "" {
		files[fabricFile] = fabric
	} else {
		_ = os.Remove(filepath.Join(m.Dir, fabricFile)) // a model's of an earlier sandbox
	}
	for name, text := range files {
		if err := writeRecord(filepath.Join(m.Dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// setInterpreter makes the script at path start with #!shell.
func setInterpreter(path, shell string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	_, rest, _ := strings.Cut(string(b), "\n")
	return writeFile(path, []byte("#!"+shell+"\n"+rest), 0o755)
}

// writeScripts writes the machines' programs into bin: the sh scripts and
// the shims of the Go tools. The torchrun shim is there only where the
// computer has a torchrun (one an earlier sandbox wrote is removed), so
// a machine's probe finds torchrun exactly when a job could run it.
func writeScripts(bin string) error {
	names := []string{"python3", "sandbox-shell"}
	if realTorchrun() != "" {
		names = append(names, "torchrun")
	} else if err := os.Remove(filepath.Join(bin, "torchrun")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("sandbox: %w", err)
	}
	for _, name := range names {
		b, err := scripts.ReadFile("scripts/" + name)
		if err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		if err := writeFile(filepath.Join(bin, name), b, 0o755); err != nil {
			return err
		}
	}
	return writeToolShims(bin)
}

// baseEnv is the environment every machine's sessions start with, and all
// of it but HOME and the machine's own variables: the sandbox's bin first
// on PATH, the login shell, the user, and the real python3 and torchrun
// for their shims. Nothing else of the sandbox's environment reaches a machine, as
// sshd passes none of its own: not the SSH agent's socket, not the secrets
// of whoever started it.
func baseEnv(bin string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	env := []string{
		"PATH=" + bin + string(os.PathListSeparator) + path,
		"SHELL=" + filepath.Join(bin, "sandbox-shell"),
		"LANG=C.UTF-8",
	}
	if py := realPython3(); py != "" {
		env = append(env, "GPULAYER_SANDBOX_PYTHON3="+py)
	}
	if tr := realTorchrun(); tr != "" {
		env = append(env, "GPULAYER_SANDBOX_TORCHRUN="+tr)
	}
	if u := currentUser(); u != "" {
		env = append(env, "USER="+u, "LOGNAME="+u)
	}
	return env
}

// realPython3 is the python3 interpreter the machines' python3 runs: the
// executable itself, as the interpreter reports it, where PATH finds a
// wrapper (pyenv's and asdf's shims are shell scripts that fork helpers
// and take tens of milliseconds, on every launch); "" without python3.
//
// It is asked once per program: every machine of every sandbox shares it.
var realPython3 = sync.OnceValue(findPython3)

func findPython3() string {
	py, err := exec.LookPath("python3")
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "-c", "import sys; print(sys.executable)").Output()
	if real := strings.TrimSpace(string(out)); err == nil && filepath.IsAbs(real) {
		if fi, err := os.Stat(real); err == nil && fi.Mode().IsRegular() {
			return real
		}
	}
	return py
}

// realTorchrun is the computer's torchrun, which the machines' torchrun
// shim runs: the absolute path PATH finds, "" without one. Asked once per
// program, as realPython3.
var realTorchrun = sync.OnceValue(func() string {
	p, err := exec.LookPath("torchrun")
	if err != nil {
		return ""
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return ""
	}
	return abs
})

func newSigner() (gossh.Signer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("sandbox: host key: %w", err)
	}
	return gossh.NewSignerFromKey(priv)
}

// writeClientKey writes a new ed25519 key in OpenSSH format (0600) and its
// .pub, and returns the public key.
func writeClientKey(path string) (gossh.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("sandbox: client key: %w", err)
	}
	block, err := gossh.MarshalPrivateKey(priv, "gpulayer sandbox")
	if err != nil {
		return nil, fmt.Errorf("sandbox: client key: %w", err)
	}
	// A new file, 0600 from the start (a replaced file's mode is not
	// kept).
	if err := writeFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, err
	}
	sshPub, err := gossh.NewPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("sandbox: client key: %w", err)
	}
	line := strings.TrimSpace(string(gossh.MarshalAuthorizedKey(sshPub))) + " gpulayer sandbox\n"
	if err := writeFile(path+".pub", []byte(line), 0o644); err != nil {
		return nil, err
	}
	return sshPub, nil
}

func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return os.Getenv("USER")
}

// machineKeyExchanges are the key exchanges a machine's SSH server offers:
// those of the sshd of today's distributions (OpenSSH 8.5 to 9.8: Debian
// 12, Ubuntu 22.04 and 24.04, RHEL 9) that x/crypto/ssh has. Their
// post-quantum hybrid, sntrup761x25519-sha512, x/crypto does not have, and
// mlkem768x25519-sha256 came with OpenSSH 9.9; so gpulayer's client agrees
// curve25519-sha256 with a machine, as with such a fleet, and so does
// OpenSSH's ssh before 9.9, the benchmarks' reference. With x/crypto's
// default, gpulayer alone paid for ML-KEM on both sides of each of its
// connections (in a 500-machine probe ~4 % of the sandbox's CPU and ~10 %
// of the client's). The client's own preference is
// unchanged: it still asks for ML-KEM first, which a server that has it
// agrees.
var machineKeyExchanges = []string{
	gossh.KeyExchangeCurve25519,
	"curve25519-sha256@libssh.org",
	gossh.KeyExchangeECDHP256,
	gossh.KeyExchangeECDHP384,
	gossh.KeyExchangeECDHP521,
	gossh.KeyExchangeDH16SHA512,
	gossh.KeyExchangeDH14SHA256,
}

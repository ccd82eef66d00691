// Command apply benchmarks `gpulayer apply` and `gpulayer destroy` of a job
// with one node on every machine of a sandbox fleet against pdsh doing the
// same by hand, in the same run:
//
//   - gpulayer: the real command line, `gpulayer apply --auto-approve
//     --node-parallelism P DIR` (its refresh, plan, launches over SSH, start
//     checks and state saves), then `gpulayer destroy --auto-approve` of it;
//     each a fresh process, as a person runs them;
//   - pdsh: `pdsh -R ssh -f P` (Debian's package) starting the same command
//     detached on every machine (`setsid sleep 600`, standard streams to a
//     log, its pid kept in a file), then stopping it (SIGTERM to its process
//     group, and waiting, checked every 10 ms, until it has ended), one
//     OpenSSH client per machine with the same key and known_hosts.
//
// A round runs each client's start and then its stop, the two clients in
// an order that alternates from round to round; round 0 is an unmeasured
// warm-up. After each start and stop it counts the processes of the job on
// the computer (the sandbox's machines are processes of this computer), so
// a client that returned early is not measured as fast. It prints one JSON
// line per measurement, then medians and the median of the round-by-round
// ratios.
//
//	go run ./benchmarks/apply -hosts 64 -rounds 7 [-gpulayer BIN] [-before OLD_BIN]
//
// Without pdsh it says so and exits 0. The sandbox (its machines' shell:
// -shell; every machine with one torch version, so one job spans them all)
// runs in a child process, so its work is neither client's.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpulayer/gpulayer/benchmarks/internal/stats"
	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/providers/sandbox"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/ssh"
)

func main() {
	var err error
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		err = serve(os.Args[2:])
	} else {
		err = drive(os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchmark:", err)
		os.Exit(1)
	}
}

// result is one measurement.
type result struct {
	What        string  `json:"what"` // "start" or "stop"
	Client      string  `json:"client"`
	Hosts       int     `json:"hosts"`
	Parallelism int     `json:"parallelism"`
	Round       int     `json:"round"`
	WallSeconds float64 `json:"wall_s"`
	// CPUSeconds is the client's own CPU time (user and system, with its
	// children: pdsh's ssh processes).
	CPUSeconds float64 `json:"cpu_s"`
	// SandboxCPUSeconds is the sandbox process's CPU time meanwhile, with
	// that of the children it reaped: the machines' side (sshd, shells,
	// and whatever the client ran there).
	SandboxCPUSeconds float64 `json:"sandbox_cpu_s"`
	Load1             float64 `json:"load1"`
}

func drive(args []string) error {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	hosts := fs.Int("hosts", 64, "machines, one node on each")
	rounds := fs.Int("rounds", 7, "measured rounds")
	par := fs.Int("parallelism", 64, "nodes started or stopped at once, by both clients (--node-parallelism, pdsh -f)")
	shell := fs.String("shell", sandbox.InProcess, "the sandbox machines' shell (as gpulayer sandbox --shell)")
	bin := fs.String("gpulayer", "", "the gpulayer binary (default: built from this checkout)")
	before := fs.String("before", "", "another gpulayer `binary` (an older build) run in the same rounds, in turn with the others, as client gpulayer-before")
	check := fs.Bool("check", false, "also run gpulayer with the job's start_check at its default (300 ms), as client gpulayer-check")
	if err := fs.Parse(args); err != nil {
		return err
	}
	pdsh, err := exec.LookPath("pdsh")
	if err != nil {
		fmt.Println("skipped: pdsh is not installed, and it is the reference (Debian and Ubuntu: apt-get install pdsh)")
		return nil
	}
	if _, err := exec.LookPath("ssh"); err != nil {
		return fmt.Errorf("pdsh -R ssh needs the OpenSSH client (ssh): %w", err)
	}
	work, err := os.MkdirTemp("", "gpulayer-apply-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if *bin == "" {
		*bin = filepath.Join(work, "gpulayer")
		if out, err := exec.Command("go", "build", "-o", *bin, "./cmd/gpulayer").CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/gpulayer (run from the repository's root): %v\n%s", err, out)
		}
	}
	dir := filepath.Join(work, "sandbox")
	self, err := os.Executable()
	if err != nil {
		return err
	}
	stop, sandboxPID, err := startSandbox(self, dir, *hosts, *shell)
	if err != nil {
		return err
	}
	defer stop()
	machines, err := sandboxMachines(dir)
	if err != nil {
		return err
	}
	// start_check is 0 for the comparison with pdsh, which starts the
	// command and watches nothing (gpulayer then reports a node once its
	// leader leads its session); -check adds a client with the default
	// (300 ms), whose wait is the job's.
	if err := os.WriteFile(filepath.Join(dir, "bench.hcl"), []byte(fmt.Sprintf(`variable "start_check" {
  type    = string
  default = "0s"
}

job "applybench" {
  nodes         = %d
  gpus_per_node = 1
  launcher      = "plain"
  stop_timeout  = "30s"
  start_check   = var.start_check
  command       = ["sleep", "600"]
}
`, len(machines))), 0o644); err != nil {
		return err
	}
	sshConfig, err := writeSSHConfig(work, machines)
	if err != nil {
		return err
	}
	fmt.Printf("# %s loadavg %s\n", time.Now().UTC().Format(time.RFC3339), loadavg())
	fmt.Printf("# %s %s/%s, %d CPUs, %d machines (shell %s), parallelism %d, %s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(),
		len(machines), *shell, *par, pdshVersion(pdsh))
	clients := []client{
		gpulayerClient{label: "gpulayer", bin: *bin, dir: dir, par: *par},
		pdshClient{bin: pdsh, config: sshConfig, machines: machines, par: *par},
	}
	if *before != "" {
		fmt.Printf("# gpulayer-before: %s\n", *before)
		clients = append(clients, gpulayerClient{label: "gpulayer-before", bin: *before, dir: dir, par: *par})
	}
	if *check {
		clients = append(clients, gpulayerClient{label: "gpulayer-check", bin: *bin, dir: dir, par: *par, startCheck: "300ms"})
	}
	var all []result
	for round := 0; round <= *rounds; round++ {
		// Each round starts with the next client: every client runs first,
		// in the middle and last as often as the others (with two, the
		// order alternates).
		var order []client
		for i := range clients {
			order = append(order, clients[(round+i)%len(clients)])
		}
		for _, c := range order {
			for _, what := range []string{"start", "stop"} {
				r := result{What: what, Client: c.name(), Hosts: len(machines), Parallelism: *par, Round: round}
				sandboxCPU := processCPU(sandboxPID)
				start := time.Now()
				cpu, out, err := c.run(what)
				r.WallSeconds, r.CPUSeconds = time.Since(start).Seconds(), cpu
				r.SandboxCPUSeconds = processCPU(sandboxPID) - sandboxCPU
				if err != nil {
					return fmt.Errorf("%s %s, round %d: %w", c.name(), what, round, err)
				}
				want := 0
				if what == "start" {
					want = len(machines)
				}
				// Outside the time: pdsh's start returns before its
				// command has exec'd sleep, a stop's zombies wait for init.
				if got := awaitCount(c.marker(), dir, want, 10*time.Second); got != want {
					return fmt.Errorf("%s %s, round %d: %d processes of the job on the machines, want %d; it printed\n%s", c.name(), what, round, got, want, tail(out))
				}
				r.Load1 = stats.Load1()
				if round > 0 {
					b, _ := json.Marshal(r)
					fmt.Println(string(b))
					all = append(all, r)
				}
			}
		}
	}
	summarize(os.Stdout, all, *before != "")
	fmt.Printf("# %s loadavg %s\n", time.Now().UTC().Format(time.RFC3339), loadavg())
	return nil
}

// startSandbox runs the sandbox in a child process (this program's serve)
// until the returned function stops it, and says its pid.
func startSandbox(self, dir string, hosts int, shell string) (func(), int, error) {
	cmd := exec.Command(self, "serve", "-hosts", strconv.Itoa(hosts), "-dir", dir, "-shell", shell)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, 0, err
	}
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		stop()
		return nil, 0, fmt.Errorf("sandbox did not start: %q %v", line, err)
	}
	return stop, cmd.Process.Pid, nil
}

// processCPU is a live process's CPU time, with its reaped children's
// (fields 14-17 of /proc/PID/stat), in seconds.
func processCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return 0
	}
	var ticks float64
	for _, v := range f[11:15] { // utime stime cutime cstime
		n, _ := strconv.ParseFloat(v, 64)
		ticks += n
	}
	return ticks / clockTicks
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go runs on.
const clockTicks = 100

// serve runs a sandbox until SIGTERM: every machine reports one torch
// version, so that one job can have a node on each.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	hosts := fs.Int("hosts", 64, "machines")
	dir := fs.String("dir", "", "sandbox directory")
	shell := fs.String("shell", sandbox.InProcess, "the machines' shell")
	profile := fs.String("cpuprofile", "", "write a CPU profile of the sandbox, until SIGTERM, to `FILE`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	// As `gpulayer sandbox` and the probe benchmark's sandbox do: the
	// machines' collector at GOGC 400 (providers/sandbox/gc.go).
	sandbox.TuneGC()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sb, err := sandbox.Start(sandbox.Options{Hosts: *hosts, Dir: *dir, Shell: *shell, Torch: "2.5.1+cu124"})
	if err != nil {
		return err
	}
	defer sb.Close()
	fmt.Println("ready")
	<-ctx.Done()
	return nil
}

// sandboxMachines are the sandbox's machines, as its configuration says
// they are reached.
func sandboxMachines(dir string) ([]probe.Machine, error) {
	cfg, diags := config.Load(dir, config.LoadOptions{})
	if diags.HasErrors() {
		return nil, fmt.Errorf("%s: %s", dir, diags.Error())
	}
	return probe.Machines(cfg)
}

// writeSSHConfig writes an OpenSSH client configuration naming each
// machine (pdsh passes ssh a host name, never a port), with the
// sandbox's key and known_hosts, as a careful script sets them.
func writeSSHConfig(work string, machines []probe.Machine) (string, error) {
	var b strings.Builder
	for _, m := range machines {
		t := m.Target
		fmt.Fprintf(&b, "Host %s\n  HostName %s\n  Port %d\n  User %s\n", m.Name, t.Address, t.Port, t.User)
		for _, id := range t.IdentityFiles {
			fmt.Fprintf(&b, "  IdentityFile %s\n", id)
		}
		fmt.Fprintf(&b, "  UserKnownHostsFile %s\n", t.KnownHostsFile)
	}
	b.WriteString("Host *\n  BatchMode yes\n  StrictHostKeyChecking yes\n  GlobalKnownHostsFile /dev/null\n  IdentitiesOnly yes\n  ConnectTimeout 10\n  LogLevel ERROR\n")
	path := filepath.Join(work, "ssh_config")
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

// loadavg is /proc/loadavg, as it reads.
func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}

func pdshVersion(bin string) string {
	out, _ := exec.Command(bin, "-V").CombinedOutput()
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(first)
}

// client is one way of starting and stopping the job.
type client interface {
	name() string
	// marker is the environment entry every process of the job carries.
	marker() string
	// run starts or stops the job, and returns the CPU time it took.
	run(what string) (float64, string, error)
}

type gpulayerClient struct {
	label    string
	bin, dir string
	par      int
	// startCheck is the job's start_check (--var); "" leaves the
	// configuration's, 0s.
	startCheck string
}

func (g gpulayerClient) name() string   { return g.label }
func (g gpulayerClient) marker() string { return "GPULAYER_JOB=applybench" }

func (g gpulayerClient) run(what string) (float64, string, error) {
	verb := "apply"
	if what == "stop" {
		verb = "destroy"
	}
	args := []string{verb, "--auto-approve", "--no-color", "--node-parallelism", strconv.Itoa(g.par)}
	if g.startCheck != "" {
		args = append(args, "--var", "start_check="+g.startCheck)
	}
	return runCommand(exec.Command(g.bin, append(args, g.dir)...))
}

type pdshClient struct {
	bin, config string
	machines    []probe.Machine
	par         int
}

func (p pdshClient) name() string   { return "pdsh" }
func (p pdshClient) marker() string { return "PDSH_BENCH=bench" }

// pdshStart is what pdsh runs on each machine to start the node: detached
// in a session of its own, its streams to a log, its pid kept.
const pdshStart = `mkdir -p "$HOME/.pdsh-bench" && cd "$HOME/.pdsh-bench" || exit 1; ` +
	`PDSH_BENCH=bench setsid sleep 600 </dev/null >node.log 2>&1 & echo $! >pid`

// pdshStop stops it: SIGTERM to its process group, then a wait, checked
// every 10 ms for up to 10 s, until the process has ended: gone, or a
// zombie (this computer's init, in a container, reaps orphans a second or
// two late; gpulayer's stop, too, counts a zombie as ended).
const pdshStop = `p=$(cat "$HOME/.pdsh-bench/pid") && kill -s TERM -- "-$p" 2>/dev/null; i=0; ` +
	`while IFS= read -r s </proc/$p/stat 2>/dev/null; do case ${s##*) } in Z* | X*) break ;; esac; ` +
	`[ $i -lt 1000 ] || exit 1; sleep 0.01; i=$((i + 1)); done`

func (p pdshClient) run(what string) (float64, string, error) {
	names := make([]string, len(p.machines))
	for i, m := range p.machines {
		names[i] = m.Name
	}
	script := pdshStart
	if what == "stop" {
		script = pdshStop
	}
	cmd := exec.Command(p.bin, "-R", "ssh", "-f", strconv.Itoa(p.par), "-w", strings.Join(names, ","), "sh -c "+ssh.Quote(script))
	cmd.Env = append(os.Environ(), "PDSH_SSH_ARGS=-F "+p.config+" -x -a %h", "PDSH_RCMD_TYPE=ssh")
	return runCommand(cmd)
}

// runCommand runs cmd to its end and returns its CPU time, with its
// children's, and its output.
func runCommand(cmd *exec.Cmd) (float64, string, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return 0, out.String(), fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args[:2], " "), err, tail(out.String()))
	}
	return (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds(), out.String(), nil
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

// awaitCount waits up to limit for want processes of the job, and says
// how many there were at the end.
func awaitCount(marker, sandboxDir string, want int, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	for {
		got := countProcesses(marker, sandboxDir)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// countProcesses counts the sleep processes of this computer whose
// environment holds marker and names a machine of the sandbox in
// sandboxDir (GPULAYER_SANDBOX_MACHINE, which the sandbox gives every
// command): one per node, and none of another sandbox's (only this user's
// are readable; the sandbox's machines run as this user).
func countProcesses(marker, sandboxDir string) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil || zombie(st) || !bytes.Contains(st, []byte("(sleep)")) {
			continue
		}
		mine, marked := false, false
		for _, kv := range bytes.Split(b, []byte{0}) {
			marked = marked || string(kv) == marker
			mine = mine || bytes.HasPrefix(kv, []byte("GPULAYER_SANDBOX_MACHINE="+sandboxDir+"/"))
		}
		if mine && marked {
			n++
		}
	}
	return n
}

func zombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}

func summarize(w io.Writer, rs []result, before bool) {
	type key struct{ what, client string }
	groups := map[key][]result{}
	byRound := map[string]map[int]map[string]float64{}
	for _, r := range rs {
		groups[key{r.What, r.Client}] = append(groups[key{r.What, r.Client}], r)
		if byRound[r.What] == nil {
			byRound[r.What] = map[int]map[string]float64{}
		}
		if byRound[r.What][r.Round] == nil {
			byRound[r.What][r.Round] = map[string]float64{}
		}
		byRound[r.What][r.Round][r.Client] = r.WallSeconds
	}
	// ratio is the median of the round-by-round ratios of a's wall time
	// to b's.
	ratio := func(what, a, b string) float64 {
		var ratios []float64
		for _, c := range byRound[what] {
			if c[b] > 0 && c[a] > 0 {
				ratios = append(ratios, c[a]/c[b])
			}
		}
		return stats.Median(ratios, func(v float64) float64 { return v })
	}
	wall := func(r result) float64 { return r.WallSeconds }
	cpu := func(r result) float64 { return r.CPUSeconds }
	sb := func(r result) float64 { return r.SandboxCPUSeconds }
	names := []string{"gpulayer"}
	if before {
		names = append(names, "gpulayer-before")
	}
	if len(groups[key{"start", "gpulayer-check"}]) > 0 {
		names = append(names, "gpulayer-check")
	}
	fmt.Fprintf(w, "\n# medians over %d rounds (cpu: the client's own + the sandbox's meanwhile; ratio: median of the rounds' ratios to pdsh)\n%-8s  %-16s  %-10s  %-10s  %-20s  %s\n",
		len(groups[key{"start", "gpulayer"}]), "what", "client", "wall", "ratio", "cpu", "load1")
	for _, what := range []string{"start", "stop"} {
		label := "apply"
		if what == "stop" {
			label = "destroy"
		}
		for _, name := range append(names, "pdsh") {
			g := groups[key{what, name}]
			r := "-"
			if name != "pdsh" {
				r = fmt.Sprintf("%.2fx", ratio(what, name, "pdsh"))
			}
			fmt.Fprintf(w, "%-8s  %-16s  %-10s  %-10s  %-20s  %.1f\n", label, name,
				fmt.Sprintf("%.3f s", stats.Median(g, wall)), r,
				fmt.Sprintf("%.2f + %.2f s", stats.Median(g, cpu), stats.Median(g, sb)),
				stats.Median(g, func(r result) float64 { return r.Load1 }))
		}
		if before {
			fmt.Fprintf(w, "%-8s  gpulayer / gpulayer-before: wall %.2fx (median of the rounds' ratios)\n", label, ratio(what, "gpulayer", "gpulayer-before"))
		}
	}
}

// Command probe benchmarks gpulayer's probe fan-out against sandbox fleets
// of several sizes and, in the same run, the OpenSSH client doing the same
// work as the reference: the same hosts, known_hosts, key, script and
// parallelism, one `ssh` process per host from a bounded worker pool; and,
// where it is installed (Debian's parallel-ssh), parallel-ssh running the
// same `ssh` with the same options, its output parsed the same way.
//
//	go run ./benchmarks/probe -sizes 10,100,500 -runs 5
//	go run ./benchmarks/probe -shell /bin/sh   # machines run real processes
//	go run ./benchmarks/probe -busy            # every machine runs a node
//
// The sandbox runs in its own process, and each measured fan-out in a fresh
// client process (so every run dials every host anew and its peak RSS is
// its own). Runs alternate between the clients. parallel-ssh sends every
// host one command, so with -busy (where each host is asked about its own
// node's pid) it is left out. With -busy, every
// machine first gets a node launched as apply launches one (a `sleep`
// holding GPU 0), and each probe asks about its pid as a plan's refresh
// does: the probe of a fleet with a job running. Each run also records the
// sandbox process's CPU time during it: the simulated machines' side. It
// prints one JSON line per run, then a summary of medians.
package main

import (
	"bufio"
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
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpulayer/gpulayer/benchmarks/internal/openssh"
	"github.com/gpulayer/gpulayer/benchmarks/internal/stats"
	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/providers/sandbox"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/launch"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/ssh"
)

func main() {
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "serve":
		err = serve(os.Args[2:])
	case len(os.Args) > 1 && os.Args[1] == "client":
		err = client(os.Args[2:])
	default:
		err = drive(os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchmark:", err)
		os.Exit(1)
	}
}

// result is one measured fan-out.
type result struct {
	Client      string  `json:"client"`  // "gpulayer", "openssh" or "pssh"
	Shell       string  `json:"shell"`   // the sandbox machines' shell: "in-process" or a path
	Busy        bool    `json:"busy"`    // every machine ran a launched node, which the probe asked about
	Command     string  `json:"command"` // "probe" (the facts script) or "true" (the fan-out alone)
	Hosts       int     `json:"hosts"`
	Parallelism int     `json:"parallelism"`
	Run         int     `json:"run"`
	WallSeconds float64 `json:"wall_s"`
	OK          int     `json:"ok"`
	MaxRSSMiB   float64 `json:"max_rss_mib"`   // the client process's peak resident memory
	CPUSeconds  float64 `json:"cpu_s"`         // user+system of the client and its children
	SandboxCPU  float64 `json:"sandbox_cpu_s"` // user+system of the sandbox process during the run (10 ms ticks)
	Load1       float64 `json:"load1"`         // the computer's 1-minute load average after the run
}

func drive(args []string) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	sizes := fs.String("sizes", "10,100,500", "fleet sizes, comma-separated")
	runs := fs.Int("runs", 5, "measured runs per client and size")
	par := fs.Int("parallelism", 64, "hosts probed at once, by both clients")
	floor := fs.Bool("floor", true, "also run `true` instead of the probe, to separate the fan-out from the work on the machines")
	shell := fs.String("shell", sandbox.InProcess, "how the sandbox machines run commands: in-process, or a POSIX shell's path such as /bin/sh (real processes)")
	sbProfile := fs.String("sandbox-cpuprofile", "", "write a CPU profile of the sandbox process to `FILE` (of the last size's sandbox)")
	busy := fs.Bool("busy", false, "launch a node (sleep, GPU 0) on every machine first, and probe as a refresh does, asking about its pid")
	withPSSH := fs.Bool("pssh", true, "also run parallel-ssh (not with -busy), where it is installed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	clients := []string{"gpulayer", "openssh"}
	if _, err := exec.LookPath("parallel-ssh"); *withPSSH && !*busy && err == nil {
		clients = append(clients, "pssh")
	} else if *withPSSH && !*busy {
		fmt.Fprintln(os.Stderr, "benchmark: parallel-ssh is not installed (Debian: apt-get install pssh); it is left out")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if _, err := exec.LookPath("ssh"); err != nil {
		return fmt.Errorf("the OpenSSH client (ssh) is needed as the reference: %w", err)
	}
	fmt.Printf("# %s %s/%s, %d CPUs, parallelism %d, sandbox shell %s, busy %v, clients %v\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), *par, *shell, *busy, clients)
	var all []result
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-sizes: bad size %q", s)
		}
		commands := []string{"probe"}
		if *floor {
			commands = append(commands, "true")
		}
		rs, err := benchSize(self, n, *runs, *par, clients, commands, *shell, *busy, *sbProfile)
		if err != nil {
			return fmt.Errorf("%d hosts: %w", n, err)
		}
		all = append(all, rs...)
	}
	summarize(os.Stdout, all)
	return nil
}

func benchSize(self string, n, runs, par int, clients, commands []string, shell string, busy bool, profile string) ([]result, error) {
	dir, err := os.MkdirTemp("", "gpulayer-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	srv := exec.Command(self, "serve", "-hosts", strconv.Itoa(n), "-dir", dir, "-shell", shell, "-cpuprofile", profile)
	srv.Stderr = os.Stderr
	stdout, err := srv.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, err
	}
	defer func() {
		_ = srv.Process.Signal(syscall.SIGTERM)
		_ = srv.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		return nil, fmt.Errorf("sandbox did not start: %q %v", line, err)
	}
	watchFile := ""
	if busy {
		watchFile = filepath.Join(dir, "bench-watch.json")
		if err := launchNodes(dir, watchFile, par); err != nil {
			return nil, err
		}
	}
	var out []result
	// One unmeasured warm-up each: page cache, first exec of ssh and sh.
	for run := 0; run <= runs; run++ {
		// Each run starts with the next client: every client goes first
		// as often as the others.
		order := append(clients[run%len(clients):len(clients):len(clients)], clients[:run%len(clients)]...)
		for _, command := range commands {
			for _, c := range order {
				before, err := stats.ProcessCPU(srv.Process.Pid)
				if err != nil {
					return nil, err
				}
				r, err := runClient(self, c, command, dir, watchFile, n, par)
				if err != nil {
					return nil, err
				}
				after, err := stats.ProcessCPU(srv.Process.Pid)
				if err != nil {
					return nil, err
				}
				r.SandboxCPU = (after - before).Seconds()
				if run == 0 {
					continue
				}
				r.Run = run
				r.Shell = shell
				r.Busy = busy
				r.Load1 = stats.Load1()
				if r.OK != n {
					return nil, fmt.Errorf("%s %s: %d of %d hosts answered", c, command, r.OK, n)
				}
				line, _ := json.Marshal(r)
				fmt.Println(string(line))
				out = append(out, r)
			}
		}
	}
	return out, nil
}

func runClient(self, impl, command, dir, watchFile string, n, par int) (result, error) {
	cmd := exec.Command(self, "client", "-impl", impl, "-command", command, "-dir", dir, "-watch", watchFile, "-parallelism", strconv.Itoa(par))
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return result{}, fmt.Errorf("%s client: %w", impl, err)
	}
	var r result
	if err := json.Unmarshal(b, &r); err != nil {
		return result{}, fmt.Errorf("%s client printed %q: %w", impl, b, err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.MaxRSSMiB = float64(ru.Maxrss) / 1024 // Linux reports KiB
	}
	r.CPUSeconds = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	r.Hosts = n
	return r, nil
}

// launchNodes starts one node on every machine of the sandbox in dir, as
// apply does (launch.Script over SSH: detached, its leader a subreaper,
// GPU 0 claimed and named in CUDA_VISIBLE_DEVICES), running `sleep` for
// longer than a benchmark lasts; the sandbox stops them when it closes. It
// writes to watchFile, by machine name, the process each probe asks about,
// as a plan's refresh asks about the processes state records.
func launchNodes(dir, watchFile string, par int) error {
	cfg, diags := config.Load(dir, config.LoadOptions{})
	if diags.HasErrors() {
		return fmt.Errorf("%s: %s", dir, diags.Error())
	}
	machines, err := probe.Machines(cfg)
	if err != nil {
		return err
	}
	pool := ssh.NewPool(ssh.Options{Parallelism: par})
	defer pool.Close()
	spec := state.JobSpec{Command: []string{"sleep", "36000"}, Launcher: "plain", Nodes: 1, GPUsPerNode: 1}
	var mu sync.Mutex
	watch := map[string][]probe.Watch{}
	var errs []error
	fanOut(machines, par, func(m probe.Machine) facts.Host {
		n := launch.Node{Job: "bench", RunID: "r1", Rank: 0, Spec: spec, GPUs: []int{0}, MasterAddr: "127.0.0.1", MasterPort: 29500}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := pool.Run(ctx, m.Target, launch.Command("launch", n.Job, n.RunID, "0"), strings.NewReader(launch.Script(n)))
		var started launch.Started
		if err == nil {
			started, err = launch.ParseStarted(res.Stdout)
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("launching on %s: %w", m.Name, err))
		} else {
			watch[m.Name] = []probe.Watch{{PID: started.PID, Node: "bench/r1/node-0"}}
		}
		return facts.Host{}
	})
	if len(errs) > 0 {
		return errs[0]
	}
	b, err := json.Marshal(watch)
	if err != nil {
		return err
	}
	return os.WriteFile(watchFile, b, 0o644)
}

// serve runs a sandbox until SIGTERM.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	hosts := fs.Int("hosts", 10, "machines")
	dir := fs.String("dir", "", "sandbox directory")
	shell := fs.String("shell", sandbox.InProcess, "the machines' shell")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the sandbox, until SIGTERM, to `FILE`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	sandbox.TuneGC()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sb, err := sandbox.Start(sandbox.Options{Hosts: *hosts, Dir: *dir, Shell: *shell})
	if err != nil {
		return err
	}
	defer sb.Close()
	fmt.Println("ready")
	<-ctx.Done()
	return nil
}

// startCPUProfile writes a CPU profile to path until the returned function
// is called; with path "" it does nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// writeAllocProfile writes what the process allocated so far to path.
func writeAllocProfile(path string) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// client probes every host of the sandbox in dir once and prints a result.
func client(args []string) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	impl := fs.String("impl", "gpulayer", "gpulayer or openssh")
	dir := fs.String("dir", "", "sandbox directory")
	par := fs.Int("parallelism", 64, "hosts at once")
	command := fs.String("command", "probe", "probe or true")
	watchFile := fs.String("watch", "", "a JSON file of the processes to ask each machine about (launchNodes writes it), by machine name")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the fan-out to `FILE`")
	memProfile := fs.String("memprofile", "", "write a profile of what the client allocated, at its end, to `FILE`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	if *memProfile != "" {
		runtime.MemProfileRate = 64 << 10 // finer than the default, for a short run
		defer writeAllocProfile(*memProfile)
	}
	if *command != "probe" && *command != "true" {
		return fmt.Errorf("-command: want probe or true, got %q", *command)
	}
	cfg, diags := config.Load(*dir, config.LoadOptions{})
	if diags.HasErrors() {
		return fmt.Errorf("%s: %s", *dir, diags.Error())
	}
	machines, err := probe.Machines(cfg)
	if err != nil {
		return err
	}
	if *watchFile != "" {
		b, err := os.ReadFile(*watchFile)
		if err != nil {
			return err
		}
		var watch map[string][]probe.Watch
		if err := json.Unmarshal(b, &watch); err != nil {
			return fmt.Errorf("%s: %w", *watchFile, err)
		}
		for i := range machines {
			machines[i].Watch = watch[machines[i].Name]
		}
	}
	var hosts []facts.Host
	start := time.Now()
	switch {
	case *impl == "gpulayer" && *command == "probe":
		pool := ssh.NewPool(ssh.Options{Parallelism: *par})
		doc := probe.Fleet(context.Background(), pool, machines, probe.Options{Parallelism: *par})
		hosts = doc.Hosts
		_ = pool.Close()
	case *impl == "gpulayer":
		pool := ssh.NewPool(ssh.Options{Parallelism: *par})
		hosts = fanOut(machines, *par, func(m probe.Machine) facts.Host {
			res, err := pool.Run(context.Background(), m.Target, "true", nil)
			return trueHost(m, err == nil && res.ExitCode == 0, err)
		})
		_ = pool.Close()
	case *impl == "openssh":
		hosts = fanOut(machines, *par, func(m probe.Machine) facts.Host { return opensshHost(m, *command) })
	case *impl == "pssh":
		hosts, err = psshHosts(machines, *command, *par)
		if err != nil {
			return err
		}
	default:
		return fmt.Errorf("-impl: want gpulayer, openssh or pssh, got %q", *impl)
	}
	wall := time.Since(start)
	r := result{Client: *impl, Command: *command, Parallelism: *par, WallSeconds: wall.Seconds()}
	for _, h := range hosts {
		if h.Status == facts.StatusOK && (*command == "true" || len(h.GPUs) > 0) {
			r.OK++
		} else {
			fmt.Fprintf(os.Stderr, "%s: %s: %s %s %v\n", *impl, h.Name, h.Status, h.Error, h.Warnings)
		}
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

func trueHost(m probe.Machine, ok bool, err error) facts.Host {
	h := facts.Host{Name: m.Name, Status: facts.StatusOK}
	if !ok {
		h.Status = facts.StatusFailed
		h.Error = fmt.Sprint(err)
	}
	return h
}

// fanOut runs one per host, par at a time: the bounded worker pool both
// clients share.
func fanOut(machines []probe.Machine, par int, one func(probe.Machine) facts.Host) []facts.Host {
	out := make([]facts.Host, len(machines))
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(par, len(machines)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				out[i] = one(machines[i])
			}
		}()
	}
	for i := range machines {
		work <- i
	}
	close(work)
	wg.Wait()
	return out
}

// opensshHost runs the command with one `ssh` process, with the options a
// careful script would use, and parses the probe's output exactly as
// gpulayer does.
func opensshHost(m probe.Machine, command string) facts.Host {
	t := m.Target
	nonce := facts.NewNonce()
	args := append(openssh.Options(t), "-p", strconv.Itoa(t.Port), "-l", t.User)
	if command == "true" {
		args = append(args, t.Address, "true")
		err := exec.Command("ssh", args...).Run()
		return trueHost(m, err == nil, err)
	}
	args = append(args, t.Address, probe.Command(nonce, m.Watch))
	cmd := exec.Command("ssh", args...)
	cmd.Stdin = strings.NewReader(facts.Script())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	h := facts.Parse(b, nonce)
	if err != nil {
		h.Status = facts.StatusFailed
		h.Error = fmt.Sprintf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	h.Name = m.Name
	return h
}

// psshHosts runs the command on every machine with one parallel-ssh
// process, par hosts at a time, each host's output in a file of its own,
// and parses each host's output as gpulayer does. Every host gets the same
// command (one nonce), so no host is asked about processes.
func psshHosts(machines []probe.Machine, command string, par int) ([]facts.Host, error) {
	if len(machines) == 0 {
		return nil, nil
	}
	dir, err := os.MkdirTemp("", "gpulayer-bench-pssh-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var hostsFile strings.Builder
	for _, m := range machines {
		fmt.Fprintf(&hostsFile, "%s:%d\n", m.Target.Address, m.Target.Port)
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(hostsFile.String()), 0o600); err != nil {
		return nil, err
	}
	t := machines[0].Target
	nonce := facts.NewNonce()
	args := []string{"-h", filepath.Join(dir, "hosts"), "-l", t.User, "-p", strconv.Itoa(par), "-t", "120",
		"-o", filepath.Join(dir, "out"), "-e", filepath.Join(dir, "err")}
	for _, a := range openssh.Options(t) {
		args = append(args, "-X", a)
	}
	remote := "true"
	var stdin io.Reader
	if command == "probe" {
		args = append(args, "-I")
		remote = probe.Command(nonce, nil)
		stdin = strings.NewReader(facts.Script())
	}
	cmd := exec.Command("parallel-ssh", append(args, remote)...)
	cmd.Stdin = stdin
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	// Its status is 0 only if every host's was; each host's is judged
	// below from its output.
	_ = cmd.Run()
	hosts := make([]facts.Host, len(machines))
	for i, m := range machines {
		name := fmt.Sprintf("%s:%d", m.Target.Address, m.Target.Port)
		// parallel-ssh writes a host's file only once it printed something.
		b, err := os.ReadFile(filepath.Join(dir, "out", name))
		switch {
		case command == "true":
			hosts[i] = trueHost(m, strings.Contains(out.String(), "[SUCCESS] "+name+"\n"), fmt.Errorf("failed: %s", out.String()))
		case err != nil:
			hosts[i] = trueHost(m, false, fmt.Errorf("no output: %v; parallel-ssh said: %s", err, strings.TrimSpace(out.String())))
		default:
			hosts[i] = facts.Parse(b, nonce)
			hosts[i].Name = m.Name
		}
	}
	return hosts, nil
}

func summarize(w io.Writer, rs []result) {
	type key struct {
		client, command string
		hosts           int
	}
	groups := map[key][]result{}
	var sizes []int
	seen := map[int]bool{}
	for _, r := range rs {
		k := key{r.Client, r.Command, r.Hosts}
		groups[k] = append(groups[k], r)
		if !seen[r.Hosts] {
			seen[r.Hosts] = true
			sizes = append(sizes, r.Hosts)
		}
	}
	sort.Ints(sizes)
	fmt.Fprintf(w, "\n# medians\n%-6s  %-8s  %-14s  %-14s  %-9s  %-14s  %-9s  %-16s  %-16s  %-16s  %-16s  %s\n", "hosts", "command", "gpulayer wall", "openssh wall", "ratio", "pssh wall", "ratio", "gpulayer max RSS", "gpulayer CPU", "openssh CPU", "sandbox CPU (g)", "load1")
	for _, n := range sizes {
		for _, command := range []string{"probe", "true"} {
			g, o, p := groups[key{"gpulayer", command, n}], groups[key{"openssh", command, n}], groups[key{"pssh", command, n}]
			if len(g) == 0 {
				continue
			}
			wall := func(r result) float64 { return r.WallSeconds }
			gw, ow := stats.Median(g, wall), stats.Median(o, wall)
			pw, pratio := "-", "-"
			if len(p) > 0 {
				pw = fmt.Sprintf("%.3f s", stats.Median(p, wall))
				pratio = fmt.Sprintf("%.2fx", gw/stats.Median(p, wall))
			}
			all := append(append(g[:len(g):len(g)], o...), p...)
			fmt.Fprintf(w, "%-6d  %-8s  %-14s  %-14s  %-9s  %-14s  %-9s  %-16s  %-16s  %-16s  %-16s  %.1f\n", n, command,
				fmt.Sprintf("%.3f s", gw), fmt.Sprintf("%.3f s", ow), fmt.Sprintf("%.2fx", gw/ow), pw, pratio,
				fmt.Sprintf("%.1f MiB", stats.Median(g, func(r result) float64 { return r.MaxRSSMiB })),
				fmt.Sprintf("%.2f s", stats.Median(g, func(r result) float64 { return r.CPUSeconds })),
				fmt.Sprintf("%.2f s", stats.Median(o, func(r result) float64 { return r.CPUSeconds })),
				fmt.Sprintf("%.2f s", stats.Median(g, func(r result) float64 { return r.SandboxCPU })),
				stats.Median(all, func(r result) float64 { return r.Load1 }))
		}
	}
}

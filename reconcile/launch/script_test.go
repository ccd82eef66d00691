package launch

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/reconcile/state"
)

// shell is a POSIX shell machines may have as sh: bin is a directory
// whose "sh" is that shell, put first on PATH, so that the script and
// every sh it starts (the node's leader) are that shell.
type shell struct {
	name string
	bin  string
}

// shells are the shells of machines that exist here: dash (Debian's and
// Ubuntu's /bin/sh), bash, busybox sh (Alpine, minimal images), and this
// machine's own /bin/sh. Under CI dash, bash and busybox must all exist
// (.ci/run installs them).
func shells(t *testing.T) []shell {
	t.Helper()
	var out []shell
	for _, c := range []struct{ name, prog string }{{"sh", "/bin/sh"}, {"dash", "dash"}, {"bash", "bash"}, {"busybox", "busybox"}} {
		path, err := exec.LookPath(c.prog)
		if err != nil {
			if os.Getenv("CI") != "" && c.name != "sh" {
				t.Fatalf("%s is not installed; .ci/run installs it", c.prog)
			}
			continue
		}
		bin := t.TempDir()
		if err := os.Symlink(path, filepath.Join(bin, "sh")); err != nil {
			t.Fatal(err)
		}
		out = append(out, shell{name: c.name, bin: bin})
	}
	return out
}

// eachShell runs f once per shell, as a subtest named after it.
func eachShell(t *testing.T, f func(t *testing.T, sh shell)) {
	for _, sh := range shells(t) {
		t.Run(sh.name, func(t *testing.T) { f(t, sh) })
	}
}

// runScript runs a script as a machine would, `sh -s` with the script on
// standard input, in a home of its own, under this machine's /bin/sh.
func runScript(t *testing.T, home, script string) []byte {
	t.Helper()
	return runScriptIn(t, shell{name: "sh"}, home, script)
}

// runScriptIn runs a script under sh.
func runScriptIn(t *testing.T, sh shell, home, script string) []byte {
	t.Helper()
	path := os.Getenv("PATH")
	prog := "sh"
	if sh.bin != "" {
		path = sh.bin + string(os.PathListSeparator) + path
		prog = filepath.Join(sh.bin, "sh")
	}
	return runScriptWith(t, prog, path, home, script)
}

// runScriptWith runs a script as `prog -s`, with PATH path.
func runScriptWith(t *testing.T, prog, path, home, script string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, "-s")
	cmd.Stdin = strings.NewReader(script)
	cmd.Env = []string{"HOME=" + home, "PATH=" + path}
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil && ctx.Err() != nil {
		t.Fatalf("script did not finish: %v\n%s", err, out)
	}
	return out
}

func node(command ...string) Node {
	return Node{
		Job: "train", RunID: "r0123456789abcdef", Rank: 1,
		Spec: state.JobSpec{
			Command: command, Launcher: "plain", Nodes: 2, GPUsPerNode: 2,
			Env: map[string]string{"NCCL_DEBUG": "INFO", "NODE_RANK": "99"},
		},
		GPUs: []int{2, 3}, GPUUUIDs: []string{"GPU-aaa", "GPU-bbb"},
		MasterAddr: "10.0.0.1", MasterPort: 29500,
	}
}

// environOf reads a live process's environment.
func environOf(t *testing.T, pid int) map[string]string {
	t.Helper()
	var raw []byte
	for range 50 { // a process in mid-exec shows an empty environment
		raw, _ = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if len(raw) > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	env := map[string]string{}
	for kv := range bytes.SplitSeq(raw, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			env[k] = v
		}
	}
	return env
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	s = s[strings.LastIndex(s, ")")+2:]
	return !strings.HasPrefix(s, "Z")
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 200 {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestLaunchStartsDetachedWithTheNodesEnvironment(t *testing.T) {
	eachShell(t, func(t *testing.T, sh shell) {
		home := t.TempDir()
		// Every kind of value a shell could misread, in arguments and env.
		hostile := []string{`it's`, `$(touch pwned)`, "`touch pwned`", "two\nlines", "ünïcødé ✓", `"quoted"`, `a;b|c&d`, `*`}
		n := node(append([]string{"sh", "-c", `printf '%s\n' "$@" > args.txt; env > env.txt; exec sleep 30`, "sh"}, hostile...)...)
		n.Spec.Env["HOSTILE"] = `$(touch pwned) 'x' "y"` + "\n`z`"
		n.Spec.Env["NCCL_ASYNC_ERROR_HANDLING"] = "0" // the job's value wins over the default
		n.Spec.Workdir = home
		out := runScriptIn(t, sh, home, Script(n))
		started, err := ParseStarted(out)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		defer syscall.Kill(-started.PID, syscall.SIGKILL)
		if started.MasterPort != 29500 || started.StartTime == 0 {
			t.Errorf("started %+v", started)
		}
		waitFor(t, "args.txt", func() bool {
			b, _ := os.ReadFile(filepath.Join(home, "env.txt"))
			return len(b) > 0
		})
		args, _ := os.ReadFile(filepath.Join(home, "args.txt"))
		if got := strings.Split(strings.TrimSuffix(string(args), "\n"), "\n"); !slices.Equal(got, []string{`it's`, `$(touch pwned)`, "`touch pwned`", "two", "lines", "ünïcødé ✓", `"quoted"`, `a;b|c&d`, `*`}) {
			t.Errorf("arguments arrived as %q", got)
		}
		if _, err := os.Stat(filepath.Join(home, "pwned")); err == nil {
			t.Error("a value was run as a command")
		}
		// The leader is a session and group leader, detached from the caller.
		pgid, _ := syscall.Getpgid(started.PID)
		sid, _, _ := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(started.PID), 0, 0)
		if pgid != started.PID || int(sid) != started.PID {
			t.Errorf("pid %d: pgid %d, sid %d; want both the pid", started.PID, pgid, sid)
		}
		var child int
		waitFor(t, "the command", func() bool {
			child = childOf(started.PID)
			return child > 0 && environOf(t, child)["GPULAYER_RUN_ID"] != ""
		})
		env := environOf(t, child)
		want := map[string]string{
			"GPULAYER_JOB": "train", "GPULAYER_RUN_ID": "r0123456789abcdef", "NODE_RANK": "1", "NNODES": "2",
			"NPROC_PER_NODE": "2", "WORLD_SIZE": "4", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500",
			"CUDA_VISIBLE_DEVICES": "GPU-aaa,GPU-bbb", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "NCCL_DEBUG": "INFO",
			"HOSTILE": n.Spec.Env["HOSTILE"], "GPULAYER_NODE_ID": "r0123456789abcdef/1",
			"PYTHONUNBUFFERED": "1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "NCCL_ASYNC_ERROR_HANDLING": "0",
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("%s=%q, want %q", k, env[k], v)
			}
		}
		if _, err := os.Stat(filepath.Join(home, LogPath("train", "r0123456789abcdef", 1))); err != nil {
			t.Errorf("no log: %v", err)
		}
	})
}

// TestAJobsPerlSwitchesDoNotReachTheLeader: a job whose environment sets
// PERL5OPT (here a module the machine lacks, which makes any perl die at
// start) still starts, its leader a session leader, and its command sees
// PERL5OPT exactly as the job set it and none of gpulayer's own
// variables for it; a job without it gets none.
func TestAJobsPerlSwitchesDoNotReachTheLeader(t *testing.T) {
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("perl is not installed: the leader starts through python3 or sh")
	}
	eachShell(t, func(t *testing.T, sh shell) {
		for _, opt := range []string{"-Mno::such::module -w", "", "unset"} {
			home := t.TempDir()
			n := node("sh", "-c", `env > env.txt; exec sleep 30`)
			if opt != "unset" {
				n.Spec.Env["PERL5OPT"] = opt
			}
			n.Spec.Workdir = home
			out := runScriptIn(t, sh, home, Script(n))
			started, err := ParseStarted(out)
			if err != nil {
				t.Fatalf("PERL5OPT %q: %v\n%s", opt, err, out)
			}
			defer syscall.Kill(-started.PID, syscall.SIGKILL)
			if sid, _, _ := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(started.PID), 0, 0); int(sid) != started.PID {
				t.Errorf("PERL5OPT %q: the leader %d is in session %d, not its own", opt, started.PID, sid)
			}
			var env map[string]string
			waitFor(t, "env.txt", func() bool {
				b, _ := os.ReadFile(filepath.Join(home, "env.txt"))
				if !bytes.HasSuffix(b, []byte("\n")) {
					return false
				}
				env = map[string]string{}
				for l := range strings.SplitSeq(string(b), "\n") {
					if k, v, ok := strings.Cut(l, "="); ok {
						env[k] = v
					}
				}
				return env["GPULAYER_NODE_ID"] != ""
			})
			got, set := env["PERL5OPT"]
			if opt == "unset" && set || opt != "unset" && got != opt {
				t.Errorf("PERL5OPT %q: the command got %q (set %v)", opt, got, set)
			}
			if v, ok := env["GPULAYER_PERL5OPT"]; ok {
				t.Errorf("PERL5OPT %q: the command got GPULAYER_PERL5OPT=%q", opt, v)
			}
		}
	})
}

// childOf is a child of pid, or 0.
func childOf(pid int) int {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	c, _ := strconv.Atoi(f[0])
	return c
}

// TestALaunchThatReportsAtOnceHasItsGroup: with a start check of 0 the
// launch reports as soon as the leader runs, and the leader then already
// leads its session and group (perl starts them a few milliseconds into
// its start), so a stop right after the launch reaches the group.
func TestALaunchThatReportsAtOnceHasItsGroup(t *testing.T) {
	eachShell(t, func(t *testing.T, sh shell) {
		home := t.TempDir()
		n := node("sleep", "30")
		n.Spec.Workdir = home
		// A perl slow to start (the job's environment reaches it: modules
		// loaded before its script runs) widens the moment before setsid.
		n.Spec.Env["PERL5OPT"] = "-MPOSIX -MData::Dumper -MStorable"
		started, err := ParseStarted(runScriptIn(t, sh, home, Script(n)))
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Kill(-started.PID, syscall.SIGKILL)
		pgid, _ := syscall.Getpgid(started.PID)
		sid, _, _ := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(started.PID), 0, 0)
		if pgid != started.PID || int(sid) != started.PID {
			t.Errorf("as the launch ended, pid %d: pgid %d, sid %d; want both the pid", started.PID, pgid, sid)
		}
	})
}

func TestLaunchRefusesWhatCannotStart(t *testing.T) {
	eachShell(t, func(t *testing.T, sh shell) {
		home := t.TempDir()
		cases := []struct {
			name string
			n    func() Node
			kind string
		}{
			{"missing workdir", func() Node { n := node("sleep", "1"); n.Spec.Workdir = "/nonexistent/dir"; return n }, "workdir"},
			{"command not found", func() Node { return node("no-such-program-gpulayer", "x") }, "command_not_found"},
			{"torchrun missing", func() Node {
				n := node("python", "train.py")
				n.Spec.Launcher = "torchrun"
				return n
			}, ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				n := c.n()
				if c.kind == "" {
					if _, err := exec.LookPath("torchrun"); err == nil {
						t.Skip("torchrun is installed here")
					}
					c.kind = "command_not_found"
				}
				out := runScriptIn(t, sh, home, Script(n))
				_, err := ParseStarted(out)
				le, ok := err.(*LaunchError)
				if !ok || le.Kind != c.kind {
					t.Fatalf("error %v (%T), want kind %s\n%s", err, err, c.kind, out)
				}
			})
		}
	})
}

func TestLaunchRecordsTheExitStatus(t *testing.T) {
	eachShell(t, func(t *testing.T, sh shell) {
		home := t.TempDir()
		n := node("sh", "-c", "echo bye; exit 7")
		started, err := ParseStarted(runScriptIn(t, sh, home, Script(n)))
		if err != nil {
			t.Fatal(err)
		}
		exitFile := filepath.Join(home, ExitPath(n.Job, n.RunID, n.Rank))
		waitFor(t, "the exit file", func() bool {
			b, _ := os.ReadFile(exitFile)
			return strings.TrimSpace(string(b)) == "7"
		})
		log, _ := os.ReadFile(filepath.Join(home, LogPath(n.Job, n.RunID, n.Rank)))
		if string(log) != "bye\n" {
			t.Errorf("log %q", log)
		}
		waitFor(t, "the leader to end", func() bool { return !alive(started.PID) })
	})
}

func TestLaunchPicksAFreePortOnNodeZero(t *testing.T) {
	eachShell(t, func(t *testing.T, sh shell) {
		home := t.TempDir()
		n := node("sleep", "30")
		n.Rank, n.PickPort, n.MasterPort = 0, true, DefaultPort("train")
		// Something already listens on the first candidate.
		l, err := listenTCP(n.MasterPort)
		if err != nil {
			t.Skipf("port %d: %v", n.MasterPort, err)
		}
		defer l.Close()
		started, err := ParseStarted(runScriptIn(t, sh, home, Script(n)))
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Kill(-started.PID, syscall.SIGKILL)
		if started.MasterPort != n.MasterPort+1 {
			t.Errorf("picked port %d, want %d (the first is taken)", started.MasterPort, n.MasterPort+1)
		}
	})
}

// TestPickPortWithAndWithoutGrep runs node 0's port pick where the
// machine has grep (which picks the listening lines out of the socket
// tables) and where it has none (the shell reads the tables whole): both
// pass over a port something listens on.
func TestPickPortWithAndWithoutGrep(t *testing.T) {
	first := DefaultPort("pickport")
	l, err := listenTCP(first)
	if err != nil {
		t.Skipf("port %d: %v", first, err)
	}
	defer l.Close()
	script := "gpulayer_fail() { echo \"fail $1\"; exit 1; }\n" + pickPortScript(first) + "echo \"port $gpulayer_port\"\n"
	eachShell(t, func(t *testing.T, sh shell) {
		for _, grep := range []bool{true, false} {
			if sh.bin == "" {
				t.Skip("no directory of its own for this shell")
			}
			path := sh.bin // the shell alone: no grep
			if grep {
				path += string(os.PathListSeparator) + os.Getenv("PATH")
			}
			cmd := exec.Command(filepath.Join(sh.bin, "sh"), "-s")
			cmd.Stdin = strings.NewReader(script)
			cmd.Env = []string{"PATH=" + path}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("grep %v: %v\n%s", grep, err, out)
			}
			if want := "port " + strconv.Itoa(first+1) + "\n"; string(out) != want {
				t.Errorf("grep %v: printed %q, want %q (port %d is taken)", grep, out, want, first)
			}
		}
	})
}

func TestStopEndsTheGroupAndProcessesThatLeftIt(t *testing.T) {
	eachShell(t, func(t *testing.T, sh shell) {
		home := t.TempDir()
		// A torchrun-like launcher: its worker starts a session of its own,
		// and ignores SIGTERM, as a stuck worker would.
		n := node("sh", "-c", `setsid sh -c 'trap "" TERM; : >worker-ready; while :; do sleep 1; done' </dev/null >/dev/null 2>&1 & exec sleep 300`)
		n.Spec.Workdir = home
		started, err := ParseStarted(runScriptIn(t, sh, home, Script(n)))
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Kill(-started.PID, syscall.SIGKILL)
		marker := "GPULAYER_RUN_ID=" + n.RunID
		var members []int
		// The worker is ready once it ignores SIGTERM (a stop before that
		// would end it without needing SIGKILL).
		waitFor(t, "the worker to ignore SIGTERM", func() bool {
			_, err := os.Stat(filepath.Join(home, "worker-ready"))
			return err == nil
		})
		waitFor(t, "the worker in its own session", func() bool {
			members = withMarker(marker)
			for _, p := range members {
				if sid, _, _ := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(p), 0, 0); int(sid) == p && p != started.PID {
					return true
				}
			}
			return false
		})
		out := runScriptIn(t, sh, home, StopScript(Stop{PID: started.PID, StartTime: started.StartTime, RunID: n.RunID, Grace: 500 * time.Millisecond}))
		stopped, err := ParseStopped(out)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if stopped.Left != 0 || stopped.Killed == 0 {
			t.Errorf("stopped %+v: want the TERM-ignoring worker killed and nothing left", stopped)
		}
		waitFor(t, "every process of the run to end", func() bool { return len(withMarker(marker)) == 0 })
		for _, p := range members {
			if alive(p) {
				t.Errorf("pid %d of the run still runs", p)
			}
		}
	})
}

func TestStopLeavesAReusedPidAlone(t *testing.T) {
	eachShell(t, func(t *testing.T, sh shell) {
		home := t.TempDir()
		// An unrelated process in a group of its own, whose pid state says
		// was the job's leader, started at another time.
		other := exec.Command("sleep", "30")
		other.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := other.Start(); err != nil {
			t.Fatal(err)
		}
		defer other.Process.Kill()
		out := runScriptIn(t, sh, home, StopScript(Stop{PID: other.Process.Pid, StartTime: 1, RunID: "r-none", Grace: 0}))
		if _, err := ParseStopped(out); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		time.Sleep(100 * time.Millisecond)
		if !alive(other.Process.Pid) {
			t.Error("stop killed a process that only reuses the recorded pid")
		}
	})
}

// withMarker lists live processes whose environment holds marker.
func withMarker(marker string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !alive(pid) {
			continue
		}
		env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		for kv := range bytes.SplitSeq(env, []byte{0}) {
			if string(kv) == marker {
				out = append(out, pid)
			}
		}
	}
	return out
}

// TestArgvWrapsTorchrun pins torchrun's command line: the underscore
// spellings torch 1.x takes (it refuses --nproc-per-node), no restarts,
// the job's torchrun args after gpulayer's options and before the script,
// and --no_python before the job's args (a "--" among them ends
// torchrun's options).
func TestArgvWrapsTorchrun(t *testing.T) {
	n := node("python", "train.py", "--epochs", "3")
	n.Spec.Launcher = "torchrun"
	n.Spec.TorchrunArgs = []string{"--redirects", "1", "--tee", "1"}
	want := []string{"torchrun", "--nnodes", "2", "--nproc_per_node", "2", "--node_rank", "1",
		"--master_addr", "10.0.0.1", "--master_port", "29500", "--max_restarts", "0",
		"--redirects", "1", "--tee", "1", "train.py", "--epochs", "3"}
	if got := Argv(n); !slices.Equal(got, want) {
		t.Errorf("argv %q, want %q", got, want)
	}
	n.Spec.Command = []string{"./run.sh", "x"}
	want = append(append(slices.Clone(want[:13]), "--no_python", "--redirects", "1", "--tee", "1"), "./run.sh", "x")
	if got := Argv(n); !slices.Equal(got, want) {
		t.Errorf("argv %q, want %q: a non-python program needs --no_python", got, want)
	}
	n.Spec.Launcher, n.Spec.Command = "plain", []string{"python", "train.py"}
	if got := Argv(n); !slices.Equal(got, []string{"python", "train.py"}) {
		t.Errorf("plain argv %q: the torchrun args of a plain job are not used", got)
	}
}

// TestTorchrunGetsThePortNodeZeroPicked: on node 0 of a job without
// master_port, torchrun's --master_port is the port the script picked
// (the first is taken here), and an argument of the command that happens
// to follow its own "--master_port" is passed as written.
func TestTorchrunGetsThePortNodeZeroPicked(t *testing.T) {
	eachShell(t, func(t *testing.T, sh shell) {
		home, bin := t.TempDir(), t.TempDir()
		// A torchrun that records its arguments.
		fake := "#!/bin/sh\nprintf '%s\\n' \"$@\" >\"$HOME/torchrun-args\"\n"
		if err := os.WriteFile(filepath.Join(bin, "torchrun"), []byte(fake), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		n := node("python", "train.py", "--master_port", "1")
		n.Spec.Launcher = "torchrun"
		n.Rank, n.PickPort, n.MasterPort = 0, true, DefaultPort("train")
		l, err := listenTCP(n.MasterPort)
		if err != nil {
			t.Skipf("port %d: %v", n.MasterPort, err)
		}
		defer l.Close()
		out := runScriptIn(t, sh, home, Script(n))
		started, err := ParseStarted(out)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		defer syscall.Kill(-started.PID, syscall.SIGKILL)
		var args []string
		waitFor(t, "torchrun's arguments", func() bool {
			b, _ := os.ReadFile(filepath.Join(home, "torchrun-args"))
			args = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			return len(args) > 2
		})
		want := []string{"--nnodes", "2", "--nproc_per_node", "2", "--node_rank", "0", "--master_addr", "10.0.0.1",
			"--master_port", strconv.Itoa(n.MasterPort + 1), "--max_restarts", "0", "train.py", "--master_port", "1"}
		if !slices.Equal(args, want) || started.MasterPort != n.MasterPort+1 {
			t.Errorf("torchrun got %q (port %d reported), want %q", args, started.MasterPort, want)
		}
	})
}

// TestEnvAndArgvOfACPUOnlyNode: a node of a job with gpus_per_node = 0
// gets CUDA_VISIBLE_DEVICES set and empty (so no GPU of the machine is
// visible, whatever the login's environment says) and counts one process
// per node, for the plain launcher and for torchrun.
func TestEnvAndArgvOfACPUOnlyNode(t *testing.T) {
	n := node("python", "prep.py")
	n.Spec.GPUsPerNode, n.GPUs, n.GPUUUIDs = 0, []int{}, nil
	env := map[string]string{}
	for _, v := range Env(n) {
		env[v.Name] = v.Value
	}
	for k, want := range map[string]string{"WORLD_SIZE": "2", "NNODES": "2", "NPROC_PER_NODE": "1"} {
		if env[k] != want {
			t.Errorf("%s=%q, want %q", k, env[k], want)
		}
	}
	if v, ok := env["CUDA_VISIBLE_DEVICES"]; !ok || v != "" {
		t.Errorf("CUDA_VISIBLE_DEVICES=%q (set: %v), want set and empty", v, ok)
	}
	n.Spec.Launcher = "torchrun"
	if got := Argv(n); !slices.Equal(got[:5], []string{"torchrun", "--nnodes", "2", "--nproc_per_node", "1"}) {
		t.Errorf("argv %q, want one process per node", got)
	}
}

// hiddenWorker is a command line whose process scrubs gpulayer's
// variables from its environment (as env -u, or setproctitle rewriting
// the environment block, would) and ignores SIGTERM, as a stuck worker
// does; it touches ready once it runs.
const hiddenWorker = `env -u GPULAYER_RUN_ID -u GPULAYER_NODE_ID sh -c 'trap "" TERM; : >hidden-ready; while :; do sleep 1; done'`

// unmarked lists live processes of this test's home whose environment
// lacks GPULAYER_RUN_ID but carries HOME=home: the hidden worker.
func unmarked(home string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !alive(pid) {
			continue
		}
		env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		if bytes.Contains(env, []byte("HOME="+home+"\x00")) && !bytes.Contains(env, []byte("GPULAYER_RUN_ID=")) {
			out = append(out, pid)
		}
	}
	return out
}

func waitReady(t *testing.T, home string) {
	t.Helper()
	waitFor(t, "the hidden worker", func() bool {
		_, err := os.Stat(filepath.Join(home, "hidden-ready"))
		return err == nil && len(unmarked(home)) > 0
	})
}

// leaderKilledByHand launches a node whose command leaves a hidden worker
// (no run id, ignoring SIGTERM) in its group, then kills the node's
// leader with SIGKILL and waits until it is reaped: the group is left
// with the worker alone. It returns the node's home, node, launch and
// hidden worker.
func leaderKilledByHand(t *testing.T, sh shell) (string, Node, Started, []int) {
	t.Helper()
	home := t.TempDir()
	n := node("sh", "-c", hiddenWorker+" & exec sleep 300")
	n.Spec.Workdir = home
	started, err := ParseStarted(runScriptIn(t, sh, home, Script(n)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-started.PID, syscall.SIGKILL) })
	waitReady(t, home)
	hidden := unmarked(home)
	syscall.Kill(started.PID, syscall.SIGKILL)
	waitFor(t, "the leader to be reaped", func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(started.PID))
		return err != nil
	})
	return home, n, started, hidden
}

// TestStopSignalsTheGroupOfALeaderKilledByHand: the node's leader was
// killed (SIGKILL, the OOM killer); its group still holds a worker that
// carries no run id. The stop finds the group by its id, in the spelling
// each shell accepts (dash refuses `kill -0 -- -PGID`), and ends it.
func TestStopSignalsTheGroupOfALeaderKilledByHand(t *testing.T) {
	eachShell(t, func(t *testing.T, sh shell) {
		home, n, started, hidden := leaderKilledByHand(t, sh)
		out := runScriptIn(t, sh, home, StopScript(Stop{PID: started.PID, StartTime: started.StartTime, RunID: n.RunID, Ranks: []int{n.Rank}, Grace: 300 * time.Millisecond}))
		if _, err := ParseStopped(out); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		waitFor(t, "the group's hidden worker to end", func() bool {
			for _, p := range hidden {
				if alive(p) {
					return false
				}
			}
			return true
		})
	})
}

// TestTheSweepListsTheGroupsOfStopsWithoutIt: a stop without the sweep
// (a machine sharing its kernel with others) sends its node's group
// SIGTERM but does not list the group's members; the sweeping stop, given
// the group, lists them and ends a member that ignores SIGTERM and left
// the leader's tree (its leader was killed by hand) with no gpulayer
// variable. A group whose recorded leader is another process now is not
// the node's, and is left alone.
func TestTheSweepListsTheGroupsOfStopsWithoutIt(t *testing.T) {
	eachShell(t, func(t *testing.T, sh shell) {
		home, n, started, hidden := leaderKilledByHand(t, sh)
		stop := Stop{PID: started.PID, StartTime: started.StartTime, RunID: n.RunID, Ranks: []int{n.Rank}, Grace: 300 * time.Millisecond, NoSweep: true}
		if _, err := ParseStopped(runScriptIn(t, sh, home, StopScript(stop))); err != nil {
			t.Fatal(err)
		}
		// The worker ignores SIGTERM (its sleep does not): only a stop
		// that lists the group's members ends it.
		time.Sleep(100 * time.Millisecond)
		if len(unmarked(home)) == 0 {
			t.Fatal("the stop without the sweep listed its group's members and ended the worker")
		}
		// Another process is the recorded leader's pid now (this test's
		// own, with another start time): its group is not the node's.
		other := Stop{RunID: n.RunID, Ranks: []int{}, Grace: 300 * time.Millisecond,
			Groups: []Group{{PID: started.PID, StartTime: started.StartTime}}}
		other.Groups = append(other.Groups, Group{PID: os.Getpid(), StartTime: 1})
		out := runScriptIn(t, sh, home, StopScript(other))
		s, err := ParseStopped(out)
		if err != nil || s.Left != 0 || s.Signalled == 0 || s.Killed == 0 {
			t.Fatalf("the sweep: %+v %v (want the worker signalled, then killed)\n%s", s, err, out)
		}
		waitFor(t, "the group's hidden worker to end", func() bool {
			for _, p := range hidden {
				if alive(p) {
					return false
				}
			}
			return true
		})
	})
}

// realPython3 says whether python3 here can make the leader a subreaper.
func realPython3(t *testing.T) {
	t.Helper()
	if err := exec.Command("python3", "-s", "-S", "-c", "import ctypes").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("python3 with ctypes is needed (.ci/run installs it): %v", err)
		}
		t.Skipf("no python3 with ctypes: %v", err)
	}
}

// TestStopFindsADescendantThatLeftTheSessionAndScrubbedItsEnvironment: a
// worker that started a session of its own, lost its parent and carries
// no gpulayer variable is still in the leader's tree (the leader is a
// subreaper), and the stop ends it.
func TestStopFindsADescendantThatLeftTheSessionAndScrubbedItsEnvironment(t *testing.T) {
	realPython3(t)
	eachShell(t, func(t *testing.T, sh shell) {
		home := t.TempDir()
		n := node("sh", "-c", "(setsid "+hiddenWorker+" </dev/null >/dev/null 2>&1 &); exec sleep 300")
		n.Spec.Workdir = home
		started, err := ParseStarted(runScriptIn(t, sh, home, Script(n)))
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Kill(-started.PID, syscall.SIGKILL)
		waitReady(t, home)
		hidden := unmarked(home)
		for _, p := range hidden {
			if sid, _, _ := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(p), 0, 0); int(sid) == started.PID {
				t.Fatalf("the hidden worker %d did not leave the session", p)
			}
		}
		out := runScriptIn(t, sh, home, StopScript(Stop{PID: started.PID, StartTime: started.StartTime, RunID: n.RunID, Ranks: []int{n.Rank}, Grace: 300 * time.Millisecond}))
		stopped, err := ParseStopped(out)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if stopped.Left != 0 {
			t.Errorf("stopped %+v", stopped)
		}
		for _, p := range hidden {
			if alive(p) {
				t.Errorf("hidden worker %d survived the stop", p)
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
	})
}

// TestTheLeaderEndsWhatTheCommandLeftBehind: a command that exits 0 and
// leaves a hidden worker running: the node ends with status 0, and the
// worker with it.
func TestTheLeaderEndsWhatTheCommandLeftBehind(t *testing.T) {
	realPython3(t)
	eachShell(t, func(t *testing.T, sh shell) {
		home := t.TempDir()
		n := node("sh", "-c", "(setsid "+hiddenWorker+" </dev/null >/dev/null 2>&1 &); while [ ! -e hidden-ready ]; do sleep 0.05; done; exit 0")
		n.Spec.Workdir = home
		started, err := ParseStarted(runScriptIn(t, sh, home, Script(n)))
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Kill(-started.PID, syscall.SIGKILL)
		waitFor(t, "the node to end", func() bool { return !alive(started.PID) })
		b, _ := os.ReadFile(filepath.Join(home, ExitPath(n.Job, n.RunID, n.Rank)))
		if strings.TrimSpace(string(b)) != "0" {
			t.Errorf("exit file %q, want 0", b)
		}
		if left := unmarked(home); len(left) > 0 {
			t.Errorf("processes %v outlived their node", left)
			for _, p := range left {
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
	})
}

// TestStopTouchesOnlyItsOwnNode: two nodes of one run on one kernel (the
// sandbox's machines, containers of one host): stopping node 1 leaves
// node 0 running.
func TestStopTouchesOnlyItsOwnNode(t *testing.T) {
	home := t.TempDir()
	var leaders [2]Started
	for rank := range 2 {
		n := node("sleep", "300")
		n.Rank = rank
		n.GPUs, n.GPUUUIDs = []int{2 * rank, 2*rank + 1}, []string{"GPU-" + strconv.Itoa(2*rank), "GPU-" + strconv.Itoa(2*rank+1)}
		st, err := ParseStarted(runScript(t, home, Script(n)))
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Kill(-st.PID, syscall.SIGKILL)
		leaders[rank] = st
	}
	n := node()
	out := runScript(t, home, StopScript(Stop{PID: leaders[1].PID, StartTime: leaders[1].StartTime, RunID: n.RunID, Ranks: []int{1}, Grace: time.Second}))
	if _, err := ParseStopped(out); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	waitFor(t, "node 1 to end", func() bool { return len(withMarker("GPULAYER_NODE_ID="+NodeID(n.RunID, 1))) == 0 })
	time.Sleep(100 * time.Millisecond)
	if len(withMarker("GPULAYER_NODE_ID="+NodeID(n.RunID, 0))) == 0 {
		t.Error("stopping node 1 ended node 0")
	}
}

// TestClaimsKeepAnotherConfigurationOffAGPU: a node of one configuration
// holds GPUs 2 and 3; a node of another configuration asking for GPUs 3
// and 4 fails, naming the holder, and takes neither (all or nothing);
// once the first node is gone its claims are stale and the second takes
// them over.
func TestClaimsKeepAnotherConfigurationOffAGPU(t *testing.T) {
	eachShell(t, func(t *testing.T, sh shell) {
		home := t.TempDir()
		a := node("sleep", "300")
		a.Lineage = "11111111-1111-4111-8111-111111111111"
		startedA, err := ParseStarted(runScriptIn(t, sh, home, Script(a)))
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Kill(-startedA.PID, syscall.SIGKILL)
		claim, err := os.ReadFile(filepath.Join(home, ClaimsDir, "GPU-bbb"))
		if err != nil || !strings.HasPrefix(string(claim), "v1 "+a.Lineage+" train r0123456789abcdef 1 "+strconv.Itoa(startedA.PID)+" ") {
			t.Fatalf("claim of GPU-bbb: %q %v", claim, err)
		}

		b := node("sleep", "300")
		b.Job, b.RunID, b.Rank, b.Lineage = "other", "rfedcba9876543210", 0, "22222222-2222-4222-8222-222222222222"
		b.GPUs, b.GPUUUIDs = []int{3, 4}, []string{"GPU-bbb", "GPU-ccc"}
		out := runScriptIn(t, sh, home, Script(b))
		_, err = ParseStarted(out)
		var le *LaunchError
		if !errors.As(err, &le) || le.Kind != "claimed" || !strings.Contains(le.Message, "claimed by job train") || !strings.Contains(le.Message, a.Lineage) {
			t.Fatalf("second configuration's launch: %v\n%s", err, out)
		}
		if _, err := os.Stat(filepath.Join(home, ClaimsDir, "GPU-ccc")); err == nil {
			t.Error("the refused launch claimed GPU-ccc")
		}
		if got := leftWithMarker("GPULAYER_RUN_ID=" + b.RunID); len(got) > 0 {
			t.Errorf("the refused launch started %v", got)
		}

		syscall.Kill(-startedA.PID, syscall.SIGKILL)
		waitFor(t, "the first node to end", func() bool { return !alive(startedA.PID) })
		startedB, err := ParseStarted(runScriptIn(t, sh, home, Script(b)))
		if err != nil {
			t.Fatalf("once the holder is gone: %v", err)
		}
		defer syscall.Kill(-startedB.PID, syscall.SIGKILL)
		claim, _ = os.ReadFile(filepath.Join(home, ClaimsDir, "GPU-bbb"))
		if !strings.HasPrefix(string(claim), "v1 "+b.Lineage+" other ") || !strings.Contains(string(claim), " "+strconv.Itoa(startedB.PID)+" ") {
			t.Errorf("GPU-bbb not taken over: %q", claim)
		}
	})
}

// TestParseStartedReadsTheStartCheck: the start check's report follows
// the launch's line; the node's log, at its end, is never read as the
// launch's (a job that prints a launch line of its own), and a node gone
// before its start could be read is reported by how it ended.
func TestParseStartedReadsTheStartCheck(t *testing.T) {
	out := "gpulayer-launch:ok 42 7 boot 29500 pid:[4026531836]\ngpulayer-check:exited 3\ngpulayer-check:log\nbye\ngpulayer-launch:ok 1 1 - 1 -\n"
	s, err := ParseStarted([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if s.PID != 42 || s.StartTime != 7 || s.PIDNamespace != "pid:[4026531836]" || s.Check.Alive || s.Check.Exit.Status == nil || *s.Check.Exit.Status != 3 ||
		strings.Join(s.Check.LogTail, "|") != "bye|gpulayer-launch:ok 1 1 - 1 -" {
		t.Errorf("started %+v", s)
	}
	s, err = ParseStarted([]byte("gpulayer-launch:ended 42 29501\ngpulayer-check:exited 2\ngpulayer-check:log\nno such file\n"))
	if err != nil || !s.Ended || s.PID != 42 || s.MasterPort != 29501 || s.Check.Exit.Status == nil || *s.Check.Exit.Status != 2 {
		t.Errorf("ended: %+v %v", s, err)
	}
	if _, err := ParseStarted([]byte("gpulayer-launch:ok 42 7 boot 29500 -\n")); err == nil {
		t.Error("a launch without its start check was taken as started")
	}
}

// TestStopWithoutTheSweepLeavesOtherMachinesProcessesToTheirSweeper: a
// stop told another stop of its kernel sweeps (NoSweep) touches no
// process outside its node's tree, even one carrying its node's marker;
// the stop that sweeps, told the ranks of every machine of the kernel,
// ends it.
func TestStopWithoutTheSweepLeavesOtherMachinesProcessesToTheirSweeper(t *testing.T) {
	eachShell(t, func(t *testing.T, sh shell) {
		home := t.TempDir()
		cmd := exec.Command("sleep", "300")
		cmd.Env = append(os.Environ(), "GPULAYER_NODE_ID="+NodeID("r0sweep", 1))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		go cmd.Wait()
		pid := cmd.Process.Pid
		out := runScriptIn(t, sh, home, StopScript(Stop{RunID: "r0sweep", Ranks: []int{1}, Grace: time.Second, NoSweep: true}))
		if s, err := ParseStopped(out); err != nil || s.Signalled != 0 {
			t.Fatalf("stop without the sweep: %+v %v\n%s", s, err, out)
		}
		if !alive(pid) {
			t.Fatal("a stop without the sweep ended a process outside its tree")
		}
		out = runScriptIn(t, sh, home, StopScript(Stop{RunID: "r0sweep", Ranks: []int{0, 1}, Grace: time.Second}))
		if s, err := ParseStopped(out); err != nil || s.Signalled != 1 || s.Left != 0 {
			t.Fatalf("the sweeping stop: %+v %v\n%s", s, err, out)
		}
		waitFor(t, "the marked process to end", func() bool { return !alive(pid) })
	})
}

package launch

import (
	"bytes"
	"context"
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

// runScript runs a script as a machine would, `sh -s` with the script on
// standard input, in a home of its own.
func runScript(t *testing.T, home, script string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-s")
	cmd.Stdin = strings.NewReader(script)
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
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
	home := t.TempDir()
	// Every kind of value a shell could misread, in arguments and env.
	hostile := []string{`it's`, `$(touch pwned)`, "`touch pwned`", "two\nlines", "ünïcødé ✓", `"quoted"`, `a;b|c&d`, `*`}
	n := node(append([]string{"sh", "-c", `printf '%s\n' "$@" > args.txt; env > env.txt; exec sleep 30`, "sh"}, hostile...)...)
	n.Spec.Env["HOSTILE"] = `$(touch pwned) 'x' "y"` + "\n`z`"
	n.Spec.Workdir = home
	out := runScript(t, home, Script(n))
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
		"HOSTILE": n.Spec.Env["HOSTILE"],
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s=%q, want %q", k, env[k], v)
		}
	}
	if _, err := os.Stat(filepath.Join(home, LogPath("train", "r0123456789abcdef", 1))); err != nil {
		t.Errorf("no log: %v", err)
	}
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

func TestLaunchRefusesWhatCannotStart(t *testing.T) {
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
			out := runScript(t, home, Script(n))
			_, err := ParseStarted(out)
			le, ok := err.(*LaunchError)
			if !ok || le.Kind != c.kind {
				t.Fatalf("error %v (%T), want kind %s\n%s", err, err, c.kind, out)
			}
		})
	}
}

func TestLaunchRecordsTheExitStatus(t *testing.T) {
	home := t.TempDir()
	n := node("sh", "-c", "echo bye; exit 7")
	started, err := ParseStarted(runScript(t, home, Script(n)))
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
}

func TestLaunchPicksAFreePortOnNodeZero(t *testing.T) {
	home := t.TempDir()
	n := node("sleep", "30")
	n.Rank, n.PickPort, n.MasterPort = 0, true, DefaultPort("train")
	// Something already listens on the first candidate.
	l, err := listenTCP(n.MasterPort)
	if err != nil {
		t.Skipf("port %d: %v", n.MasterPort, err)
	}
	defer l.Close()
	started, err := ParseStarted(runScript(t, home, Script(n)))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-started.PID, syscall.SIGKILL)
	if started.MasterPort != n.MasterPort+1 {
		t.Errorf("picked port %d, want %d (the first is taken)", started.MasterPort, n.MasterPort+1)
	}
}

func TestStopEndsTheGroupAndProcessesThatLeftIt(t *testing.T) {
	home := t.TempDir()
	// A torchrun-like launcher: its worker starts a session of its own,
	// and ignores SIGTERM, as a stuck worker would.
	n := node("sh", "-c", `setsid sh -c 'trap "" TERM; : >worker-ready; while :; do sleep 1; done' </dev/null >/dev/null 2>&1 & exec sleep 300`)
	n.Spec.Workdir = home
	started, err := ParseStarted(runScript(t, home, Script(n)))
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
	out := runScript(t, home, StopScript(Stop{PID: started.PID, StartTime: started.StartTime, RunID: n.RunID, Grace: 500 * time.Millisecond}))
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
}

func TestStopLeavesAReusedPidAlone(t *testing.T) {
	home := t.TempDir()
	// An unrelated process in a group of its own, whose pid state says
	// was the job's leader, started at another time.
	other := exec.Command("sleep", "30")
	other.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer other.Process.Kill()
	out := runScript(t, home, StopScript(Stop{PID: other.Process.Pid, StartTime: 1, RunID: "r-none", Grace: 0}))
	if _, err := ParseStopped(out); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	time.Sleep(100 * time.Millisecond)
	if !alive(other.Process.Pid) {
		t.Error("stop killed a process that only reuses the recorded pid")
	}
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

func TestArgvWrapsTorchrun(t *testing.T) {
	n := node("python", "train.py", "--epochs", "3")
	n.Spec.Launcher = "torchrun"
	want := []string{"torchrun", "--nnodes", "2", "--nproc-per-node", "2", "--node-rank", "1",
		"--master-addr", "10.0.0.1", "--master-port", "29500", "train.py", "--epochs", "3"}
	if got := Argv(n); !slices.Equal(got, want) {
		t.Errorf("argv %q, want %q", got, want)
	}
	n.Spec.Command = []string{"./run.sh", "x"}
	if got := Argv(n); !slices.Contains(got, "--no-python") || got[len(got)-2] != "./run.sh" {
		t.Errorf("argv %q: a non-python program needs --no-python", got)
	}
}

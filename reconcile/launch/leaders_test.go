package launch

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// launchTools are the programs a launch, its leader and the tests' jobs
// run: a machine's PATH without perl (or python3) has these.
var launchTools = []string{"mkdir", "flock", "mv", "readlink", "grep", "setsid", "rm", "sleep", "head", "tail", "timeout", "cat", "env", "true"}

// leaderPATH is the PATH under which a launch by shell sh starts its
// leader through leader: "perl" (this machine's PATH, skipped where perl
// is missing), "python3" or "sh" (leaderPath).
func leaderPATH(t *testing.T, sh shell, leader string) string {
	t.Helper()
	if leader != "perl" {
		return leaderPath(t, sh, leader == "python3")
	}
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("perl is not installed")
	}
	path := os.Getenv("PATH")
	if sh.bin != "" {
		path = sh.bin + string(os.PathListSeparator) + path
	}
	return path
}

// leaderPath is a PATH of the tools alone, without perl, and with python3
// only when withPython (the real interpreter, not a version manager's
// shim, which needs a PATH of its own): where the leader starts through
// python3, or through sh and setsid(1) alone.
func leaderPath(t *testing.T, sh shell, withPython bool) string {
	t.Helper()
	dir := t.TempDir()
	link := func(name, target string) {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tool := range launchTools {
		path, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("%s is not installed", tool)
		}
		link(tool, path)
	}
	if withPython {
		realPython3(t)
		out, err := exec.Command("python3", "-s", "-S", "-c", "import sys; print(sys.executable)").Output()
		if err != nil {
			t.Fatal(err)
		}
		link("python3", strings.TrimSpace(string(out)))
	}
	if sh.bin != "" {
		return sh.bin + string(os.PathListSeparator) + dir
	}
	shPath, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	link("sh", shPath)
	return dir
}

// runScriptWithPath runs a script under the sh first on path, with PATH
// path.
func runScriptWithPath(t *testing.T, path, home, script string) []byte {
	t.Helper()
	return runScriptWith(t, filepath.Join(filepath.SplitList(path)[0], "sh"), path, home, script)
}

// ownPIDNamespace is this process's pid namespace, as a launch reports
// it.
func ownPIDNamespace(t *testing.T) string {
	t.Helper()
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Skipf("no pid namespace link: %v", err)
	}
	return ns
}

// TestEachLeaderStartsTheNodeAndClaimsItsGPUs: whichever way the
// machine starts a node's leader (perl, which makes the run directory,
// the log and the claims itself; python3; or sh and setsid(1) alone),
// the launch reports the leader's pid, start time and pid namespace, the
// leader leads its session and group, the node's log and claims name it,
// and a second configuration asking for its GPU is refused.
func TestEachLeaderStartsTheNodeAndClaimsItsGPUs(t *testing.T) {
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("perl is not installed")
	}
	ns := ownPIDNamespace(t)
	eachShell(t, func(t *testing.T, sh shell) {
		for _, leader := range []string{"perl", "python3", "sh"} {
			t.Run(leader, func(t *testing.T) {
				path := leaderPATH(t, sh, leader)
				home := t.TempDir()
				n := node("sh", "-c", "echo started; exec sleep 300")
				n.Lineage = "11111111-1111-4111-8111-111111111111"
				out := runScriptWithPath(t, path, home, Script(n))
				started, err := ParseStarted(out)
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				defer syscall.Kill(-started.PID, syscall.SIGKILL)
				if !started.Check.Alive || started.StartTime == 0 || started.PIDNamespace != ns {
					t.Errorf("started %+v, want alive with pid namespace %s\n%s", started, ns, out)
				}
				if got := procStartTime(t, started.PID); got != started.StartTime {
					t.Errorf("start time %d, the process's is %d", started.StartTime, got)
				}
				if sid, _, _ := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(started.PID), 0, 0); int(sid) != started.PID {
					t.Errorf("the leader %d is in session %d, not its own", started.PID, sid)
				}
				for _, gpu := range n.GPUUUIDs {
					claim, err := os.ReadFile(filepath.Join(home, ClaimsDir, gpu))
					want := "v1 " + n.Lineage + " train r0123456789abcdef 1 " + strconv.Itoa(started.PID) + " " + strconv.FormatUint(started.StartTime, 10) + "\n"
					if err != nil || string(claim) != want {
						t.Errorf("claim of %s: %q %v, want %q", gpu, claim, err, want)
					}
				}
				if left, _ := filepath.Glob(filepath.Join(home, ClaimsDir, ".*.*")); len(left) > 0 {
					t.Errorf("temporary claim files left: %v", left)
				}
				log := filepath.Join(home, LogPath(n.Job, n.RunID, n.Rank))
				waitFor(t, "the node's log", func() bool {
					b, _ := os.ReadFile(log)
					return string(b) == "started\n"
				})
				if fi, err := os.Stat(filepath.Dir(log)); err != nil || fi.Mode().Perm() != 0o700 {
					t.Errorf("run directory: %v %v, want mode 0700", fi, err)
				}

				other := node("sleep", "300")
				other.Job, other.RunID, other.Lineage = "other", "rfedcba9876543210", "22222222-2222-4222-8222-222222222222"
				out = runScriptWithPath(t, path, home, Script(other))
				var le *LaunchError
				if _, err := ParseStarted(out); !errors.As(err, &le) || le.Kind != "claimed" {
					t.Errorf("a second configuration on the same GPUs: %v\n%s", err, out)
				}
			})
		}
	})
}

// TestALeaderThatCannotMakeItsLogFailsTheLaunch: where the node's run
// directory cannot be made (here a file stands in its way), the launch
// fails with kind rundir, starts nothing and claims nothing, however the
// leader starts.
func TestALeaderThatCannotMakeItsLogFailsTheLaunch(t *testing.T) {
	eachShell(t, func(t *testing.T, sh shell) {
		for _, leader := range []string{"perl", "sh"} {
			t.Run(leader, func(t *testing.T) {
				path := leaderPATH(t, sh, leader)
				home := t.TempDir()
				n := node("sleep", "300")
				if err := os.MkdirAll(filepath.Join(home, RunsDir), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(home, RunsDir, n.Job), []byte("not a directory"), 0o600); err != nil {
					t.Fatal(err)
				}
				out := runScriptWithPath(t, path, home, Script(n))
				_, err := ParseStarted(out)
				var le *LaunchError
				if !errors.As(err, &le) || le.Kind != "rundir" {
					t.Fatalf("launch: %v, want a rundir error\n%s", err, out)
				}
				if got := leftWithMarker("GPULAYER_RUN_ID=" + n.RunID); len(got) > 0 {
					for _, p := range got {
						syscall.Kill(p, syscall.SIGKILL)
					}
					t.Errorf("the failed launch started %v", got)
				}
				if claims, _ := os.ReadDir(filepath.Join(home, ClaimsDir)); len(claims) > 1 { // .lock
					t.Errorf("the failed launch left claims: %v", claims)
				}
			})
		}
	})
}

// procStartTime is field 22 of /proc/PID/stat.
func procStartTime(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndex(s, ")")+2:])
	v, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestEachLeaderWaitsForTheClaimsLockAndRefusesAClaimThatIsNoFile:
// however the leader starts (perl takes the claims' lock and checks them
// itself; python3 and sh through flock(1) and the shell), a launch waits
// while another holds the lock on the claims, and then starts; and a GPU
// whose claim is a FIFO is refused as claimed, without the launch
// blocking on it.
func TestEachLeaderWaitsForTheClaimsLockAndRefusesAClaimThatIsNoFile(t *testing.T) {
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("perl is not installed")
	}
	eachShell(t, func(t *testing.T, sh shell) {
		for _, leader := range []string{"perl", "sh"} {
			t.Run(leader, func(t *testing.T) {
				path := leaderPATH(t, sh, leader)
				home := t.TempDir()
				claims := filepath.Join(home, ClaimsDir)
				if err := os.MkdirAll(claims, 0o700); err != nil {
					t.Fatal(err)
				}
				lock, err := os.OpenFile(filepath.Join(claims, ".lock"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
				if err != nil {
					t.Fatal(err)
				}
				defer lock.Close()
				if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
					t.Fatal(err)
				}
				const held = 400 * time.Millisecond
				go func() {
					time.Sleep(held)
					syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
				}()
				n := node("sleep", "300")
				start := time.Now()
				out := runScriptWithPath(t, path, home, Script(n))
				took := time.Since(start)
				started, err := ParseStarted(out)
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				syscall.Kill(-started.PID, syscall.SIGKILL)
				if took < held {
					t.Errorf("the launch took %v, while the lock was held %v: it did not wait for it", took, held)
				}

				other := node("sleep", "300")
				other.RunID = "r0123456789fifo0"
				if err := syscall.Mkfifo(filepath.Join(claims, "GPU-bbb"), 0o600); err != nil {
					// The first node's claim is there: replace it.
					os.Remove(filepath.Join(claims, "GPU-bbb"))
					if err := syscall.Mkfifo(filepath.Join(claims, "GPU-bbb"), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				out = runScriptWithPath(t, path, home, Script(other))
				var le *LaunchError
				if _, err := ParseStarted(out); !errors.As(err, &le) || le.Kind != "claimed" || !strings.Contains(le.Message, "not a regular file") {
					t.Errorf("a claim that is a FIFO: %v, want it refused as claimed\n%s", err, out)
				}
				if got := leftWithMarker("GPULAYER_RUN_ID=" + other.RunID); len(got) > 0 {
					for _, p := range got {
						syscall.Kill(p, syscall.SIGKILL)
					}
					t.Errorf("the refused launch started %v", got)
				}
			})
		}
	})
}

// leftWithMarker is what withMarker lists after up to 2 s for it to list
// nothing: a launch refused in perl (leaderPl) has answered once perl
// closed its output, as it exits, so perl can still be seen a moment
// after the launch ends; a node that started would still be there.
func leftWithMarker(marker string) []int {
	var got []int
	for range 100 {
		if got = withMarker(marker); len(got) == 0 {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return got
}

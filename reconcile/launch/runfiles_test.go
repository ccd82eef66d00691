package launch

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/reconcile/state"
)

// gonePID is a pid no process has: above any pid_max.
const gonePID = 2147483646

// runFiles makes the directory of node n's files in home and returns the
// paths of its exit file and log.
func runFiles(t *testing.T, home string, n Node) (exit, log string) {
	t.Helper()
	exit = filepath.Join(home, ExitPath(n.Job, n.RunID, n.Rank))
	log = filepath.Join(home, LogPath(n.Job, n.RunID, n.Rank))
	if err := os.MkdirAll(filepath.Dir(exit), 0o700); err != nil {
		t.Fatal(err)
	}
	return exit, log
}

// bigExitFile writes a 100 MB file of digits without a newline: read
// whole, it would take the shell's read builtin seconds to minutes (dash
// reads a byte at a time) and print 100 MB.
func bigExitFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "big")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	chunk := []byte(strings.Repeat("7", 1<<20))
	for range 100 {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// placeFile puts what at path: "fifo", "zero" (a link to /dev/zero),
// "big" (a link to the 100 MB file big), or the text of a regular file.
func placeFile(t *testing.T, path, what, big string) {
	t.Helper()
	var err error
	switch what {
	case "fifo":
		err = syscall.Mkfifo(path, 0o600)
	case "zero":
		err = os.Symlink("/dev/zero", path)
	case "big":
		err = os.Symlink(big, path)
	default:
		err = os.WriteFile(path, []byte(what), 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// timed runs a script and says how long it took.
func timed(t *testing.T, sh shell, home, script string) ([]byte, time.Duration) {
	t.Helper()
	start := time.Now()
	out := runScriptIn(t, sh, home, script)
	return out, time.Since(start)
}

// quick is how long a script that reads a node's files may take: those
// reads are each bounded by a few seconds, and a script that read none of
// a FIFO or device takes milliseconds.
const quick = 8 * time.Second

// TestCheckNeverReadsARunFileThatCouldBlockOrNeverEnd: a FIFO at the exit
// file (it would block the read until the check's timeout), a link to
// /dev/zero as the log (it never ends), and an exit file of 100 MB
// without a newline are not read: the check finishes at once and says the
// status is unknown.
func TestCheckNeverReadsARunFileThatCouldBlockOrNeverEnd(t *testing.T) {
	big := bigExitFile(t)
	eachShell(t, func(t *testing.T, sh shell) {
		cases := []struct {
			name, exit, log string
			want            Checked
		}{
			{"a FIFO at the exit file and /dev/zero as the log", "fifo", "zero",
				Checked{Exit: Exit{NotRegular: true}, LogNotRegular: true}},
			{"a 100 MB exit file without a newline", "big", "epoch 1\nbye\n",
				Checked{LogTail: []string{"epoch 1", "bye"}}},
			{"a FIFO as the log", "3\n", "fifo",
				Checked{Exit: Exit{Status: new(3)}, LogNotRegular: true}},
			{"regular files", "0\n", "done\n",
				Checked{Exit: Exit{Status: new(0)}, LogTail: []string{"done"}}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				home := t.TempDir()
				n := node()
				exit, log := runFiles(t, home, n)
				placeFile(t, exit, c.exit, big)
				placeFile(t, log, c.log, big)
				out, took := timed(t, sh, home, CheckScript(n.Job, n.RunID, n.Rank, gonePID, 1, 5*time.Second))
				if took > quick {
					t.Errorf("the check took %s", took)
				}
				if len(out) > 4096 {
					t.Fatalf("the check printed %d bytes: it read a file it should not have", len(out))
				}
				got, err := ParseChecked(out)
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				if got.Alive || !sameExit(got.Exit, c.want.Exit) || got.LogNotRegular != c.want.LogNotRegular ||
					strings.Join(got.LogTail, "\n") != strings.Join(c.want.LogTail, "\n") {
					t.Errorf("checked %+v (status %v), want %+v\n%s", got, deref(got.Exit.Status), c.want, out)
				}
			})
		}
	})
}

func sameExit(a, b Exit) bool {
	return a.NotRegular == b.NotRegular && (a.Status == nil) == (b.Status == nil) && (a.Status == nil || *a.Status == *b.Status)
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestLogsOfALogThatNeverEndsOrBlocksComeBackAtOnce: a log replaced by a
// link to /dev/zero or by a FIFO is reported as not a regular file, not
// read: logs comes back at once with nothing, never with more than
// MaxLogChunk, both for the last lines and for what follows an offset.
func TestLogsOfALogThatNeverEndsOrBlocksComeBackAtOnce(t *testing.T) {
	eachShell(t, func(t *testing.T, sh shell) {
		for _, what := range []string{"zero", "fifo"} {
			for _, req := range []LogsRequest{{Lines: 20}, {From: 100}} {
				t.Run(what+"/"+strconv.Itoa(req.Lines), func(t *testing.T) {
					home := t.TempDir()
					n := node()
					_, log := runFiles(t, home, n)
					placeFile(t, log, what, "")
					req.Job, req.RunID, req.Rank = n.Job, n.RunID, n.Rank
					out, took := timed(t, sh, home, LogsScript(req))
					if took > quick || len(out) > MaxLogChunk+128 {
						t.Fatalf("logs took %s and printed %d bytes", took, len(out))
					}
					got, err := ParseLogs(out)
					if err != nil {
						t.Fatalf("%v\n%q", err, clip(string(out)))
					}
					if !got.NotRegular || got.Size != -1 || got.Text != "" || got.Known {
						t.Errorf("chunk %+v, want a log that is not a regular file", got)
					}
				})
			}
		}
	})
}

// TestLogsReadsARegularLogAndSaysWhetherTheLeaderRuns: the last lines, what
// follows an offset, the size; with the node's leader, whether it runs
// (this test's own process, by pid and start time), or how it ended (a
// pid that is gone, the same pid on another boot).
func TestLogsReadsARegularLogAndSaysWhetherTheLeaderRuns(t *testing.T) {
	self := selfProcess(t)
	eachShell(t, func(t *testing.T, sh shell) {
		home := t.TempDir()
		n := node()
		exit, log := runFiles(t, home, n)
		placeFile(t, log, "one\ntwo\nthree\n", "")
		placeFile(t, exit, "3\n", "")
		base := LogsRequest{Job: n.Job, RunID: n.RunID, Rank: n.Rank}
		otherBoot := *self
		otherBoot.BootID = "00000000-0000-0000-0000-000000000000"
		cases := []struct {
			name         string
			lines        int
			from         int64
			leader       *state.Process
			text         string
			known, ended bool
		}{
			{"last lines", 2, 0, nil, "two\nthree\n", false, false},
			{"from an offset, leader running", 0, 4, self, "two\nthree\n", true, false},
			{"leader gone", 0, 14, &state.Process{PID: gonePID, StartTime: 1}, "", true, true},
			{"leader's machine rebooted", 0, 8, &otherBoot, "three\n", true, true},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				req := base
				req.Lines, req.From, req.Leader = c.lines, c.from, c.leader
				out := runScriptIn(t, sh, home, LogsScript(req))
				got, err := ParseLogs(out)
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				if got.Size != 14 || got.NotRegular || got.Text != c.text || got.Known != c.known || got.Ended != c.ended {
					t.Errorf("chunk %+v\n%s", got, out)
				}
				if c.ended && (got.Exit.Status == nil || *got.Exit.Status != 3) {
					t.Errorf("exit %+v, want status 3", got.Exit)
				}
			})
		}
	})
}

// selfProcess is this test process as state would record it.
func selfProcess(t *testing.T) *state.Process {
	t.Helper()
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip("no /proc")
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return &state.Process{PID: os.Getpid(), StartTime: start, BootID: strings.TrimSpace(string(boot))}
}

// TestTheLeaderReplacesAFIFOAtItsExitFile: something put a FIFO where the
// leader records the exit status; writing into it would block the leader
// for ever (no reader), so the node would never end. The leader replaces
// it with the regular file it always writes.
func TestTheLeaderReplacesAFIFOAtItsExitFile(t *testing.T) {
	eachShell(t, func(t *testing.T, sh shell) {
		home := t.TempDir()
		n := node("sh", "-c", "while [ ! -e go ]; do sleep 0.05; done; exit 5")
		started, err := ParseStarted(runScriptIn(t, sh, home, Script(n)))
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Kill(-started.PID, syscall.SIGKILL)
		exit, _ := runFiles(t, home, n)
		placeFile(t, exit, "fifo", "")
		placeFile(t, filepath.Join(home, "go"), "", "")
		waitFor(t, "the leader to end", func() bool { return !alive(started.PID) })
		st, err := os.Lstat(exit)
		if err != nil || !st.Mode().IsRegular() {
			t.Fatalf("exit file %v, %v", st, err)
		}
		if b, _ := os.ReadFile(exit); string(b) != "5\n" {
			t.Errorf("exit file %q", b)
		}
	})
}

func TestExitSaysHowANodeEnded(t *testing.T) {
	for _, c := range []struct {
		exit Exit
		want string
	}{
		{Exit{Status: new(0)}, "exited with status 0"},
		{Exit{Status: new(3)}, "exited with status 3"},
		{Exit{Status: new(128)}, "exited with status 128"},
		{Exit{Status: new(137)}, "killed by signal 9 (status 137)"},
		{Exit{Status: new(255)}, "exited with status 255"},
		{Exit{NotRegular: true}, "ended; its exit file is not a regular file (not read)"},
		{Exit{}, "ended without an exit status"},
	} {
		if got := c.exit.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.exit, got, c.want)
		}
	}
}

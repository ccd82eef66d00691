package main

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/reconcile/state"
)

// gpulayerWithin runs gpulayer with args in a child process in dir, and
// kills it if it has not ended within limit: for commands that, broken,
// would never end.
func gpulayerWithin(t *testing.T, dir string, limit time.Duration, args ...string) (code int, stdout, stderr string, took time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"-test.run=^TestRunAsGpulayer$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), runAsGpulayer+"=1")
	cmd.Dir = dir
	cmd.WaitDelay = 2 * time.Second
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	took = time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("gpulayer %s did not end within %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), limit, out.String(), errOut.String())
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String(), took
}

// TestLogsFollowEndsOnceEveryNodeHasEnded: `logs --follow` of a job whose
// two nodes print a few lines and exit (one with 0, the other with 3, a
// little later) prints both nodes' lines and then, per node, how it
// ended, and exits 0 on its own, as `kubectl logs -f` does.
func TestLogsFollowEndsOnceEveryNodeHasEnded(t *testing.T) {
	// Each node sleeps past apply's check that it started; node 1 ends
	// later than node 0.
	_, dir := sandboxJobs(t, 2, `
job "train" {
  nodes         = 2
  gpus_per_node = 2
  launcher      = "plain"
  stop_timeout  = "2s"
  command       = ["sh", "-c", "echo start $NODE_RANK; sleep 1.5; echo more $NODE_RANK; if [ $NODE_RANK = 1 ]; then sleep 1; echo bye 1; exit 3; fi; echo bye 0"]
}
`)
	if code, out, errOut := runCmd(t, "apply", dir, "--auto-approve"); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	job := loadState(t, dir).Job("train")
	code, out, errOut, took := gpulayerWithin(t, dir, 40*time.Second, "logs", "train", "--follow")
	if code != 0 {
		t.Fatalf("logs --follow: exit %d after %s\n%s%s", code, took, out, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for _, n := range job.Nodes {
		prefix := "[train " + strconv.Itoa(n.Rank) + " " + n.Host + "] "
		want := []string{"start " + strconv.Itoa(n.Rank), "more " + strconv.Itoa(n.Rank), "bye " + strconv.Itoa(n.Rank)}
		end := "exited with status 0"
		if n.Rank == 1 {
			end = "exited with status 3"
		}
		want = append(want, end)
		var got []string
		for _, l := range lines {
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				got = append(got, rest)
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("node %d printed %q, want %q\nall of it:\n%s%s", n.Rank, got, want, out, errOut)
		}
	}
}

// TestLogsFollowKeepsAskingANodeItCannotReach: of two nodes, one ends and
// the other's machine cannot be reached (state records it at a port where
// nothing listens). --follow ends the first with its ending line, says
// once on stderr that the other cannot be reached, keeps asking it (it may
// have ended; only it can say), and ends at Ctrl-C.
func TestLogsFollowKeepsAskingANodeItCannotReach(t *testing.T) {
	_, dir := sandboxJobs(t, 2, `
job "train" {
  nodes         = 2
  gpus_per_node = 2
  launcher      = "plain"
  stop_timeout  = "2s"
  command       = ["sh", "-c", "echo start $NODE_RANK; sleep 1.5; if [ $NODE_RANK = 1 ]; then exec sleep 300; fi"]
}
`)
	if code, out, errOut := runCmd(t, "apply", dir, "--auto-approve"); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	local := state.NewLocal(filepath.Join(dir, ".gpulayer", "state.json"))
	st := loadState(t, dir)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().(*net.TCPAddr).Port
	l.Close()
	job := st.Job("train")
	far := job.Nodes[1]
	job.Nodes[1].Port, job.Nodes[1].Reach.Port = closed, closed
	if err := local.Save(context.Background(), st, st.Serial); err != nil {
		t.Fatal(err)
	}
	// The real port again, so that destroy stops the node.
	t.Cleanup(func() {
		st := loadState(t, dir)
		st.Job("train").Nodes[1] = far
		if err := local.Save(context.Background(), st, st.Serial); err != nil {
			t.Error(err)
		}
	})

	cmd := exec.Command(os.Args[0], "-test.run=^TestRunAsGpulayer$", "--", "logs", "train", "--follow")
	cmd.Env = append(os.Environ(), runAsGpulayer+"=1")
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-done
		}
	})
	ended := make(chan []string, 1)
	go func() {
		var lines []string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if strings.HasSuffix(sc.Text(), "] exited with status 0") {
				ended <- lines
			}
		}
		done <- cmd.Wait()
	}()
	near := "[train 0 " + job.Nodes[0].Host + "] "
	select {
	case lines := <-ended:
		if strings.Join(lines, "\n") != near+"start 0\n"+near+"exited with status 0" {
			t.Errorf("stdout %q", lines)
		}
	case err := <-done:
		t.Fatalf("logs --follow ended (%v) while a node could not be reached\n%s", err, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("node 0 did not end\n%s", stderr.String())
	}
	// A few polls more: still following, the note printed once.
	select {
	case err := <-done:
		t.Fatalf("logs --follow ended (%v) while a node could not be reached\n%s", err, stderr.String())
	case <-time.After(3 * time.Second):
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("logs --follow after Ctrl-C: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("logs --follow did not end at Ctrl-C")
	}
	farPrefix := "[train 1 " + far.Host + "] cannot be reached"
	if n := strings.Count(stderr.String(), farPrefix); n != 1 {
		t.Errorf("the note that node 1 cannot be reached is printed %d times, want once:\n%s", n, stderr.String())
	}
}

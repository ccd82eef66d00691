//go:build unix

package sshtest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// waitFor polls cond for up to 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func alive(pid int) bool { return ProcessRuns(pid) }

// dial starts a server with opts and returns a client connected to it.
func dial(t *testing.T, opts Options) (*Server, *ssh.Client) {
	t.Helper()
	key, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	opts.AuthorizedKeys = append(opts.AuthorizedKeys, key.PublicKey())
	srv, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	client, err := ssh.Dial("tcp", srv.Addr, &ssh.ClientConfig{
		User:            "test",
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(key)},
		HostKeyCallback: ssh.FixedHostKey(srv.HostKey.PublicKey()),
		Timeout:         10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return srv, client
}

func TestExecStreamsAndReportsHowTheCommandEnded(t *testing.T) {
	dir := t.TempDir()
	_, client := dial(t, Options{Env: []string{"FLEET=lab"}, Dir: dir})
	for _, tc := range []struct {
		name, command, stdin string
		env                  [2]string
		stdout, stderr       string
		status               int
		signal               string
	}{
		{name: "stdout and stderr", command: "echo out; echo err >&2", stdout: "out\n", stderr: "err\n"},
		{name: "exit status", command: "exit 7", status: 7},
		{name: "killed by a signal", command: "kill -KILL $$", status: 128 + 9, signal: "KILL"},
		{name: "stdin", command: "wc -c", stdin: strings.Repeat("x", 100000), stdout: "100000\n"},
		{name: "server environment", command: `printf %s "$FLEET"`, stdout: "lab"},
		{name: "client environment", command: `printf %s "$RANK"`, env: [2]string{"RANK", "3"}, stdout: "3"},
		{name: "working directory", command: "pwd", stdout: dir + "\n"},
		{name: "shell is sh", command: "test -n \"$0\" && echo \"$0\"", stdout: "/bin/sh\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sess, err := client.NewSession()
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			var stdout, stderr bytes.Buffer
			sess.Stdout, sess.Stderr = &stdout, &stderr
			sess.Stdin = strings.NewReader(tc.stdin)
			if tc.env[0] != "" {
				if err := sess.Setenv(tc.env[0], tc.env[1]); err != nil {
					t.Fatal(err)
				}
			}
			err = sess.Run(tc.command)
			status, signal := 0, ""
			var ee *ssh.ExitError
			if errors.As(err, &ee) {
				status, signal = ee.ExitStatus(), ee.Signal()
			} else if err != nil {
				t.Fatal(err)
			}
			if stdout.String() != tc.stdout || stderr.String() != tc.stderr || status != tc.status || signal != tc.signal {
				t.Errorf("got %q %q %d %q, want %q %q %d %q", stdout.String(), stderr.String(), status, signal,
					tc.stdout, tc.stderr, tc.status, tc.signal)
			}
		})
	}
}

func TestManySessionsRunAtOnceOnOneConnection(t *testing.T) {
	srv, client := dial(t, Options{})
	const n = 20
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sess, err := client.NewSession()
			if err != nil {
				t.Error(err)
				return
			}
			defer sess.Close()
			// Each command waits until all of them have started.
			cmd := "touch " + filepath.Join(dir, strconv.Itoa(i)) +
				"; i=0; while [ $(ls " + dir + " | wc -l) -lt " + strconv.Itoa(n) + " ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; echo $i"
			out, err := sess.Output(cmd)
			if err != nil || string(out) == "100\n" {
				t.Errorf("session %d: %q, %v", i, out, err)
			}
		}()
	}
	wg.Wait()
	if st := srv.Stats(); st.PeakCommandsPerConn != n || st.Conns != 1 || st.Sessions != n {
		t.Errorf("stats %+v, want %d commands at once on 1 connection", st, n)
	}
}

func TestMaxSessionsRefusesTheSessionBeyondIt(t *testing.T) {
	_, client := dial(t, Options{MaxSessions: 2})
	var open []*ssh.Session
	for i := 0; i < 2; i++ {
		s, err := client.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, s)
	}
	if _, err := client.NewSession(); err == nil || !strings.Contains(err.Error(), "too many sessions") {
		t.Fatalf("third session: %v", err)
	}
	open[0].Close()
	s, err := client.NewSession()
	if err != nil {
		t.Fatalf("after one closed: %v", err)
	}
	s.Close()
}

// startSleeper runs a command that records its pid (and that of a child
// in its process group) and sleeps.
func startSleeper(t *testing.T, client *ssh.Client) (*ssh.Session, []int) {
	t.Helper()
	sess, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := sess.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Start("sleep 60 & echo $$ $!; wait"); err != nil {
		t.Fatal(err)
	}
	var a, b int
	line := make([]byte, 64)
	n, _ := stdout.Read(line)
	if _, err := fmt.Sscan(string(line[:n]), &a, &b); err != nil {
		t.Fatalf("pids %q: %v", line[:n], err)
	}
	return sess, []int{a, b}
}

func TestClosingTheSessionKillsTheCommandsProcessGroup(t *testing.T) {
	_, client := dial(t, Options{})
	sess, pids := startSleeper(t, client)
	sess.Close()
	for _, pid := range pids {
		waitFor(t, "process "+strconv.Itoa(pid)+" to die", func() bool { return !alive(pid) })
	}
}

func TestSignalRequestReachesTheProcessGroup(t *testing.T) {
	_, client := dial(t, Options{})
	sess, pids := startSleeper(t, client)
	defer sess.Close()
	if err := sess.Signal(ssh.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var ee *ssh.ExitError
	if err := sess.Wait(); !errors.As(err, &ee) || ee.Signal() != "TERM" {
		t.Fatalf("got %v, want the command ended by TERM", err)
	}
	for _, pid := range pids {
		waitFor(t, "process "+strconv.Itoa(pid)+" to die", func() bool { return !alive(pid) })
	}
}

func TestCloseStopsTheServerAndItsCommands(t *testing.T) {
	srv, client := dial(t, Options{})
	_, pids := startSleeper(t, client)
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		waitFor(t, "process "+strconv.Itoa(pid)+" to die", func() bool { return !alive(pid) })
	}
	if _, err := client.NewSession(); err == nil {
		t.Error("session opened after Close")
	}
}

func TestBackgroundProcessThatLeavesTheSessionSurvivesIt(t *testing.T) {
	_, client := dial(t, Options{})
	pidFile := filepath.Join(t.TempDir(), "pid")
	sess, _ := client.NewSession()
	// What a launcher does: detach from the session and its output.
	if err := sess.Run("setsid sleep 60 </dev/null >/dev/null 2>&1 & echo $! > " + pidFile); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	defer syscall.Kill(pid, syscall.SIGKILL)
	time.Sleep(100 * time.Millisecond)
	if !alive(pid) {
		t.Fatal("detached process died with its session")
	}
}

func TestRefusesUnknownKeysAndUsers(t *testing.T) {
	key, _ := GenerateKey()
	stranger, _ := GenerateKey()
	srv, err := Start(Options{AuthorizedKeys: []ssh.PublicKey{key.PublicKey()}, Users: []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, tc := range []struct {
		user string
		key  ssh.Signer
		ok   bool
	}{{"gpu", key, true}, {"root", key, false}, {"gpu", stranger, false}} {
		c, err := ssh.Dial("tcp", srv.Addr, &ssh.ClientConfig{User: tc.user, Auth: []ssh.AuthMethod{ssh.PublicKeys(tc.key)},
			HostKeyCallback: ssh.FixedHostKey(srv.HostKey.PublicKey()), Timeout: 10 * time.Second})
		if (err == nil) != tc.ok {
			t.Errorf("user %s: got %v, want ok=%v", tc.user, err, tc.ok)
		}
		if c != nil {
			c.Close()
		}
	}
}

func TestKnownHostsLineIsAcceptedByKnownhosts(t *testing.T) {
	srv, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "known_hosts")
	if err := WriteKnownHosts(path, srv.KnownHostsLine("127.0.0.1")); err != nil {
		t.Fatal(err)
	}
	cb, err := knownhosts.New(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cb(srv.Addr, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: srv.Port}, srv.HostKey.PublicKey()); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(srv.KnownHostsLine("127.0.0.1"), "[127.0.0.1]:"+strconv.Itoa(srv.Port)+" ssh-ed25519 ") {
		t.Errorf("line %q", srv.KnownHostsLine("127.0.0.1"))
	}
}

package sandbox_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/ssh"
)

func TestMachinesGetAMinimalEnvironment(t *testing.T) {
	// Whoever starts the sandbox has an agent and secrets; no machine's
	// process may see them.
	t.Setenv("SSH_AUTH_SOCK", "/run/user/0/agent.sock")
	t.Setenv("GPULAYER_TEST_SECRET", "hunter2")
	for _, shell := range shells {
		t.Run(shell, func(t *testing.T) {
			sb := startSandbox(t, 1, shell)
			pool := ssh.NewPool(ssh.Options{NoAgent: true})
			defer pool.Close()
			m := sb.Machines[0]
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// env is a real process in both modes, as a launched program is.
			res, err := pool.Run(ctx, machineTarget(t, sb, m), "env", nil)
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("env: %v %+v", err, res)
			}
			vars := map[string]string{}
			for _, kv := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
				k, v, _ := strings.Cut(kv, "=")
				vars[k] = v
			}
			for _, secret := range []string{"SSH_AUTH_SOCK", "GPULAYER_TEST_SECRET"} {
				if v, ok := vars[secret]; ok {
					t.Errorf("%s=%s reached the machine", secret, v)
				}
			}
			for _, want := range []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "GPULAYER_SANDBOX_MACHINE"} {
				if vars[want] == "" {
					t.Errorf("%s is not set on the machine: %q", want, res.Stdout)
				}
			}
			if vars["HOME"] != m.Dir+"/home" || vars["GPULAYER_SANDBOX_MACHINE"] != m.Dir {
				t.Errorf("HOME %q, GPULAYER_SANDBOX_MACHINE %q; want the machine's", vars["HOME"], vars["GPULAYER_SANDBOX_MACHINE"])
			}
		})
	}
}

// A client that connects to every machine and never speaks must not make
// closing the sandbox wait for it, or fail.
func TestCloseEndsConnectionsThatNeverAuthenticated(t *testing.T) {
	sb := startSandbox(t, 2, "")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for _, m := range sb.Machines {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(m.Port)))
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// The servers have accepted them once they sent their banner.
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != nil {
			t.Fatalf("no banner: %v", err)
		}
	}
	if err := sb.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatal("the connection is still open after Close")
				}
				break
			}
		}
	}
}

package sshtest

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/crypto/ssh"
)

// commandEnv is the environment of every command: the server process's,
// unless only is set, then extra, whose entries win (os/exec keeps the last
// of duplicates).
func commandEnv(extra []string, only bool) []string {
	if only {
		return append([]string{}, extra...)
	}
	env := os.Environ()
	return append(env[:len(env):len(env)], extra...)
}

// signalName is the SSH name of sig (RFC 4254 6.10).
func signalName(sig os.Signal) string {
	for name, s := range signals {
		if s == sig {
			return name
		}
	}
	return "SIG" + sig.String()
}

// command is one exec request being served: a shell process (cmd) or a
// call of Options.Runner (cancel).
type command struct {
	// replied is closed once the exec request was answered. Output, the
	// exit status and the channel's close wait for it, as with sshd: a
	// command that ends at once must not close the channel before the
	// client has its answer (it would read EOF, not a status).
	replied  chan struct{}
	mu       sync.Mutex
	cmd      *exec.Cmd
	cancel   context.CancelFunc
	signaled os.Signal // what cancelled a Runner's command
	exited   bool
	outputs  []*os.File // read ends of stdout and stderr
}

// signal sends sig to the command's process group while it runs, or
// cancels a Runner's command: it has no process to signal.
func (c *command) signal(sig os.Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.exited {
		return
	}
	if c.cmd != nil {
		signalGroup(c.cmd.Process, sig)
	}
	if c.cancel != nil {
		if c.signaled == nil {
			c.signaled = sig
		}
		c.cancel()
	}
}

// abandon kills a command whose session went away, with its process
// group, and stops copying output that background children still write.
func (c *command) abandon() {
	c.signal(os.Kill)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.outputs {
		f.Close()
	}
}

// session serves one session channel until it closes.
// open counts the connection's open sessions and running its running
// commands; the session counts itself out as soon as it closes.
func (s *Server) session(ch ssh.Channel, reqs <-chan *ssh.Request, open, running *atomic.Int64) {
	env := s.env
	var c *command
	for req := range reqs {
		switch req.Type {
		case "env":
			var kv struct{ Name, Value string }
			if ssh.Unmarshal(req.Payload, &kv) != nil || kv.Name == "" || strings.Contains(kv.Name, "=") {
				req.Reply(false, nil)
				continue
			}
			env = append(env[:len(env):len(env)], kv.Name+"="+kv.Value)
			req.Reply(true, nil)
		case "exec":
			if s.opts.Stall == StallExec {
				// Never answered; later requests are still read, so the
				// connection keeps working.
				continue
			}
			var p struct{ Command string }
			if c != nil || ssh.Unmarshal(req.Payload, &p) != nil {
				req.Reply(false, nil)
				continue
			}
			var err error
			c, err = s.start(ch, p.Command, env, running)
			if err != nil {
				req.Reply(false, nil)
				ch.Stderr().Write([]byte("sshtest: " + err.Error() + "\n"))
				ch.Close()
				continue
			}
			req.Reply(true, nil)
			close(c.replied)
		case "signal":
			var p struct{ Signal string }
			if ssh.Unmarshal(req.Payload, &p) == nil && c != nil {
				if sig, ok := signals[p.Signal]; ok {
					c.signal(sig)
				}
			}
			if req.WantReply {
				req.Reply(false, nil)
			}
		default:
			// No pty, shell or subsystem.
			req.Reply(false, nil)
		}
	}
	// The channel closed: by us after the command exited, by the client,
	// or because the connection or the server went away.
	open.Add(-1)
	if c != nil {
		c.abandon()
	}
}

// start runs command with the shell in its own process group and streams
// its input and output over ch; once it exited and its output is drained,
// the exit status is sent and ch closed.
func (s *Server) start(ch ssh.Channel, line string, env []string, running *atomic.Int64) (*command, error) {
	if s.opts.Runner != nil {
		return s.startRunner(ch, line, env, running), nil
	}
	cmd := exec.Command(s.opts.Shell, "-c", line)
	cmd.Env = env
	cmd.Dir = s.opts.Dir
	inNewGroup(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	// Counted before it starts, so that it is counted before it can act.
	s.notePeak(running.Add(1))
	if err := cmd.Start(); err != nil {
		running.Add(-1)
		for _, f := range []*os.File{outR, outW, errR, errW} {
			f.Close()
		}
		stdin.Close()
		return nil, err
	}
	outW.Close()
	errW.Close()
	c := &command{cmd: cmd, outputs: []*os.File{outR, errR}, replied: make(chan struct{})}

	go func() {
		io.Copy(stdin, ch)
		stdin.Close()
	}()
	var copying sync.WaitGroup
	copying.Add(2)
	go func() { defer copying.Done(); <-c.replied; io.Copy(ch, outR) }()
	go func() { defer copying.Done(); <-c.replied; io.Copy(ch.Stderr(), errR) }()
	go func() {
		err := cmd.Wait()
		running.Add(-1)
		c.mu.Lock()
		c.exited = true
		c.mu.Unlock()
		// Like sshd, the session lasts while anything still holds the
		// command's stdout or stderr open, background children included.
		copying.Wait()
		outR.Close()
		errR.Close()
		sendExit(ch, cmd.ProcessState, err)
		ch.Close()
	}()
	return c, nil
}

// startRunner runs command with Options.Runner; once it returned, the exit
// status is sent and ch closed. A signal, or the session going away,
// cancels it; a command a signal cancelled ends with that signal.
func (s *Server) startRunner(ch ssh.Channel, line string, env []string, running *atomic.Int64) *command {
	ctx, cancel := context.WithCancel(context.Background())
	c := &command{cancel: cancel, replied: make(chan struct{})}
	s.notePeak(running.Add(1))
	go func() {
		defer cancel()
		<-c.replied
		status, err := s.opts.Runner.Run(ctx, line, env, s.opts.Dir, ch, ch, ch.Stderr())
		running.Add(-1)
		if err != nil {
			ch.Stderr().Write([]byte("sshtest: " + err.Error() + "\n"))
		}
		c.mu.Lock()
		c.exited = true
		sig := c.signaled
		c.mu.Unlock()
		if sig != nil {
			sendSignal(ch, sig, false)
		} else {
			if status < 0 || status > 255 {
				status = 255
			}
			ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(status)}))
		}
		ch.Close()
	}()
	return c
}

// sendSignal reports that sig ended the command.
func sendSignal(ch ssh.Channel, sig os.Signal, coreDumped bool) {
	ch.SendRequest("exit-signal", false, ssh.Marshal(struct {
		Signal     string
		CoreDumped bool
		Error      string
		Lang       string
	}{Signal: signalName(sig), CoreDumped: coreDumped}))
}

// sendExit reports how the command ended: exit-status, or exit-signal
// when a signal killed it.
func sendExit(ch ssh.Channel, ps *os.ProcessState, waitErr error) {
	if ps == nil {
		ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{255}))
		return
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		sendSignal(ch, ws.Signal(), ws.CoreDump())
		return
	}
	ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(ps.ExitCode())}))
}

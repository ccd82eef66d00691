package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// InProcess is the Options.Shell value that runs the machines' commands
// with a shell interpreter inside the sandbox's process.
const InProcess = "in-process"

// killTimeout is how long a real process gets after SIGINT, when its
// command is cancelled, before it is killed.
const killTimeout = 2 * time.Second

// inProcessShell runs a session's command as the machine's login shell
// (bin/sandbox-shell) would, but interpreted in this process, so that a
// probe of hundreds of machines does not pay for a fork and exec of every
// shell, nvidia-smi and python3 it runs. What it interprets in-process:
//
//   - the login shell itself, and `sh -c` / `sh -s` of the command;
//   - the machine's Go tools (tools.go: nvidia-smi), called directly
//     rather than through their shims in bin/;
//   - executables whose first line is #!/bin/sh: the sandbox's python3
//     and sandbox-shell, the same scripts the real shell runs, so both
//     modes share one implementation of each;
//   - `timeout DURATION COMMAND...`, as a deadline on COMMAND.
//
// Everything else (grep, tr, real python3, launched programs) runs as a
// real process, with the machine's environment, so launched processes are
// found in /proc as before. A script that starts background jobs (`&`) or
// asks for a process id ($$, $!) runs with the real shell as a whole: the
// interpreter's jobs are goroutines without process ids, and they would
// not outlive the session as a detached process does.
type inProcessShell struct {
	loginShell string // bin/sandbox-shell

	mu           sync.Mutex
	scripts      map[string]cachedScript // parsed #!/bin/sh files by path
	stdinScripts map[string]cachedScript // parsed `sh -s` scripts by text
}

type cachedScript struct {
	mod      time.Time
	size     int64
	file     *syntax.File
	needReal bool
}

// Run implements sshtest.CommandRunner.
func (s *inProcessShell) Run(ctx context.Context, command string, env []string, dir string,
	stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	prog, err := syntax.NewParser().Parse(strings.NewReader(command), "sandbox-shell -c")
	if err != nil || needsRealShell(prog) {
		// A syntax error is reported by the real shell, in its words.
		return runLoginShell(ctx, s.loginShell, command, env, dir, stdin, stdout, stderr)
	}
	login, err := s.script(s.loginShell)
	if err != nil {
		return 255, err
	}
	// The session's stdin goes through a pipe, as a real shell's does, so
	// that real processes can read it and reads can be cancelled. Ours,
	// not the interpreter's, so that it is closed when the command ends.
	pr, pw, err := os.Pipe()
	if err != nil {
		return 255, fmt.Errorf("sandbox shell: %w", err)
	}
	defer pr.Close()
	go func() {
		io.Copy(pw, stdin)
		pw.Close()
	}()
	out, errOut := newCoalescingWriter(stdout), newCoalescingWriter(stderr)
	defer out.Close()
	defer errOut.Close()
	r, err := interp.New(
		interp.Env(expand.ListEnviron(env...)),
		interp.Dir(dir),
		interp.StdIO(pr, out, errOut),
		interp.ExecHandlers(s.execHandler),
		interp.CallHandler(refuseBackgroundEval),
		interp.Params("--", "-c", command),
	)
	if err != nil {
		return 255, fmt.Errorf("sandbox shell: %w", err)
	}
	status := exitCode(ctx, r.Run(ctx, login.file), errOut)
	// All output is sent before the exit status.
	out.Close()
	errOut.Close()
	return status, nil
}

// exitCode turns what a Runner returned into an exit status, reporting an
// error that is not an exit status, so that nothing fails silently.
func exitCode(ctx context.Context, err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var status interp.ExitStatus
	if errors.As(err, &status) {
		return int(status)
	}
	if ctx.Err() != nil {
		return 128 + int(syscall.SIGTERM)
	}
	fmt.Fprintf(stderr, "sandbox shell: %v\n", err)
	return 2
}

// needsRealShell reports whether prog starts background jobs, reads a
// process id or sends a signal (kill), which the interpreter cannot do as
// a shell process does.
func needsRealShell(prog *syntax.File) bool {
	real := false
	syntax.Walk(prog, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Stmt:
			if n.Background || n.Disown || n.Coprocess {
				real = true
			}
		case *syntax.ParamExp:
			if n.Param != nil && (n.Param.Value == "$" || n.Param.Value == "!") {
				real = true
			}
		case *syntax.ProcSubst:
			real = true
		case *syntax.CallExpr:
			// The interpreter has no kill builtin ("unsupported"), and a
			// kill of a process group needs the shell's.
			if len(n.Args) > 0 && n.Args[0].Lit() == "kill" {
				real = true
			}
		}
		return !real
	})
	return real
}

// refuseBackgroundEval fails an eval whose text needsRealShell: found only
// once it runs, it can no longer be handed to a real shell.
func refuseBackgroundEval(ctx context.Context, args []string) ([]string, error) {
	if args[0] != "eval" || len(args) < 2 {
		return args, nil
	}
	prog, err := syntax.NewParser().Parse(strings.NewReader(strings.Join(args[1:], " ")), "eval")
	if err == nil && needsRealShell(prog) {
		return nil, errors.New("eval of background jobs or process ids is not supported in-process; run the sandbox with --shell /bin/sh")
	}
	return args, nil
}

// execHandler runs a simple command that is not a builtin or a function.
func (s *inProcessShell) execHandler(next interp.ExecHandlerFunc) interp.ExecHandlerFunc {
	var handle interp.ExecHandlerFunc
	handle = func(ctx context.Context, args []string) error {
		hc := interp.HandlerCtx(ctx)
		switch args[0] {
		case "sh", "/bin/sh":
			if ok, err := s.runSh(ctx, hc, args); ok {
				return err
			}
			return next(ctx, args)
		case "timeout":
			if ok, err := runTimeout(ctx, args, handle); ok {
				return err
			}
			return next(ctx, args)
		}
		path, err := interp.LookPathDir(hc.Dir, hc.Env, args[0])
		if err != nil {
			return next(ctx, args)
		}
		if t, ok := toolAt(filepath.Dir(s.loginShell), path); ok {
			return runTool(hc, t, args)
		}
		if !isShScript(path) {
			return next(ctx, args)
		}
		script, err := s.script(path)
		if err != nil {
			fmt.Fprintf(hc.Stderr, "%s: %v\n", args[0], err)
			return interp.ExitStatus(126)
		}
		if script.needReal {
			return next(ctx, args)
		}
		return s.interpret(ctx, hc, script.file, hc.Stdin, args[1:])
	}
	return handle
}

// runTool runs a machine's Go tool, as the program its shim would start
// would: with the exported variables only.
func runTool(hc interp.HandlerContext, t tool, args []string) error {
	getenv := func(name string) string {
		if v := hc.Env.Get(name); v.Exported && v.IsSet() && v.Kind == expand.String {
			return v.Str
		}
		return ""
	}
	if status := t(getenv, args[1:], hc.Stdout, hc.Stderr); status != 0 {
		return interp.ExitStatus(status)
	}
	return nil
}

// runSh interprets `sh -c COMMAND [NAME [ARG...]]` and `sh -s [--] [ARG...]`;
// ok is false for any other use of sh, which then runs the real sh.
func (s *inProcessShell) runSh(ctx context.Context, hc interp.HandlerContext, args []string) (ok bool, err error) {
	if len(args) < 2 {
		return false, nil
	}
	switch args[1] {
	case "-c":
		if len(args) < 3 {
			return false, nil
		}
		prog, perr := syntax.NewParser().Parse(strings.NewReader(args[2]), "sh -c")
		if perr != nil || needsRealShell(prog) {
			return false, nil
		}
		var params []string
		if len(args) > 4 {
			params = args[4:]
		}
		if len(args) > 3 {
			prog.Name = args[3]
		} else {
			prog.Name = "sh"
		}
		return true, s.interpret(ctx, hc, prog, hc.Stdin, params)
	case "-s":
		params := args[2:]
		if len(params) > 0 && params[0] == "--" {
			params = params[1:]
		}
		// The whole script is read before it runs; its commands then see
		// standard input at its end. (A real sh reads it as it goes.)
		text, rerr := io.ReadAll(hc.Stdin)
		if rerr != nil {
			fmt.Fprintf(hc.Stderr, "sh: reading the script from standard input: %v\n", rerr)
			return true, interp.ExitStatus(2)
		}
		prog, ok := s.stdinScript(text)
		if !ok {
			// The real sh runs it, reporting any syntax error itself.
			return true, runReal(ctx, hc, "/bin/sh", args, bytes.NewReader(text))
		}
		return true, s.interpret(ctx, hc, prog, hc.Stdin, params)
	}
	return false, nil
}

// maxStdinScripts bounds the cache of scripts read by `sh -s`.
const maxStdinScripts = 16

// stdinScript parses a script given to `sh -s`; ok is false when it must
// run in a real shell (a syntax error, background jobs, process ids).
// Parsed scripts are kept by their text: a probe sends every machine the
// same script, and parsing it was a tenth of a probe's cost. A parsed
// script is only read by the interpreter, so runs share it.
func (s *inProcessShell) stdinScript(text []byte) (prog *syntax.File, ok bool) {
	s.mu.Lock()
	c, found := s.stdinScripts[string(text)]
	s.mu.Unlock()
	if found {
		return c.file, !c.needReal
	}
	prog, err := syntax.NewParser().Parse(bytes.NewReader(text), "sh")
	if err != nil {
		return nil, false
	}
	c = cachedScript{file: prog, needReal: needsRealShell(prog)}
	s.mu.Lock()
	if s.stdinScripts == nil || len(s.stdinScripts) >= maxStdinScripts {
		s.stdinScripts = map[string]cachedScript{}
	}
	s.stdinScripts[string(text)] = c
	s.mu.Unlock()
	return prog, !c.needReal
}

// interpret runs prog as a new shell process would: with the exported
// variables only, the same directory and standard streams, and params as
// its positional parameters.
func (s *inProcessShell) interpret(ctx context.Context, hc interp.HandlerContext, prog *syntax.File, stdin io.Reader, params []string) error {
	r, err := interp.New(
		interp.Env(expand.ListEnviron(exported(hc.Env)...)),
		interp.Dir(hc.Dir),
		interp.StdIO(stdin, hc.Stdout, hc.Stderr),
		interp.ExecHandlers(s.execHandler),
		interp.CallHandler(refuseBackgroundEval),
		interp.Params(append([]string{"--"}, params...)...),
	)
	if err != nil {
		return err
	}
	err = r.Run(ctx, prog)
	if err == nil {
		return nil
	}
	var status interp.ExitStatus
	if errors.As(err, &status) || ctx.Err() != nil {
		return err
	}
	// A fatal error of the nested shell is its failure, not the caller's.
	fmt.Fprintf(hc.Stderr, "%s: %v\n", prog.Name, err)
	return interp.ExitStatus(2)
}

// exported lists the variables a child process would get.
func exported(env expand.Environ) []string {
	var list []string
	for name, v := range env.Each {
		if v.Exported && v.IsSet() && v.Kind == expand.String {
			list = append(list, name+"="+v.Str)
		}
	}
	return list
}

// runTimeout runs `timeout DURATION COMMAND [ARG...]` as coreutils does:
// COMMAND gets DURATION, and the status is 124 if it ran out. ok is false
// for options or durations it does not know, which run the real timeout.
func runTimeout(ctx context.Context, args []string, run interp.ExecHandlerFunc) (ok bool, err error) {
	if len(args) < 3 || strings.HasPrefix(args[1], "-") {
		return false, nil
	}
	d, ok := parseDuration(args[1])
	if !ok {
		return false, nil
	}
	if d == 0 {
		return true, run(ctx, args[2:])
	}
	tctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err = run(tctx, args[2:])
	if ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded) {
		return true, interp.ExitStatus(124)
	}
	return true, err
}

// parseDuration reads timeout(1)'s DURATION: a number with an optional
// unit s, m, h or d.
func parseDuration(s string) (time.Duration, bool) {
	unit := time.Second
	switch {
	case strings.HasSuffix(s, "s"):
		s = s[:len(s)-1]
	case strings.HasSuffix(s, "m"):
		s, unit = s[:len(s)-1], time.Minute
	case strings.HasSuffix(s, "h"):
		s, unit = s[:len(s)-1], time.Hour
	case strings.HasSuffix(s, "d"):
		s, unit = s[:len(s)-1], 24*time.Hour
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 1e6 || s == "" || strings.ContainsAny(s, "xXpPnN") {
		return 0, false
	}
	return time.Duration(f * float64(unit)), true
}

// isShScript reports whether path is a file whose first line is #!/bin/sh.
func isShScript(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 64).ReadSlice('\n')
	if err != nil {
		return false
	}
	return string(bytes.TrimRight(line, " \t\r\n")) == "#!/bin/sh"
}

// script parses the #!/bin/sh file at path, once per version of it.
func (s *inProcessShell) script(path string) (cachedScript, error) {
	st, err := os.Stat(path)
	if err != nil {
		return cachedScript{}, err
	}
	s.mu.Lock()
	c, ok := s.scripts[path]
	s.mu.Unlock()
	if ok && c.mod.Equal(st.ModTime()) && c.size == st.Size() {
		return c, nil
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return cachedScript{}, err
	}
	file, err := syntax.NewParser().Parse(bytes.NewReader(text), path)
	if err != nil {
		return cachedScript{}, err
	}
	c = cachedScript{mod: st.ModTime(), size: st.Size(), file: file, needReal: needsRealShell(file)}
	s.mu.Lock()
	if s.scripts == nil {
		s.scripts = map[string]cachedScript{}
	}
	s.scripts[path] = c
	s.mu.Unlock()
	return c, nil
}

// runReal runs args as a real process with stdin, for commands the
// interpreter hands back to a real shell.
func runReal(ctx context.Context, hc interp.HandlerContext, path string, args []string, stdin io.Reader) error {
	cmd := exec.CommandContext(ctx, path, args[1:]...)
	cmd.Args[0] = args[0]
	cmd.Env = exported(hc.Env)
	cmd.Dir = hc.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, hc.Stdout, hc.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = killTimeout
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return interp.ExitStatus(128 + int(ws.Signal()))
		}
		return interp.ExitStatus(exit.ExitCode())
	case errors.Is(err, exec.ErrWaitDelay):
		return nil
	default:
		fmt.Fprintf(hc.Stderr, "%s: %v\n", args[0], err)
		return interp.ExitStatus(127)
	}
}

// runLoginShell runs command with the real login shell, in a process
// group of its own, as the server does in real-shell mode; cancelling ctx
// kills the group. Detached processes it starts outlive it, and the
// session lasts while anything holds its output open, as with sshd.
func runLoginShell(ctx context.Context, loginShell, command string, env []string, dir string,
	stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	cmd := exec.Command(loginShell, "-c", command)
	cmd.Env, cmd.Dir = env, dir
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		return 255, err
	}
	if err := cmd.Start(); err != nil {
		return 255, err
	}
	go func() {
		io.Copy(in, stdin)
		in.Close()
	}()
	stop := context.AfterFunc(ctx, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	defer stop()
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 255, err
	}
	return 0, nil
}

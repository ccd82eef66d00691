//go:build unix

package sshtest

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// signals maps SSH signal names (RFC 4254 6.10) to this system's.
var signals = map[string]os.Signal{
	"ABRT": syscall.SIGABRT, "ALRM": syscall.SIGALRM, "FPE": syscall.SIGFPE,
	"HUP": syscall.SIGHUP, "ILL": syscall.SIGILL, "INT": syscall.SIGINT,
	"KILL": syscall.SIGKILL, "PIPE": syscall.SIGPIPE, "QUIT": syscall.SIGQUIT,
	"SEGV": syscall.SIGSEGV, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2,
}

// inNewGroup makes cmd lead a process group of its own, so that a signal
// reaches the children it starts too.
func inNewGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to the process group p leads.
func signalGroup(p *os.Process, sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		syscall.Kill(-p.Pid, s)
	}
}

// ProcessRuns reports whether process pid of this machine runs, for tests
// that check a command was stopped. A zombie waiting for its reaper does
// not count: in a container, init may take seconds to reap one.
func ProcessRuns(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	// The state follows the command name, which is in parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

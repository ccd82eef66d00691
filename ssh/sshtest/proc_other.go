//go:build !unix

package sshtest

import (
	"os"
	"os/exec"
)

// signals are the SSH signals this system can deliver.
var signals = map[string]os.Signal{"KILL": os.Kill, "INT": os.Interrupt}

// inNewGroup does nothing where there are no process groups: signals
// reach the shell alone.
func inNewGroup(cmd *exec.Cmd) {}

func signalGroup(p *os.Process, sig os.Signal) { p.Signal(sig) }

// ProcessRuns reports whether process pid of this machine runs.
func ProcessRuns(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	p.Release()
	return true
}

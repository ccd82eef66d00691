package sshtest

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

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

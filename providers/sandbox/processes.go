package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// stopProcesses ends every process whose environment says it was started
// on a machine under machinesDir (GPULAYER_SANDBOX_MACHINE=machinesDir...):
// SIGTERM, then SIGKILL for those still there after a grace period. On
// systems without /proc there is nothing to find and nothing is done.
func stopProcesses(machinesDir string) error {
	pids := walkedUnder(machinesDir)
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGTERM)
	}
	deadline := time.Now().Add(3 * time.Second)
	for len(pids) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		pids = walkedUnder(machinesDir)
	}
	var errs []error
	for _, p := range pids {
		if err := syscall.Kill(p, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("sandbox: stopping pid %d: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// machineProcess is a live process started on a sandbox machine.
type machineProcess struct {
	pid     int
	environ []byte // NUL-separated, as /proc/PID/environ holds it
}

// getenv returns the value of the variable name in the process's
// environment, and whether it is set.
func (p machineProcess) getenv(name string) (string, bool) {
	for kv := range bytes.SplitSeq(p.environ, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(name+"=")); ok {
			return string(v), true
		}
	}
	return "", false
}

// sandboxProcess is a process started on a machine of some sandbox, and
// that machine's directory.
type sandboxProcess struct {
	machineProcess
	dir []byte
}

// walkProcesses lists, by pid, the live processes other than this one
// that carry GPULAYER_SANDBOX_MACHINE, reading every process's
// environment: what the index (procindex.go) must agree with, and what
// stopping a sandbox trusts.
func walkProcesses() []sandboxProcess {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var procs []sandboxProcess
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		if len(env) == 0 {
			env = settledEnviron(pid)
		}
		dir, found := machineOf(env)
		if !found || zombie(pid) {
			continue
		}
		procs = append(procs, sandboxProcess{machineProcess: machineProcess{pid: pid, environ: env}, dir: dir})
	}
	slices.SortFunc(procs, func(a, b sandboxProcess) int { return a.pid - b.pid })
	return procs
}

// walkedUnder lists, by pid, the processes of machines under machinesDir
// that a walk of every process finds: stopping a sandbox trusts no index.
func walkedUnder(machinesDir string) []int {
	var pids []int
	for _, p := range walkProcesses() {
		if bytes.HasPrefix(p.dir, []byte(machinesDir)) {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

func pidsOf(procs []machineProcess) []int {
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.pid
	}
	return pids
}

// settledEnviron reads the environment of a process that showed none.
// Kernel threads have none; a user process shows none while it is in
// execve (between losing its old memory and setting up the new one), and
// a process just launched with `sh -c 'VAR=x setsid prog &'` passes
// through two execs. Reading it again a moment later keeps a launched
// process from blinking out of nvidia-smi's view, or out of
// stopProcesses' sight, in that window.
func settledEnviron(pid int) []byte {
	if kernelThread(pid) {
		return nil
	}
	path := "/proc/" + strconv.Itoa(pid) + "/environ"
	for range 20 {
		time.Sleep(500 * time.Microsecond)
		env, err := os.ReadFile(path)
		if err != nil || len(env) > 0 {
			return env
		}
	}
	return nil
}

// kernelThread reports whether pid is a kernel thread (PF_KTHREAD in the
// flags of /proc/PID/stat), or is gone.
func kernelThread(pid int) bool {
	const pfKthread = 0x00200000
	fields, ok := statFields(pid)
	if !ok || len(fields) < 7 {
		return true
	}
	flags, err := strconv.ParseUint(string(fields[6]), 10, 64)
	return err != nil || flags&pfKthread != 0
}

// zombie reports whether pid has ended but was not reaped, or is gone.
func zombie(pid int) bool {
	fields, ok := statFields(pid)
	return !ok || len(fields) == 0 || string(fields[0]) == "Z"
}

// statFields are the fields of /proc/PID/stat after the command name
// (state, ppid, pgrp, session, tty_nr, tpgid, flags, ...); the name is
// skipped up to its last ')', since it may hold blanks and parentheses.
func statFields(pid int) ([][]byte, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil, false
	}
	return bytes.Fields(stat[i+1:]), true
}

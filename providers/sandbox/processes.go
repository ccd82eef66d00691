package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// stopProcesses ends every process whose environment says it was started
// on a machine under machinesDir (GPULAYER_SANDBOX_MACHINE=machinesDir...):
// SIGTERM, then SIGKILL for those still there after a grace period. On
// systems without /proc there is nothing to find and nothing is done.
func stopProcesses(machinesDir string) error {
	under := func(machine []byte) bool { return bytes.HasPrefix(machine, []byte(machinesDir)) }
	pids := pidsOf(machineProcesses(under))
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGTERM)
	}
	deadline := time.Now().Add(3 * time.Second)
	for len(pids) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		pids = pidsOf(machineProcesses(under))
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

// machineProcesses lists, by pid, the live (not zombie) processes other
// than this one whose GPULAYER_SANDBOX_MACHINE value machine accepts.
// Every process started through a machine's SSH server inherits that
// variable; it is how a machine's processes are told from the others' on
// the same computer.
func machineProcesses(machine func(dir []byte) bool) []machineProcess {
	var procs []machineProcess
	for _, p := range walks.get() {
		if machine(p.dir) {
			procs = append(procs, p.machineProcess)
		}
	}
	return procs
}

// walks coalesces the walks of /proc that machines make at the same
// moment: every machine of a fleet probed at once runs nvidia-smi, whose
// answer walks every process of this computer, where all the machines'
// processes are (64 machines: 64 walks of the 64 machines' processes). A
// walk serves every caller that asked before it began, so each still
// sees what ran when it asked or later, and 64 callers cost a few walks.
var walks processWalks

type processWalks struct {
	mu      sync.Mutex
	running bool
	// next is the walk the callers that asked while one ran wait for.
	next *processWalk
	// made counts the walks made, for the test that they are shared.
	made int
}

type processWalk struct {
	done  chan struct{}
	procs []sandboxProcess
}

// sandboxProcess is a process started on a machine of some sandbox, and
// that machine's directory.
type sandboxProcess struct {
	machineProcess
	dir []byte
}

// get returns the processes of a walk begun after it was called.
func (w *processWalks) get() []sandboxProcess {
	w.mu.Lock()
	if w.next == nil {
		w.next = &processWalk{done: make(chan struct{})}
	}
	walk := w.next
	if !w.running {
		w.running, w.next = true, nil
		go w.run(walk)
	}
	w.mu.Unlock()
	<-walk.done
	return walk.procs
}

// run makes walk, then the one callers asked for meanwhile, until none is
// asked for.
func (w *processWalks) run(walk *processWalk) {
	for walk != nil {
		walk.procs = walkProcesses()
		close(walk.done)
		w.mu.Lock()
		w.made++
		walk, w.next = w.next, nil
		w.running = walk != nil
		w.mu.Unlock()
	}
}

// walkProcesses lists, by pid, the live processes other than this one
// that carry GPULAYER_SANDBOX_MACHINE.
func walkProcesses() []sandboxProcess {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	marker := []byte(machineEnv + "=")
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
		var dir []byte
		found := false
		for kv := range bytes.SplitSeq(env, []byte{0}) {
			if d, ok := bytes.CutPrefix(kv, marker); ok {
				dir, found = d, true
				break
			}
		}
		if !found || zombie(pid) {
			continue
		}
		procs = append(procs, sandboxProcess{machineProcess: machineProcess{pid: pid, environ: env}, dir: dir})
	}
	slices.SortFunc(procs, func(a, b sandboxProcess) int { return a.pid - b.pid })
	return procs
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

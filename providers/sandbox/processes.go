package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// stopProcesses ends every process whose environment says it was started
// on a machine under machinesDir (GPULAYER_SANDBOX_MACHINE=machinesDir...):
// SIGTERM, then SIGKILL for those still there after a grace period. On
// systems without /proc there is nothing to find and nothing is done.
func stopProcesses(machinesDir string) error {
	pids := sandboxProcesses(machinesDir)
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGTERM)
	}
	deadline := time.Now().Add(3 * time.Second)
	for len(pids) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		pids = sandboxProcesses(machinesDir)
	}
	var errs []error
	for _, p := range pids {
		if err := syscall.Kill(p, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("sandbox: stopping pid %d: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// sandboxProcesses lists live (not zombie) processes started on the
// sandbox's machines.
func sandboxProcesses(machinesDir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	marker := []byte("GPULAYER_SANDBOX_MACHINE=" + machinesDir)
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		found := false
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.HasPrefix(kv, marker) {
				found = true
				break
			}
		}
		if !found || zombie(pid) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

func zombie(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z'
}

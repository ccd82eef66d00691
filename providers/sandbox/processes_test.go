package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// TestProcessWalksAreSharedAndNeverStale: callers asking at once share
// walks of /proc (far fewer walks than callers), and every caller that
// asks once a process started sees it, even while a walk begun before it
// started is in flight.
func TestProcessWalksAreSharedAndNeverStale(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "machine")
	ours := func(d []byte) bool { return string(d) == dir }
	walks.mu.Lock()
	before := walks.made
	walks.mu.Unlock()

	const batch = 32
	var wg sync.WaitGroup
	for range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			machineProcesses(ours)
		}()
	}
	proc := exec.Command("sleep", "30")
	proc.Env = append(os.Environ(), machineEnv+"="+dir)
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		proc.Process.Kill()
		proc.Wait()
	}()
	seen := make(chan bool, batch)
	for range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen <- slices.Contains(pidsOf(machineProcesses(ours)), proc.Process.Pid)
		}()
	}
	wg.Wait()
	close(seen)
	for ok := range seen {
		if !ok {
			t.Fatal("a caller that asked after the process started did not see it")
		}
	}
	walks.mu.Lock()
	made := walks.made - before
	walks.mu.Unlock()
	if made >= 2*batch {
		t.Errorf("%d callers made %d walks: none was shared", 2*batch, made)
	}
	t.Logf("%d callers, %d walks", 2*batch, made)
}

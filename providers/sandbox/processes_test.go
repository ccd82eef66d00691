package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestIndexSyncsAreSharedAndNeverStale: callers asking at once share
// the index's full walks (a few, not one per caller), and every caller
// that asks once a process started sees it, even while a sync begun
// before it started is in flight.
func TestIndexSyncsAreSharedAndNeverStale(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "machine")
	ours := func(d []byte) bool { return string(d) == dir }
	index.mu.Lock()
	before, walksBefore := index.syncs, index.walks
	// As after an idle while: the first sync walks every process.
	index.syncedAt = time.Time{}
	index.mu.Unlock()

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
	index.mu.Lock()
	made, walks := index.syncs-before, index.walks-walksBefore
	index.mu.Unlock()
	if walks > 2 {
		t.Errorf("%d callers made %d full walks: they were not shared", 2*batch, walks)
	}
	t.Logf("%d callers, %d syncs, %d full walks", 2*batch, made, walks)
}

// machines is a two-machine sandbox directory and the in-process shell
// its sessions run in, without SSH: what the index sees of processes the
// machines launch.
type machines struct {
	sh  *inProcessShell
	ms  []Machine
	env [][]string
}

func prepareMachines(t *testing.T) machines {
	t.Helper()
	dir := t.TempDir()
	var ms machines
	for i := range 2 {
		m, env, err := Prepare(dir, i, 2)
		if err != nil {
			t.Fatal(err)
		}
		ms.ms, ms.env = append(ms.ms, m), append(ms.env, env)
	}
	ms.sh = &inProcessShell{loginShell: filepath.Join(dir, "bin", "sandbox-shell")}
	t.Cleanup(func() {
		if err := stopProcesses(filepath.Join(dir, "machines") + "/"); err != nil {
			t.Error(err)
		}
	})
	return ms
}

// run runs command in a session of machine i and returns its stdout.
func (ms machines) run(t *testing.T, i int, command string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errOut lockedBuffer
	m := ms.ms[i]
	status, err := ms.sh.Run(ctx, command, ms.env[i], filepath.Join(m.Dir, "home"), strings.NewReader(""), &out, &errOut)
	if err != nil || status != 0 {
		t.Fatalf("%s: %q: status %d, %v, stderr %q", m.Name, command, status, err, errOut.String())
	}
	return out.String()
}

// busyOf is what a machine's nvidia-smi reports as using its GPUs, read
// from procs: "PID:DEVICES" by pid.
func busyOf(procs []machineProcess) []string {
	var out []string
	for _, p := range procs {
		if d, ok := p.getenv("CUDA_VISIBLE_DEVICES"); ok && d != "" {
			out = append(out, fmt.Sprintf("%d:%s", p.pid, d))
		}
	}
	return out
}

// walked is what the walk of every process finds of machine dir.
func walked(dir string) []machineProcess {
	var out []machineProcess
	for _, p := range walkProcesses() {
		if string(p.dir) == dir {
			out = append(out, p.machineProcess)
		}
	}
	return out
}

// agree checks that the index answers, for every machine, what a walk
// of every process answers at the same moment: the same processes and
// the same devices. A moment is one where two walks around the index's
// answer agree (a process may start or end in between); it returns the
// answer for the first machine.
func (ms machines) agree(t *testing.T, moment string) []string {
	t.Helper()
	var first []string
	for _, m := range ms.ms {
		ours := func(d []byte) bool { return string(d) == m.Dir }
		for try := 0; ; try++ {
			before := busyOf(walked(m.Dir))
			beforePids := pidsOf(walked(m.Dir))
			got := machineProcesses(ours)
			after := busyOf(walked(m.Dir))
			afterPids := pidsOf(walked(m.Dir))
			if !reflect.DeepEqual(before, after) || !reflect.DeepEqual(beforePids, afterPids) {
				if try > 50 {
					t.Fatalf("%s, %s: the machine's processes never stood still", moment, m.Name)
				}
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if !reflect.DeepEqual(pidsOf(got), afterPids) || !reflect.DeepEqual(busyOf(got), after) {
				t.Fatalf("%s, %s: the index answers processes %v busy %v; a walk %v busy %v",
					moment, m.Name, pidsOf(got), busyOf(got), afterPids, after)
			}
			if first == nil && m.Dir == ms.ms[0].Dir {
				first = append([]string{}, after...)
			}
			break
		}
	}
	return first
}

// waitFor polls until the first machine's busy processes, as the index
// answers them (checked against the walk each time), satisfy ok.
func (ms machines) waitFor(t *testing.T, moment string, ok func(busy []string) bool) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		busy := ms.agree(t, moment)
		if ok(busy) {
			return busy
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: busy processes %v", moment, busy)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// devices lists the device lists of busy, sorted.
func devices(busy []string) []string {
	var out []string
	for _, b := range busy {
		_, d, _ := strings.Cut(b, ":")
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// TestIndexAgreesWithAWalkOfEveryProcess: the index's answers, at every
// moment of a machine's processes' lives (none yet, launched, forking
// children that outlive their parent, execing with other devices, killed,
// ending by themselves, a process started outside a session), are those
// of the walk of every process's environment it replaced.
func TestIndexAgreesWithAWalkOfEveryProcess(t *testing.T) {
	ms := prepareMachines(t)
	if busy := ms.agree(t, "start"); len(busy) != 0 {
		t.Fatalf("before any launch: %v", busy)
	}

	// Launched as gpulayer launches (detached, in the background: the real
	// login shell runs it).
	out := ms.run(t, 0, "CUDA_VISIBLE_DEVICES=0 setsid sleep 60 </dev/null >/dev/null 2>&1 & echo $!")
	leader, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("launch printed %q", out)
	}
	ms.waitFor(t, "launched", func(b []string) bool { return slices.Equal(devices(b), []string{"0"}) })
	// A process on the other machine is that machine's only.
	ms.run(t, 1, "CUDA_VISIBLE_DEVICES=5 setsid sleep 60 </dev/null >/dev/null 2>&1 &")

	// Children that keep running after their parent ended (reparented),
	// and one forked later, after the index had seen its parent.
	ms.run(t, 0, `CUDA_VISIBLE_DEVICES=1 setsid sh -c 'sleep 60 & sleep 60 & exit 0' </dev/null >/dev/null 2>&1 &`)
	ms.run(t, 0, `CUDA_VISIBLE_DEVICES=2 setsid sh -c 'sleep 0.3; sleep 60 & wait' </dev/null >/dev/null 2>&1 &`)
	// The later child: its parent sh waits on it, so both hold GPU 2.
	ms.waitFor(t, "a child forked later", func(b []string) bool {
		return slices.Equal(devices(b), []string{"0", "1", "1", "2", "2"})
	})

	// A process that execs with other devices holds those.
	ms.run(t, 0, `CUDA_VISIBLE_DEVICES=3 setsid sh -c 'sleep 0.2; exec env CUDA_VISIBLE_DEVICES=4 sleep 60' </dev/null >/dev/null 2>&1 &`)
	ms.waitFor(t, "exec", func(b []string) bool {
		d := devices(b)
		return slices.Contains(d, "4") && !slices.Contains(d, "3")
	})

	// Killed: GPU 0 is free again at the next answer.
	if err := syscall.Kill(leader, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ms.waitFor(t, "kill", func(b []string) bool { return !slices.Contains(devices(b), "0") })

	// Ending by itself.
	ms.run(t, 0, "CUDA_VISIBLE_DEVICES=6 setsid sleep 0.3 </dev/null >/dev/null 2>&1 &")
	ms.waitFor(t, "exit", func(b []string) bool { return !slices.Contains(devices(b), "6") })

	// Started outside any session, by this program (as the walk saw it).
	startOn(t, ms.ms[0].Dir, "7")
	ms.waitFor(t, "outside a session", func(b []string) bool { return slices.Contains(devices(b), "7") })
}

// TestIndexReadsOnlyWhatChanged: once built, the index does not read
// every process again at each call; a call reads its own machine's
// processes, and a sync only processes born since the last one.
func TestIndexReadsOnlyWhatChanged(t *testing.T) {
	ms := prepareMachines(t)
	ms.run(t, 0, "CUDA_VISIBLE_DEVICES=0 setsid sleep 60 </dev/null >/dev/null 2>&1 &")
	ms.waitFor(t, "launched", func(b []string) bool { return len(b) == 1 })
	names, err := procNames()
	if err != nil {
		t.Skip("no /proc:", err)
	}
	ours := func(d []byte) bool { return string(d) == ms.ms[0].Dir }
	machineProcesses(ours)
	index.mu.Lock()
	reads, walks := index.reads, index.walks
	index.mu.Unlock()
	const calls = 50
	for range calls {
		if got := machineProcesses(ours); len(busyOf(got)) != 1 {
			t.Fatalf("busy %v", busyOf(got))
		}
	}
	index.mu.Lock()
	reads, walks = index.reads-reads, index.walks-walks
	index.mu.Unlock()
	// Other programs on this computer start processes meanwhile; each is
	// read once. A walk per call would read every process each time.
	if walks > 1 || reads > calls*len(names)/4 {
		t.Errorf("%d calls: %d full walks, %d processes read (of %d listed); want at most 1 walk and few reads", calls, walks, reads, len(names))
	}
	t.Logf("%d calls: %d walks, %d reads, %d processes listed", calls, walks, reads, len(names))
}

func TestHandedOutCoversTheCycleOfPids(t *testing.T) {
	for _, tc := range []struct {
		pid, from, to int
		want          bool
	}{
		{5, 4, 9, true}, {4, 4, 9, false}, {9, 4, 9, true}, {10, 4, 9, false},
		{7, 7, 7, false}, // nothing handed out
		{32000, 31000, 400, true}, {350, 31000, 400, true}, {500, 31000, 400, false}, {31000, 31000, 400, false},
	} {
		if got := handedOut(tc.pid, tc.from, tc.to); got != tc.want {
			t.Errorf("handedOut(%d, %d, %d) = %v, want %v", tc.pid, tc.from, tc.to, got, tc.want)
		}
	}
}

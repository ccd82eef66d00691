package sandbox

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"
)

// index is what this program knows of the processes of this computer:
// for each, the sandbox machine whose GPULAYER_SANDBOX_MACHINE it carries,
// if any. A machine's nvidia-smi used to walk every process's environment
// on every call (at 64 busy machines, most of a probe's cost on the
// sandbox's side); the index reads a process once, when it first appears,
// and afterwards each call reads again only its own machine's processes.
//
// What keeps it up to date without reading every process:
//
//   - Births. The kernel hands out pids in a cycle, and /proc/loadavg
//     names the last one. A pid handed out since the previous sync lies
//     between the last pids read then and now, so only those (and pids
//     not listed before) are read; a pid outside that range that is
//     listed both times is the same process. When the last pid has not
//     moved, nothing was born and /proc is not even listed.
//   - Exec. A process's environment changes only when it execs. Its own
//     machine re-reads it at every call (machineProcesses), as the walk
//     did, so a member that execs with other devices, or without the
//     variable, is seen at once. A child of this program (the shells and
//     programs the machines start, a test's own) can be read in the
//     moment between its fork and its exec, when it still shows this
//     program's environment: it is read again at every sync until it
//     shows the variable, or ends.
//   - Deaths. A member that ended or is a zombie is dropped by the call
//     that re-reads it; a pid not listed any more leaves the index.
//   - A full cycle of pids between two syncs would hide a reused pid, so
//     an index older than maxIndexAge is rebuilt from a full walk. A
//     cycle (32768 pids by default) within that time needs tens of
//     thousands of forks a second.
//
// It trusts exactly what the walk trusted, and no more: a process is a
// machine's when its current /proc/PID/environ says so. It trusts less in
// one case, documented in docs/sandbox.md: a process that is not this
// program's child and carries no machine's variable, and later execs with
// one without forking, is not seen until its pid is handed out again (a
// process can only fake being a machine's; the machines' own all
// descend from this program with the variable set at their first exec).
// Nothing is kept across restarts of the sandbox: a new program builds
// its index from a full walk, so processes an earlier sandbox left behind
// are found as the walk found them.
var index processIndex

// maxIndexAge bounds how old the index may be before a sync walks every
// process again (see index).
const maxIndexAge = time.Second

type processIndex struct {
	mu      sync.Mutex
	running bool
	// next is the sync the callers that asked while one ran wait for.
	next *indexSync
	// dirty are pids a caller found changed (ended, or now another
	// machine's, or none): the next sync reads them again.
	dirty map[int]bool
	// procs is the index, replaced whole by each sync; nil before the
	// first.
	procs map[int]indexed
	// lastPID is /proc/loadavg's last pid, read before the listing of the
	// last sync; syncedAt when that sync began.
	lastPID  int
	syncedAt time.Time
	// syncs, walks and reads count what syncs did, for the tests.
	syncs, walks, reads int
}

// indexed is what the index knows of one process.
type indexed struct {
	dir     string // its machine's directory; "" for none
	recheck bool   // this program's child without the variable: may not have exec'd yet
}

type indexSync struct{ done chan struct{} }

// sync returns once a sync of the index begun after it was called is
// done. Callers that ask while one runs share the next.
func (x *processIndex) sync() {
	x.mu.Lock()
	if x.next == nil {
		x.next = &indexSync{done: make(chan struct{})}
	}
	s := x.next
	if !x.running {
		x.running, x.next = true, nil
		go x.run(s)
	}
	x.mu.Unlock()
	<-s.done
}

// run makes sync s, then the one callers asked for meanwhile, until none
// is asked for.
func (x *processIndex) run(s *indexSync) {
	for s != nil {
		x.update()
		close(s.done)
		x.mu.Lock()
		x.syncs++
		s, x.next = x.next, nil
		x.running = s != nil
		x.mu.Unlock()
	}
}

// update brings the index up to date. Only run calls it, one at a time;
// it reads the index without the lock and replaces it under the lock.
func (x *processIndex) update() {
	x.mu.Lock()
	dirty := x.dirty
	x.dirty = nil
	old, prev, syncedAt := x.procs, x.lastPID, x.syncedAt
	x.mu.Unlock()

	begun := time.Now()
	first, ok := lastPID()
	full := !ok || old == nil || begun.Sub(syncedAt) > maxIndexAge
	if !full && first == prev && len(dirty) == 0 && !anyRecheck(old) {
		// No pid was handed out since the last listing: no process was
		// born, and those that ended are dropped by their callers.
		x.mu.Lock()
		x.syncedAt = begun
		x.mu.Unlock()
		return
	}
	names, err := procNames()
	var procs map[int]indexed
	reads := 0
	if err == nil {
		// Read after the listing too: a pid handed out between the two
		// reads, or while listing, may be an old pid reused.
		after, _ := lastPID()
		self := os.Getpid()
		procs = make(map[int]indexed, len(names))
		for _, name := range names {
			pid, err := strconv.Atoi(name)
			if err != nil || pid == self {
				continue
			}
			if p, known := old[pid]; known && !full && !p.recheck && !dirty[pid] && !handedOut(pid, prev, after) {
				procs[pid] = p
				continue
			}
			procs[pid] = readIndexed(pid, self)
			reads++
		}
	}
	x.mu.Lock()
	x.procs, x.lastPID, x.syncedAt = procs, first, begun
	x.reads += reads
	if full {
		x.walks++
	}
	x.mu.Unlock()
}

func anyRecheck(procs map[int]indexed) bool {
	for _, p := range procs {
		if p.recheck {
			return true
		}
	}
	return false
}

// handedOut reports whether pid may have been handed out after the last
// pid was from and by the time it was to: the pids of the cycle after
// from up to to.
func handedOut(pid, from, to int) bool {
	if from <= to {
		return from < pid && pid <= to
	}
	return pid > from || pid <= to
}

// lastPID is the pid the kernel handed out last in this pid namespace,
// the fifth field of /proc/loadavg.
func lastPID() (int, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	fields := bytes.Fields(b)
	if len(fields) < 5 {
		return 0, false
	}
	pid, err := strconv.Atoi(string(fields[4]))
	return pid, err == nil
}

// procNames lists /proc: one name per process (thread group), without
// opening any.
func procNames() ([]string, error) {
	f, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// readIndexed reads which machine pid is of, from its environment.
func readIndexed(pid, self int) indexed {
	env, ok := readEnviron(pid)
	if !ok {
		return indexed{}
	}
	if dir, ok := machineOf(env); ok {
		return indexed{dir: string(dir)}
	}
	// Without the variable, a child of this program may be between its
	// fork and its exec: it shows our environment until it execs.
	fields, ok := statFields(pid)
	return indexed{recheck: ok && len(fields) > 1 && string(fields[1]) == strconv.Itoa(self)}
}

// readEnviron reads pid's environment as the walk does: one that shows
// none is read again a moment later (settledEnviron), unless it is a
// zombie, which never execs again. ok is false when it is gone, cannot be
// read, or has ended.
func readEnviron(pid int) ([]byte, bool) {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return nil, false
	}
	if len(env) == 0 {
		if zombie(pid) {
			return nil, false
		}
		env = settledEnviron(pid)
	}
	return env, true
}

// machineOf returns the value of GPULAYER_SANDBOX_MACHINE in env.
func machineOf(env []byte) ([]byte, bool) {
	marker := []byte(machineEnv + "=")
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if d, ok := bytes.CutPrefix(kv, marker); ok {
			return d, true
		}
	}
	return nil, false
}

// machineProcesses lists, by pid, the live (not zombie) processes other
// than this one whose GPULAYER_SANDBOX_MACHINE value machine accepts, as
// they are now: the index names the candidates, and each is read again.
// Every process started through a machine's SSH server inherits that
// variable; it is how a machine's processes are told from the others' on
// the same computer.
func machineProcesses(machine func(dir []byte) bool) []machineProcess {
	index.sync()
	index.mu.Lock()
	var candidates []int
	for pid, p := range index.procs {
		if p.dir != "" && machine([]byte(p.dir)) {
			candidates = append(candidates, pid)
		}
	}
	index.mu.Unlock()
	slices.Sort(candidates)
	var procs []machineProcess
	var changed []int
	for _, pid := range candidates {
		env, ok := readEnviron(pid)
		dir, found := machineOf(env)
		if !ok || !found || !machine(dir) || zombie(pid) {
			changed = append(changed, pid)
			continue
		}
		procs = append(procs, machineProcess{pid: pid, environ: env})
	}
	if len(changed) > 0 {
		index.mu.Lock()
		if index.dirty == nil {
			index.dirty = map[int]bool{}
		}
		for _, pid := range changed {
			index.dirty[pid] = true
		}
		index.mu.Unlock()
	}
	return procs
}

package sandbox

import (
	"os"
	"runtime/debug"
)

// serveGCPercent is the GOGC a process that serves a sandbox runs with.
// Its live heap is small (a few tens of MiB for 500 machines) but it
// allocates fast: every session interprets a shell script, whose words,
// environments and compiled patterns are garbage at once. At the default
// 100 the collector took ~15 % of the sandbox's CPU in a 500-machine
// probe; at 400 the heap peaks near 180 MiB (90 MiB before) and the
// sandbox spends about 15 % less CPU per probe (benchmarks/results/
// 2026-12-03-speed/probe). 1000 bought no more, for twice the memory
// again.
const serveGCPercent = 400

// TuneGC sets the garbage collector of a process whose work is serving a
// sandbox (gpulayer sandbox, the benchmarks' sandbox processes) for that
// work: fewer collections for a larger heap. A GOGC the user set wins.
// It changes the whole process, so a library user that does other work
// (a test) does not call it.
func TuneGC() {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(serveGCPercent)
}

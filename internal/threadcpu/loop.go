// Package threadcpu measures the CPU time a benchmark's own thread spends,
// which other processes on a shared machine do not inflate by taking the
// core away (the wall time, ns/op, they do).
package threadcpu

import (
	"runtime"
	"testing"
	"time"
)

// Loop runs f in b.Loop on one locked OS thread and reports, next to ns/op
// (wall time), cpu-ns/op: the thread's CPU time per call.
func Loop(b *testing.B, f func()) { loop(b, f, false) }

// ProcessLoop is Loop for work that runs on more than one goroutine (a
// file read while another is parsed, pieces parsed at once): besides
// cpu-ns/op, the calling thread's share, it reports proc-cpu-ns/op, the
// whole process's CPU time per call, which counts the other goroutines
// and the garbage collector too, and which other processes on a shared
// machine do not inflate either.
func ProcessLoop(b *testing.B, f func()) { loop(b, f, true) }

func loop(b *testing.B, f func(), process bool) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, ok := threadCPU()
	var pstart time.Duration
	pok := false
	if process {
		pstart, pok = processCPU()
	}
	n := 0
	for b.Loop() {
		f()
		n++
	}
	if end, ok2 := threadCPU(); ok && ok2 && n > 0 {
		b.ReportMetric(float64(end-start)/float64(n), "cpu-ns/op")
	}
	if !pok {
		return
	}
	if end, ok2 := processCPU(); ok2 && n > 0 {
		b.ReportMetric(float64(end-pstart)/float64(n), "proc-cpu-ns/op")
	}
}

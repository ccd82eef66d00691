//go:build linux

package threadcpu

import (
	"syscall"
	"time"
)

// threadCPU is the CPU time the calling OS thread has used (RUSAGE_THREAD,
// 1 on Linux). On a shared machine it separates the work a benchmark does
// from the time it waits for a core.
func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// processCPU is the CPU time the whole process has used (RUSAGE_SELF):
// every thread, the garbage collector's included.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/reconcile/apply"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// BenchmarkWatchRoundNothingToDo64 is one watch round on a 64-machine
// sandbox fleet whose every machine runs a node (a 48-node job on the
// machines of one torch version, a 16-node one on the others), with
// nothing to do: load the configuration and state, probe the 64 machines
// (asking about the 64 processes), plan and keep the lifecycle's part,
// lock, reload, renew the lease, unlock. The sandbox runs in a process of
// its own, as machines would, so that this process's CPU time is
// gpulayer's alone. Each iteration is one watcher's 6 rounds, twice
// (--forever, then --until-complete); reported are medians:
//
//	round-ms      a --forever round after the first (the SSH connections
//	              are the pool's, from the round before)
//	round-cpu-ms  this process's CPU time (user + system) in that round
//	sandbox-cpu-ms  the sandbox process's CPU time in that round: the 64
//	              machines' side of the probe, all on this computer
//	first-ms      the first round of a watcher, which dials every machine
//	settle-ms     a --until-complete round after the first: it plans once
//	              more to decide whether it is done
func BenchmarkWatchRoundNothingToDo64(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "fleet")
	sb, out := gpulayerProcess(b, b.TempDir(), "sandbox", "--hosts", "64", "--dir", dir)
	for out.Scan() && !strings.HasPrefix(out.Text(), "Press Ctrl-C") {
	}
	b.Cleanup(func() {
		runCmd(b, "destroy", dir, "--auto-approve", "--node-parallelism", "64")
		sb.Process.Signal(syscall.SIGINT)
		sb.Wait()
	})
	writeFile(b, filepath.Join(dir, "jobs.hcl"), `
job "wide" {
  nodes         = 48
  gpus_per_node = 1
  launcher      = "plain"
  stop_timeout  = "5s"
  command       = ["sleep", "600"]
}
job "rest" {
  nodes         = 16
  gpus_per_node = 1
  launcher      = "plain"
  stop_timeout  = "5s"
  command       = ["sleep", "600"]
}
`)
	if code, out, errOut := runCmd(b, "apply", dir, "--auto-approve", "--node-parallelism", "64"); code != 0 || !strings.Contains(out, "2 launched") {
		b.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	ctx := context.Background()
	var rounds, cpus, sbCPUs, settles, firsts []time.Duration
	for b.Loop() {
		for _, forever := range []bool{true, false} {
			io, _, _, _ := iostreams.Test()
			opts := &watchOptions{
				f: &factory{IO: io}, in: planInputs{dir: dir, parallelism: probe.DefaultParallelism, timeout: probe.DefaultTimeout},
				interval: 20 * time.Second, forever: forever, json: true, nodeParallel: apply.DefaultParallelism,
				machineWait: DefaultMachineWait, now: time.Now,
			}
			w := newWatcher(opts, state.NewLocal(state.DefaultPath(dir)))
			if err := w.start(ctx); err != nil {
				b.Fatal(err)
			}
			for i := range 6 {
				began, cpu, sbCPU := time.Now(), cpuTime(), processCPU(b, sb.Process.Pid)
				done, err := w.round(ctx)
				took, used, sbUsed := time.Since(began), cpuTime()-cpu, processCPU(b, sb.Process.Pid)-sbCPU
				if err != nil || done {
					b.Fatalf("round %d: done %v, %v", i, done, err)
				}
				switch {
				case i == 0 && forever:
					firsts = append(firsts, took)
				case i == 0:
				case forever:
					rounds, cpus, sbCPUs = append(rounds, took), append(cpus, used), append(sbCPUs, sbUsed)
				default:
					settles = append(settles, took)
				}
			}
			w.release()
			w.close()
		}
	}
	st := loadState(b, dir)
	for _, name := range []string{"wide", "rest"} {
		if j := st.Job(name); j == nil || j.Status != state.JobRunning {
			b.Fatalf("job %s after the rounds: %+v", name, j)
		}
	}
	b.ReportMetric(ms(median(rounds)), "round-ms")
	b.ReportMetric(ms(median(cpus)), "round-cpu-ms")
	b.ReportMetric(ms(median(sbCPUs)), "sandbox-cpu-ms")
	b.ReportMetric(ms(median(firsts)), "first-ms")
	b.ReportMetric(ms(median(settles)), "settle-ms")
}

// cpuTime is the CPU time this process used so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU is the CPU time process pid used so far, user and system
// (fields 14 and 15 of /proc/PID/stat, in clock ticks of 10 ms).
func processCPU(b *testing.B, pid int) time.Duration {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.Atoi(fields[11])
	stime, _ := strconv.Atoi(fields[12])
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

package apply_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/providers/sandbox"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/apply"
)

// BenchmarkApply64Nodes launches a 64-node job on a 64-machine sandbox
// fleet, over SSH, and stops it. Each iteration reports:
//
//	started-ms    launch begins → the last node's process recorded
//	confirmed-ms  launch begins → every node confirmed still running
//	              (this includes the job's start_check, the default)
//	stop-ms       stop begins → every node's processes gone
//
// The refresh (probe) before each apply is not timed; the probe has its
// own benchmark (benchmarks/probe).
func BenchmarkApply64Nodes(b *testing.B) {
	const n = 64
	f := newFleetWith(b, sandbox.Options{Hosts: n, Torch: "2.5.1+cu124"})
	var started, confirmed, stopped []time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		cfg := f.jobs(fmt.Sprintf(`
job "wide" {
  nodes         = %d
  gpus_per_node = 1
  launcher      = "plain"
  stop_timeout  = "5s"
  command       = ["sleep", "600"]
}
`, n))
		p, st, doc := f.plan(cfg)
		ex := f.executor(cfg)
		ex.Opts.Parallelism = n
		var last time.Time
		ex.Opts.Progress = func(ev apply.Event) {
			if ev.Step == apply.StepStarted {
				last = time.Now()
			}
		}
		b.StartTimer()
		begin := time.Now()
		res, err := ex.Apply(context.Background(), st, p, doc)
		end := time.Now()
		b.StopTimer()
		if err != nil || len(res.Failed) > 0 || res.Launched != 1 {
			b.Fatalf("launch: %v %v", err, res.Failed)
		}
		started = append(started, last.Sub(begin))
		confirmed = append(confirmed, end.Sub(begin))

		none := f.jobs("")
		p, st, doc = f.plan(none)
		if p.Job("wide").Action != reconcile.ActionDestroy {
			b.Fatalf("plan %+v", p.Jobs)
		}
		ex = f.executor(none)
		ex.Opts.Parallelism = n
		b.StartTimer()
		begin = time.Now()
		res, err = ex.Apply(context.Background(), st, p, doc)
		stopped = append(stopped, time.Since(begin))
		b.StopTimer()
		if err != nil || res.Stopped != 1 {
			b.Fatalf("stop: %v %+v", err, res)
		}
	}
	b.ReportMetric(ms(median(started)), "started-ms")
	b.ReportMetric(ms(median(confirmed)), "confirmed-ms")
	b.ReportMetric(ms(median(stopped)), "stop-ms")
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

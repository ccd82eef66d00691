// Command plan measures the real `gpulayer plan` over many hosts from
// saved facts: its wall time, CPU time and peak memory (the largest
// resident set the kernel saw, from wait4's rusage), in a process of its
// own as a person runs it.
//
// For each size it writes the inputs BenchmarkPlan plans from
// (reconcile/plantest: N hosts, 50 jobs, facts as full as a probe's, every
// host a DGX-1; written by a child process, see main), then runs, round
// after round,
//
//	gpulayer plan DIR --facts FILE --no-color             (text to a file)
//	gpulayer plan DIR --facts FILE --no-color --out PLAN   (and the saved plan)
//
// alternating which goes first. The binary is built from this tree unless
// -gpulayer names one.
//
//	go run ./benchmarks/plan -hosts 500,5000 -rounds 5
//
// It prints one JSON line per run, then medians.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpulayer/gpulayer/benchmarks/internal/stats"
	"github.com/gpulayer/gpulayer/reconcile/plantest"
)

// run is one measured command.
type run struct {
	Hosts  int     `json:"hosts"`
	Mode   string  `json:"mode"` // "plan" or "plan-out"
	Round  int     `json:"round"`
	WallMS float64 `json:"wall_ms"`
	UserMS float64 `json:"user_ms"`
	SysMS  float64 `json:"sys_ms"`
	// MaxRSSMiB is the peak resident set of the gpulayer process.
	MaxRSSMiB float64 `json:"max_rss_mib"`
	Load1     float64 `json:"load1"`
}

func main() {
	if len(os.Args) == 6 && os.Args[1] == "write" {
		// The inputs are written by a child: Linux counts in a child's
		// peak RSS that of the process it was started from (the vfork
		// parent's high-water mark, recorded at exec), so the process
		// that starts gpulayer must never have held them.
		hosts, _ := strconv.Atoi(os.Args[3])
		jobs, _ := strconv.Atoi(os.Args[4])
		raw, err := os.ReadFile(os.Args[5])
		if err == nil {
			_, err = plantest.Write(os.Args[2], hosts, jobs, string(raw))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "plan benchmark: write:", err)
			os.Exit(1)
		}
		return
	}
	hostsFlag := flag.String("hosts", "500,5000", "comma-separated host counts")
	jobs := flag.Int("jobs", 50, "jobs in the configuration")
	rounds := flag.Int("rounds", 5, "rounds per size")
	binary := flag.String("gpulayer", "", "the gpulayer binary (default: built from this tree)")
	topo := flag.String("topo", filepath.Join("testdata", "topo", "dgx1-v100-8x-nv1-nv2-mlx5-driver440.txt"), "every host's `nvidia-smi topo -m`")
	flag.Parse()
	if err := bench(*hostsFlag, *jobs, *rounds, *binary, *topo); err != nil {
		fmt.Fprintln(os.Stderr, "plan benchmark:", err)
		os.Exit(1)
	}
}

func bench(hostsFlag string, jobs, rounds int, binary, topoPath string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "gpulayer-plan-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if binary == "" {
		binary = filepath.Join(work, "gpulayer")
		build := exec.Command("go", "build", "-o", binary, "./cmd/gpulayer")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("go build: %w", err)
		}
	}
	fmt.Printf("# %s %s/%s, %d CPUs, gpulayer %s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), binary)
	var all []run
	for _, f := range strings.Split(hostsFlag, ",") {
		hosts, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || hosts < 1 {
			return fmt.Errorf("-hosts %q: want positive counts", hostsFlag)
		}
		dir := filepath.Join(work, strconv.Itoa(hosts))
		write := exec.Command(self, "write", dir, strconv.Itoa(hosts), strconv.Itoa(jobs), topoPath)
		write.Stdout, write.Stderr = os.Stderr, os.Stderr
		if err := write.Run(); err != nil {
			return fmt.Errorf("writing the inputs of %d hosts: %w", hosts, err)
		}
		in := plantest.Inputs{Dir: filepath.Join(dir, "config"), Facts: filepath.Join(dir, "facts.json")}
		if st, err := os.Stat(in.Facts); err == nil {
			fmt.Printf("# %d hosts: facts document %.1f MiB\n", hosts, float64(st.Size())/(1<<20))
		}
		modes := []string{"plan", "plan-out"}
		for r := range rounds {
			for k := range modes {
				mode := modes[(k+r)%len(modes)]
				res, err := planOnce(binary, in, work, mode)
				if err != nil {
					return fmt.Errorf("%d hosts, %s: %w", hosts, mode, err)
				}
				res.Hosts, res.Round = hosts, r
				line, _ := json.Marshal(res)
				fmt.Println(string(line))
				all = append(all, res)
			}
		}
	}
	// This process's own peak, which a child's max_rss_mib cannot be
	// below (see main).
	var own syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &own); err == nil {
		fmt.Printf("# this process's peak RSS %.1f MiB\n", float64(own.Maxrss)/1024)
	}
	fmt.Println("# medians: hosts mode wall_ms user+sys_ms max_rss_mib load1")
	for _, f := range strings.Split(hostsFlag, ",") {
		hosts, _ := strconv.Atoi(strings.TrimSpace(f))
		for _, mode := range []string{"plan", "plan-out"} {
			var rs []run
			for _, r := range all {
				if r.Hosts == hosts && r.Mode == mode {
					rs = append(rs, r)
				}
			}
			fmt.Printf("%d %s %.0f %.0f %.1f %.2f\n", hosts, mode,
				stats.Median(rs, func(r run) float64 { return r.WallMS }),
				stats.Median(rs, func(r run) float64 { return r.UserMS + r.SysMS }),
				stats.Median(rs, func(r run) float64 { return r.MaxRSSMiB }),
				stats.Median(rs, func(r run) float64 { return r.Load1 }))
		}
	}
	return nil
}

// planOnce runs one plan and reads its rusage. The plan must place jobs:
// a plan that placed nothing measured nothing.
func planOnce(binary string, in plantest.Inputs, work, mode string) (run, error) {
	out := filepath.Join(work, "plan.txt")
	args := []string{"plan", in.Dir, "--facts", in.Facts, "--no-color"}
	if mode == "plan-out" {
		args = append(args, "--out", filepath.Join(work, "plan.json"))
	}
	f, err := os.Create(out)
	if err != nil {
		return run{}, err
	}
	defer f.Close()
	cmd := exec.Command(binary, args...)
	cmd.Dir = work // state, if any, is looked for here: none
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = f, &stderr
	load := stats.Load1()
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return run{}, fmt.Errorf("%v: %s", err, stderr.String())
	}
	text, err := os.ReadFile(out)
	if err != nil {
		return run{}, err
	}
	if !strings.Contains(string(text), "will be launched") {
		return run{}, fmt.Errorf("the plan launches nothing:\n%.2000s", text)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return run{}, fmt.Errorf("no rusage on %s", runtime.GOOS)
	}
	return run{
		Mode:   mode,
		WallMS: float64(wall.Microseconds()) / 1000,
		UserMS: float64(cmd.ProcessState.UserTime().Microseconds()) / 1000,
		SysMS:  float64(cmd.ProcessState.SystemTime().Microseconds()) / 1000,
		// Linux reports ru_maxrss in KiB.
		MaxRSSMiB: float64(ru.Maxrss) / 1024,
		Load1:     load,
	}, nil
}

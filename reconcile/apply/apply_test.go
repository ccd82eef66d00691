package apply_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/providers/sandbox"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/apply"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/ssh"
	"github.com/gpulayer/gpulayer/ssh/sshtest"
)

// fleet is a sandbox of n machines with the given jobs beside its
// configuration, and the state file of that directory.
type fleet struct {
	t    testing.TB
	sb   *sandbox.Sandbox
	pool *ssh.Pool
	st   *state.Local
}

func newFleet(t testing.TB, n int) *fleet {
	t.Helper()
	return newFleetWith(t, sandbox.Options{Hosts: n})
}

func newFleetWith(t testing.TB, opts sandbox.Options) *fleet {
	t.Helper()
	opts.Dir = t.TempDir()
	sb, err := sandbox.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	pool := ssh.NewPool(ssh.Options{NoAgent: true})
	f := &fleet{t: t, sb: sb, pool: pool, st: state.NewLocal(filepath.Join(t.TempDir(), "state.json"))}
	t.Cleanup(func() {
		pool.Close()
		sb.Close()
	})
	return f
}

// jobs writes the jobs file and loads the configuration.
func (f *fleet) jobs(hcl string) *config.Config {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.sb.Dir, "jobs.hcl"), []byte(hcl), 0o644); err != nil {
		f.t.Fatal(err)
	}
	cfg, diags := config.Load(f.sb.Dir, config.LoadOptions{})
	if diags.HasErrors() {
		f.t.Fatal(diags.Error())
	}
	return cfg
}

// plan refreshes over SSH and plans.
func (f *fleet) plan(cfg *config.Config) (*reconcile.Plan, *state.State, *facts.Document) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := f.st.Load(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	doc, err := reconcile.RefreshFacts(ctx, f.pool, cfg, st, probe.Options{})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, h := range doc.Hosts {
		if h.Status != facts.StatusOK {
			f.t.Fatalf("host %s: %s %s", h.Name, h.Status, h.Error)
		}
	}
	return reconcile.MakePlan(reconcile.Input{Config: cfg, State: st, Facts: doc, Refresh: reconcile.Refresh{Source: reconcile.RefreshProbe}}), st, doc
}

func (f *fleet) executor(cfg *config.Config) *apply.Executor {
	machines, err := probe.Machines(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	targets := map[string]ssh.Target{}
	for _, m := range machines {
		targets[m.Name] = m.Target
	}
	specs := map[string]state.JobSpec{}
	for _, j := range cfg.Jobs {
		specs[j.Name] = reconcile.JobSpec(j, nil)
	}
	return &apply.Executor{Runner: f.pool, Backend: f.st, Targets: targets, Specs: specs}
}

// apply plans and applies, and returns the plan and the result.
func (f *fleet) apply(ctx context.Context, cfg *config.Config) (*reconcile.Plan, *apply.Result, error) {
	f.t.Helper()
	p, st, doc := f.plan(cfg)
	res, err := f.executor(cfg).Apply(ctx, st, p, doc)
	return p, res, err
}

// home is the home directory of the sandbox machine named host.
func (f *fleet) home(host string) string {
	for _, m := range f.sb.Machines {
		if m.Name == host {
			return filepath.Join(m.Dir, "home")
		}
	}
	f.t.Fatalf("no machine %s", host)
	return ""
}

// runProcesses are the live processes whose environment carries the run.
func runProcesses(runID string) []int {
	marker := []byte("GPULAYER_RUN_ID=" + runID)
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if i := bytes.LastIndexByte(stat, ')'); i < 0 || bytes.HasPrefix(stat[i+2:], []byte("Z")) {
			continue
		}
		env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		for kv := range bytes.SplitSeq(env, []byte{0}) {
			if bytes.Equal(kv, marker) {
				out = append(out, pid)
			}
		}
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 300 {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	var b []byte
	waitFor(t, path, func() bool {
		b, _ = os.ReadFile(path)
		return bytes.Contains(b, []byte("GPULAYER_RUN_ID="))
	})
	env := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	return env
}

const twoByTwo = `
job "pair" {
  nodes         = 2
  gpus_per_node = 2
  launcher      = "plain"
  stop_timeout  = "2s"
  command       = ["sh", "-c", "env > env-$NODE_RANK.txt; exec sleep 300"]
}
`

// TestApplyLaunchesTracksAndStopsAJob walks a job through its life on a
// sandbox fleet over real SSH: launch, no change, replace when its command
// changes or its process dies, stop when it is removed.
func TestApplyLaunchesTracksAndStopsAJob(t *testing.T) {
	f := newFleet(t, 4)
	cfg := f.jobs(twoByTwo)
	ctx := context.Background()

	p, res, err := f.apply(ctx, cfg)
	if err != nil || len(res.Failed) > 0 {
		t.Fatalf("apply: %v %v", err, res.Failed)
	}
	if c := p.Job("pair"); c == nil || c.Action != reconcile.ActionCreate {
		t.Fatalf("first plan: %+v", p.Jobs)
	}
	if res.Launched != 1 {
		t.Errorf("launched %d", res.Launched)
	}
	job := res.State.Job("pair")
	if job == nil || job.Status != state.JobRunning || len(job.Nodes) != 2 {
		t.Fatalf("state job %+v", job)
	}
	placed := p.Job("pair").Placement
	for rank, n := range job.Nodes {
		env := readEnv(t, filepath.Join(f.home(n.Host), "env-"+strconv.Itoa(rank)+".txt"))
		want := map[string]string{
			"NODE_RANK": strconv.Itoa(rank), "NNODES": "2", "WORLD_SIZE": "4", "NPROC_PER_NODE": "2",
			"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": strconv.Itoa(job.MasterPort),
			"CUDA_VISIBLE_DEVICES": strings.Join(placed.Nodes[rank].GPUUUIDs, ","), "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
			"GPULAYER_JOB": "pair", "GPULAYER_RUN_ID": job.RunID,
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("node %d: %s=%q, want %q", rank, k, env[k], v)
			}
		}
		if len(placed.Nodes[rank].GPUUUIDs) != 2 {
			t.Errorf("node %d: GPU UUIDs %v", rank, placed.Nodes[rank].GPUUUIDs)
		}
	}

	// The machines now report those GPUs busy, with the run's id, and
	// the next plan changes nothing.
	p, _, doc := f.plan(cfg)
	for _, n := range job.Nodes {
		h := doc.Find(n.Host)
		for _, g := range n.GPUs {
			if procs := h.GPUs[g].Processes; len(procs) == 0 || procs[0].RunID != job.RunID {
				t.Errorf("%s GPU %d: processes %+v, want the run's", n.Host, g, procs)
			}
		}
	}
	if p.HasChanges() || p.Job("pair").Action != reconcile.ActionNoOp {
		t.Fatalf("second plan has changes: %+v", p.Jobs)
	}

	// A changed command replaces the job.
	changed := f.jobs(strings.Replace(twoByTwo, "sleep 300", "sleep 301", 1))
	p, res, err = f.apply(ctx, changed)
	if err != nil || p.Job("pair").Action != reconcile.ActionReplace || res.Replaced != 1 {
		t.Fatalf("replace: %v, %+v, %+v", err, p.Job("pair"), res)
	}
	if left := runProcesses(job.RunID); len(left) > 0 {
		t.Errorf("the replaced run still has processes %v", left)
	}
	job = res.State.Job("pair")

	// A process killed by hand fails the run: its batch job has no
	// restart left, so the next apply stops the other node (the gang
	// ends together) and keeps the job, failed, with how node 1 ended.
	cmdPID := 0
	waitFor(t, "the command's process", func() bool {
		for _, pid := range runProcesses(job.RunID) {
			if pid != job.Nodes[1].Process.PID {
				b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
				if bytes.Contains(b, []byte(" "+strconv.Itoa(job.Nodes[1].Process.PID)+" ")) {
					cmdPID = pid
					return true
				}
			}
		}
		return false
	})
	if err := syscall.Kill(cmdPID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node 1 to end", func() bool { return len(runProcesses(job.RunID)) == 2 })
	time.Sleep(100 * time.Millisecond)
	p, res, err = f.apply(ctx, changed)
	c := p.Job("pair")
	if err != nil || c.Action != reconcile.ActionStop || c.Run == nil || c.Run.State != state.JobFailed {
		t.Fatalf("after a kill: %v %+v", err, c)
	}
	if e := c.Run.Nodes; len(e) != 1 || e[0].Rank != 1 || e[0].ExitStatus == nil || *e[0].ExitStatus != 143 || e[0].Signal != "TERM" {
		t.Errorf("node ends %+v: want node 1 killed by SIGTERM (143)", e)
	}
	if left := runProcesses(job.RunID); len(left) > 0 {
		t.Errorf("node 0 of the failed run still runs: %v", left)
	}
	if j := res.State.Job("pair"); j == nil || j.Status != state.JobFailed || j.EndReason != reconcile.EndFailed {
		t.Fatalf("state after the failure: %+v", j)
	}
	if p, _, _ = f.plan(changed); p.HasChanges() || p.Job("pair").Action != reconcile.ActionNoOp {
		t.Errorf("a failed job with no restart left is launched again: %+v", p.Job("pair"))
	}

	// Removing the job stops it; nothing with its run id is left.
	none := f.jobs("")
	p, res, err = f.apply(ctx, none)
	if err != nil || p.Job("pair").Action != reconcile.ActionDestroy || res.Stopped != 1 {
		t.Fatalf("destroy: %v %+v %+v", err, p.Job("pair"), res)
	}
	if left := runProcesses(job.RunID); len(left) > 0 {
		t.Errorf("processes of the stopped run remain: %v", left)
	}
	if len(res.State.Jobs) != 0 {
		t.Errorf("state still has jobs: %+v", res.State.Jobs)
	}
	p, _, _ = f.plan(none)
	if p.HasChanges() {
		t.Errorf("plan after destroy has changes: %+v", p)
	}
}

// TestApplyIsAllOrNothing: a node that cannot start (its workdir is
// missing on one machine) fails the job, and the node that did start is
// stopped.
func TestApplyIsAllOrNothing(t *testing.T) {
	f := newFleet(t, 2)
	cfg := f.jobs(`
job "pair" {
  nodes         = 2
  gpus_per_node = 1
  launcher      = "plain"
  workdir       = "work"
  command       = ["sleep", "300"]
}
`)
	// Only the first machine has the workdir.
	if err := os.MkdirAll(filepath.Join(f.home(f.sb.Machines[0].Name), "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, res, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) != 1 {
		t.Fatalf("failed %v, want the job", res.Failed)
	}
	var le *apply.LaunchError
	if !errors.As(res.Failed[0], &le) || !strings.Contains(le.Error(), "workdir") {
		t.Errorf("failure %v does not say the workdir is missing", res.Failed[0])
	}
	j := res.State.Job("pair")
	if j == nil || j.Status != state.JobFailed {
		t.Fatalf("state %+v", j)
	}
	if left := runProcesses(j.RunID); len(left) > 0 {
		t.Errorf("the node that started still runs: %v", left)
	}
	p, _, _ := f.plan(cfg)
	if c := p.Job("pair"); c.Action != reconcile.ActionReplace || c.Reasons[0].Code != reconcile.ReasonLaunchIncomplete {
		t.Errorf("next plan %+v", c)
	}
}

// TestApplyFailsACommandThatExitsAtOnce: a node whose process ends right
// after it starts fails the launch with its exit status and log.
func TestApplyFailsACommandThatExitsAtOnce(t *testing.T) {
	f := newFleet(t, 1)
	cfg := f.jobs(`
job "oops" {
  nodes       = 1
  launcher    = "plain"
  start_check = "1m"
  command     = ["sh", "-c", "echo no such file: train.py >&2; exit 2"]
}
`)
	// A start check far longer than any machine's load: the end is seen
	// whenever it comes, and decided on at once, not at the check's end.
	begin := time.Now()
	_, res, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) != 1 || !strings.Contains(res.Failed[0].Error(), "exit status 2") || !strings.Contains(res.Failed[0].Error(), "no such file: train.py") {
		t.Fatalf("failed %v", res.Failed)
	}
	if took := time.Since(begin); took > 30*time.Second {
		t.Errorf("the failure took %s to be seen: the start check waited out its minute", took)
	}
}

// TestApplyStartCheckIsTheJobs: a node must run for the job's whole
// start_check. One that ends during it fails the launch (node 0, whose
// check runs in a session of its own once it picked the port, as well as
// the others; the node that keeps running is watched to the end of its
// check, so the launch fails once that has passed), and a job that keeps
// running is confirmed only once its start_check has passed.
func TestApplyStartCheckIsTheJobs(t *testing.T) {
	f := newFleet(t, 2)
	for _, rank := range []int{0, 1} {
		t.Run(fmt.Sprintf("node %d ends during it", rank), func(t *testing.T) {
			cfg := f.jobs(fmt.Sprintf(`
job "late%d" {
  nodes         = 2
  gpus_per_node = 1
  launcher      = "plain"
  stop_timeout  = "1s"
  start_check   = "4s"
  command       = ["sh", "-c", "if [ \"$GPULAYER_NODE_RANK\" = %d ]; then sleep 1; echo giving up; exit 3; fi; sleep 300"]
}
`, rank, rank))
			_, res, err := f.apply(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Failed) != 1 || res.Launched != 0 {
				t.Fatalf("launched %d, failed %v", res.Launched, res.Failed)
			}
			var le *apply.LaunchError
			if !errors.As(res.Failed[0], &le) || le.Rank != rank || le.ExitStatus == nil || *le.ExitStatus != 3 || !strings.Contains(le.Error(), "giving up") {
				t.Fatalf("failed %v", res.Failed[0])
			}
		})
	}
	t.Run("a job that runs is confirmed after it", func(t *testing.T) {
		cfg := f.jobs(`
job "steady" {
  nodes         = 2
  gpus_per_node = 1
  launcher      = "plain"
  stop_timeout  = "1s"
  start_check   = "1500ms"
  command       = ["sleep", "300"]
}
`)
		begin := time.Now()
		_, res, err := f.apply(context.Background(), cfg)
		if err != nil || len(res.Failed) > 0 || res.Launched != 1 {
			t.Fatalf("%v %v %+v", err, res.Failed, res)
		}
		if took := time.Since(begin); took < 1500*time.Millisecond {
			t.Errorf("confirmed after %s, before its start_check of 1.5s", took)
		}
	})
}

// TestApplyInterruptedConverges: an apply cancelled after its first node
// started records what it did, and the next plan and apply converge.
func TestApplyInterruptedConverges(t *testing.T) {
	f := newFleet(t, 2)
	cfg := f.jobs(`
job "pair" {
  nodes         = 2
  gpus_per_node = 1
  launcher      = "plain"
  stop_timeout  = "1s"
  command       = ["sleep", "300"]
}
`)
	p, st, doc := f.plan(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	ex := f.executor(cfg)
	ex.Opts.Parallelism = 1
	ex.Opts.Progress = func(ev apply.Event) {
		if ev.Step == apply.StepStarted {
			cancel() // Ctrl-C right after the first node started
		}
	}
	res, err := ex.Apply(ctx, st, p, doc)
	if !errors.Is(err, apply.ErrInterrupted) {
		t.Fatalf("apply: %v, want interrupted", err)
	}
	j := res.State.Job("pair")
	if j == nil || j.Status != state.JobLaunching {
		t.Fatalf("state after the interrupt: %+v", j)
	}
	started := 0
	for _, n := range j.Nodes {
		if n.Process != nil {
			started++
		}
	}
	if started != 1 {
		t.Errorf("%d nodes recorded as started, want 1", started)
	}
	oldRun := j.RunID
	_, res, err = f.apply(context.Background(), cfg)
	if err != nil || len(res.Failed) > 0 || res.Replaced != 1 {
		t.Fatalf("converging apply: %v %+v", err, res)
	}
	if left := runProcesses(oldRun); len(left) > 0 {
		t.Errorf("the interrupted run's processes remain: %v", left)
	}
	p, _, _ = f.plan(cfg)
	if p.HasChanges() {
		t.Errorf("not converged: %+v", p.Jobs)
	}
	if _, res, err := f.apply(context.Background(), f.jobs("")); err != nil || res.Stopped != 1 {
		t.Fatalf("cleanup: %v %+v", err, res)
	}
}

// TestStopLeavesNoWorkerOfATorchrunLikeLauncher: a launcher that starts its
// workers in sessions of their own (as torchrun does) leaves none behind
// once its job is stopped.
func TestStopLeavesNoWorkerOfATorchrunLikeLauncher(t *testing.T) {
	f := newFleet(t, 2)
	cfg := f.jobs(`
job "elastic" {
  nodes         = 2
  gpus_per_node = 1
  launcher      = "plain"
  stop_timeout  = "1s"
  command       = ["sh", "-c", "for w in 1 2; do setsid sleep 300 </dev/null >/dev/null 2>&1 & done; exec sleep 300"]
}
`)
	_, res, err := f.apply(context.Background(), cfg)
	if err != nil || res.Launched != 1 {
		t.Fatalf("apply: %v %+v", err, res)
	}
	runID := res.State.Job("elastic").RunID
	// Each node: its leader, its command and two workers in new sessions.
	waitFor(t, "the workers", func() bool { return len(runProcesses(runID)) >= 8 })
	if _, res, err = f.apply(context.Background(), f.jobs("")); err != nil || res.Stopped != 1 {
		t.Fatalf("stop: %v %+v", err, res)
	}
	if left := runProcesses(runID); len(left) > 0 {
		t.Errorf("processes of the run remain after the stop: %v", left)
	}
}

// downOnStop is the pool, with one machine that stops answering when
// apply comes to stop its node: its launch succeeded, and its stop cannot
// reach it.
type downOnStop struct {
	pool *ssh.Pool
	sb   *sandbox.Sandbox
	host string
}

func (d *downOnStop) Run(ctx context.Context, t ssh.Target, command string, stdin io.Reader) (ssh.Result, error) {
	if t.Name == d.host && strings.Contains(command, "gpulayer-stop") {
		d.sb.SetReachable(d.host, false)
	}
	return d.pool.Run(ctx, t, command, stdin)
}

// TestAFailedLaunchSaysWhichNodesCouldNotBeStopped: node 1 fails the
// launch (its workdir is missing) while node 0's machine stops answering
// after it started: the failure says node 0's run could not be stopped
// and is kept in state, rather than that every node was stopped.
func TestAFailedLaunchSaysWhichNodesCouldNotBeStopped(t *testing.T) {
	f := newFleet(t, 2)
	cfg := f.jobs(`
job "pair" {
  nodes         = 2
  gpus_per_node = 1
  launcher      = "plain"
  workdir       = "work"
  stop_timeout  = "1s"
  command       = ["sleep", "300"]
}
`)
	p, st, doc := f.plan(cfg)
	first := p.Job("pair").Placement.Nodes[0].Host
	if err := os.MkdirAll(filepath.Join(f.home(first), "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	ex := f.executor(cfg)
	ex.Runner = &downOnStop{pool: f.pool, sb: f.sb, host: first}
	res, err := ex.Apply(context.Background(), st, p, doc)
	if err != nil {
		t.Fatal(err)
	}
	var le *apply.LaunchError
	if len(res.Failed) != 1 || !errors.As(res.Failed[0], &le) || le.NotStopped != first ||
		!strings.Contains(le.Error(), "could not be stopped") {
		t.Fatalf("failed %v", res.Failed)
	}
	if len(res.State.Leftovers) != 1 || res.State.Leftovers[0].Nodes[0].Host != first {
		t.Errorf("leftovers %+v, want node 0's run on %s", res.State.Leftovers, first)
	}
	f.sb.SetReachable(first, true)
	for _, pid := range runProcesses(res.State.Leftovers[0].RunID) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestTwoConfigurationsNeverShareAGPU: two configurations (two states)
// plan the same GPUs of one machine before either launches, as two teams'
// pipelines racing do. The first apply claims them on the machine; the
// second fails, all or nothing, naming the first's job and state, and
// starts nothing. Its next plan sees the claims and goes elsewhere.
func TestTwoConfigurationsNeverShareAGPU(t *testing.T) {
	f := newFleet(t, 1)
	job := `
job "JOB" {
  nodes         = 1
  gpus_per_node = 8
  launcher      = "plain"
  stop_timeout  = "1s"
  command       = ["sleep", "300"]
}
`
	cfgA := f.jobs(strings.ReplaceAll(job, "JOB", "team-a"))
	pA, stA, docA := f.plan(cfgA)
	cfgB := f.jobs(strings.ReplaceAll(job, "JOB", "team-b"))
	stateB := state.NewLocal(filepath.Join(t.TempDir(), "b.json"))
	pB := reconcile.MakePlan(reconcile.Input{Config: cfgB, State: state.New(), Facts: docA, Refresh: reconcile.Refresh{Source: reconcile.RefreshProbe}})
	if pA.Job("team-a").Placement == nil || pB.Job("team-b").Placement == nil {
		t.Fatalf("both should plan the machine's 8 GPUs: %+v / %+v", pA.Job("team-a"), pB.Job("team-b"))
	}

	resA, err := f.executor(cfgA).Apply(context.Background(), stA, pA, docA)
	if err != nil || resA.Launched != 1 {
		t.Fatalf("team a: %v %+v", err, resA)
	}
	exB := f.executor(cfgB)
	exB.Backend = stateB
	resB, err := exB.Apply(context.Background(), state.New(), pB, docA)
	if err != nil {
		t.Fatal(err)
	}
	if len(resB.Failed) != 1 || !strings.Contains(resB.Failed[0].Error(), `claimed by job team-a`) ||
		!strings.Contains(resB.Failed[0].Error(), resA.State.Lineage) {
		t.Fatalf("team b: %+v", resB.Failed)
	}
	if left := runProcesses(resB.State.Job("team-b").RunID); len(left) > 0 {
		t.Errorf("team b started %v on claimed GPUs", left)
	}
	// Team b's next plan reads the claims: its job waits, and says why.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stB, _ := stateB.Load(ctx)
	doc, err := reconcile.RefreshFacts(ctx, f.pool, cfgB, stB, probe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	next := reconcile.MakePlan(reconcile.Input{Config: cfgB, State: stB, Facts: doc, Refresh: reconcile.Refresh{Source: reconcile.RefreshProbe}})
	if c := next.Job("team-b"); c.Action != reconcile.ActionWaiting {
		t.Errorf("team b's next plan: %+v", c)
	}
	if w := strings.Join(next.Warnings, "\n"); !strings.Contains(w, `claimed by job "team-a" of another configuration`) {
		t.Errorf("warnings %q do not say who claims the GPUs", next.Warnings)
	}
	if c := doc.Hosts[0].GPUs[0].Claim; c == nil || c.Job != "team-a" || c.Lineage != resA.State.Lineage {
		t.Errorf("facts claim %+v", c)
	}
}

// TestARestartThatMustWaitKeepsItsCountsAndHistory: a failed run whose
// restart cannot be placed (another process took one of its GPUs) stays
// in state, restarting, with its run in no history yet; once the GPU is
// free the restart is launched with its restart counted and the failed
// run in its history.
func TestARestartThatMustWaitKeepsItsCountsAndHistory(t *testing.T) {
	f := newFleet(t, 1)
	m := f.sb.Machines[0]
	cfg := f.jobs(`
job "retry" {
  nodes         = 1
  gpus_per_node = ` + strconv.Itoa(len(m.GPUUUIDs)) + `
  launcher      = "plain"
  stop_timeout  = "2s"
  command       = ["sh", "-c", "sleep 1; exit 3"]
  restart {
    attempts = 2
    delay    = "0s"
  }
}
`)
	ctx := context.Background()
	if _, res, err := f.apply(ctx, cfg); err != nil || res.Launched != 1 {
		t.Fatalf("apply: %v %+v", err, res)
	}
	machines, err := probe.Machines(cfg)
	if err != nil {
		t.Fatal(err)
	}
	target := machines[0].Target
	// A stranger takes GPU 0 as soon as the run has ended.
	waitFor(t, "the run to end", func() bool {
		st, err := f.st.Load(ctx)
		return err == nil && len(runProcesses(st.Job("retry").RunID)) == 0
	})
	res, err := f.pool.Run(ctx, target, "CUDA_VISIBLE_DEVICES=0 setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!", nil)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("the stranger's pid: %q", res.Stdout)
	}
	t.Cleanup(func() { syscall.Kill(stranger, syscall.SIGKILL) })

	p, result, err := f.apply(ctx, cfg)
	c := p.Job("retry")
	if err != nil || c.Action != reconcile.ActionWaiting || c.Run == nil || !c.Run.Restart {
		t.Fatalf("with GPU 0 taken: %v, %+v", err, c)
	}
	j := result.State.Job("retry")
	if j == nil || j.Status != state.JobRestarting || j.EndReason != reconcile.EndFailed || j.Restarts != 0 || len(j.History) != 0 {
		t.Fatalf("a restart that waits: state %+v, want the job kept, restarting, nothing counted yet", j)
	}
	failedRun := j.RunID
	if p, _, _ := f.plan(cfg); p.HasChanges() || p.Job("retry").Action != reconcile.ActionWaiting {
		t.Errorf("the restart still waits: %+v, want a wait with nothing to stop", p.Job("retry"))
	}

	if err := syscall.Kill(stranger, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stranger to go", func() bool { return !sshtest.ProcessRuns(stranger) })
	p, result, err = f.apply(ctx, cfg)
	if err != nil || p.Job("retry").Action != reconcile.ActionReplace || result.Replaced != 1 {
		t.Fatalf("once GPU 0 is free: %v, %+v, %+v", err, p.Job("retry"), result)
	}
	j = result.State.Job("retry")
	if j.Restarts != 1 || len(j.History) != 1 || j.History[0].RunID != failedRun || j.History[0].Status != state.JobFailed {
		t.Errorf("the restart: restarts %d, history %+v; want 1 and the failed run %s", j.Restarts, j.History, failedRun)
	}
}

// TestAStopOfARunLaunchedBeforeNodeIDsSweepsByRunID: a run a gpulayer
// before GPULAYER_NODE_ID launched (its nodes recorded without reach) has
// processes that carry only GPULAYER_RUN_ID; one outside the leader's
// group and tree is still found by the stop's sweep.
func TestAStopOfARunLaunchedBeforeNodeIDsSweepsByRunID(t *testing.T) {
	f := newFleet(t, 1)
	cfg := f.jobs(`
job "old" {
  nodes         = 1
  gpus_per_node = 1
  launcher      = "plain"
  stop_timeout  = "1s"
  command       = ["sleep", "300"]
}
`)
	_, res, err := f.apply(context.Background(), cfg)
	if err != nil || res.Launched != 1 {
		t.Fatalf("apply: %v %+v", err, res)
	}
	st := res.State.Clone()
	j := st.Job("old")
	j.Nodes[0].Reach = nil
	if err := f.st.Save(context.Background(), st, st.Serial); err != nil {
		t.Fatal(err)
	}
	stray := exec.Command("sleep", "300")
	stray.Env = []string{"GPULAYER_RUN_ID=" + j.RunID}
	stray.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	defer stray.Process.Kill()
	go stray.Wait()
	if _, res, err = f.apply(context.Background(), f.jobs("")); err != nil || res.Stopped != 1 {
		t.Fatalf("stop: %v %+v", err, res)
	}
	waitFor(t, "the stray process of the old run to end", func() bool { return len(runProcesses(j.RunID)) == 0 })
}

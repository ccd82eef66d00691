package apply

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpulayer/gpulayer/internal/codetree"
	"github.com/gpulayer/gpulayer/reconcile/launch"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/ssh"
)

// setupMargin is what a setup's session gets beyond its setup_timeout, for
// the script around it.
const setupMargin = time.Minute

// prepare makes every machine of a job ready before any node starts: the
// job's code sent once per machine (nothing sent where it is already),
// then its setup run on every node. The first failure fails the launch,
// all or nothing; Ctrl-C cuts both short, since nothing has started yet
// and a cut upload or setup leaves nothing that a later launch would use.
func (r *run) prepare(ctx context.Context, spec state.JobSpec, job state.Job, nodeOf func(int) launch.Node) *LaunchError {
	if spec.Code != nil {
		if f := r.upload(ctx, spec, job); f != nil {
			return f
		}
	}
	if spec.Setup == "" {
		return nil
	}
	var mu sync.Mutex
	var failure *LaunchError
	var wg sync.WaitGroup
	for rank := range job.Nodes {
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if f := r.setup(ctx, job, nodeOf(rank)); f != nil {
				mu.Lock()
				if failure == nil || f.Rank < failure.Rank {
					failure = f
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failure
}

// upload sends the job's code to each of its machines, in parallel, with
// UploadCode: the first failure, by rank, fails the launch.
func (r *run) upload(ctx context.Context, spec state.JobSpec, job state.Job) *LaunchError {
	tree := r.e.Code[job.Name]
	if tree == nil || tree.Hash != spec.Code.Hash {
		return &LaunchError{Job: job.Name, Rank: 0, Host: "-", Err: errors.New("its code is not the one the plan was made from; make a new plan")}
	}
	targets := map[string]ssh.Target{}
	first := map[string]int{}
	var failure *LaunchError
	for _, n := range job.Nodes {
		if _, ok := first[n.Host]; ok {
			continue
		}
		first[n.Host] = n.Rank
		t, err := r.declared(n.Host)
		if err != nil {
			r.progress(Event{Job: job.Name, Run: job.RunID, Rank: n.Rank, Host: n.Host, Step: StepFailed, Detail: err.Error()})
			if failure == nil {
				failure = &LaunchError{Job: job.Name, Rank: n.Rank, Host: n.Host, Err: err}
			}
			continue
		}
		targets[n.Host] = t
	}
	if failure != nil {
		return failure
	}
	sent := UploadCode(ctx, r.e.Runner, job.Name, tree, targets, UploadOptions{
		Slots: r.sem,
		Progress: func(ev Event) {
			ev.Run, ev.Rank = job.RunID, first[ev.Host]
			r.progress(ev)
		},
	})
	for _, s := range sent {
		if errors.Is(s.Err, errNotBegun) {
			continue // interrupted before it asked: nothing to report
		}
		if s.Err != nil && (failure == nil || first[s.Host] < failure.Rank) {
			failure = &LaunchError{Job: job.Name, Rank: first[s.Host], Host: s.Host, Err: s.Err}
		}
	}
	if failure == nil && ctx.Err() != nil {
		failure = &LaunchError{Job: job.Name, Rank: 0, Host: "-", Err: errors.New("interrupted while sending its code")}
	}
	return failure
}

// UploadOptions tune UploadCode.
type UploadOptions struct {
	// Slots bounds the machines asked or sent to at once: apply passes
	// its node-operation semaphore, shared with its other steps. Nil
	// makes one of Parallelism slots.
	Slots chan struct{}
	// Parallelism is the size of the semaphore made when Slots is nil;
	// 0 means DefaultParallelism.
	Parallelism int
	// Progress, when set, is told each machine's steps (StepUploading,
	// StepUploaded, StepFailed; Job and Host set), one call at a time.
	Progress func(Event)
}

// CodeSent is what one machine got of a job's code.
type CodeSent struct {
	Host string
	// Sent says the tree was streamed; false when the machine had it
	// already (or when Err says why not).
	Sent bool
	// Bytes counts the compressed stream that went into the session.
	Bytes int64
	Err   error
}

// UploadCode makes every machine of targets (by host name) hold tree,
// job's code, at launch.CodeDir(job, tree.Hash): each is asked in one
// short session whether it has that directory, and those that have not
// get the tree as one gzip tar stream into launch.UploadCommand (a
// temporary directory renamed once whole). The machines that need it get
// the same bytes, compressed once into a temporary file (compressing once
// per machine is what made an upload to many machines slower than
// tar | ssh); a single machine gets the stream as it is made. It is what
// apply does before a job with code starts, and what benchmarks/upload
// measures. Machines are done in parallel, bounded by opts' slots, and
// reported in host order; a context cancelled leaves the machines not yet
// begun with an error that wraps its own.
func UploadCode(ctx context.Context, runner probe.Runner, job string, tree *codetree.Tree, targets map[string]ssh.Target, opts UploadOptions) []CodeSent {
	slots := opts.Slots
	if slots == nil {
		n := opts.Parallelism
		if n <= 0 {
			n = DefaultParallelism
		}
		slots = make(chan struct{}, n)
	}
	var mu sync.Mutex
	progress := func(ev Event) {
		if opts.Progress == nil {
			return
		}
		ev.Job = job
		mu.Lock()
		defer mu.Unlock()
		opts.Progress(ev)
	}
	hosts := slices.Sorted(maps.Keys(targets))
	write := tree.WriteTar
	if len(hosts) > 1 {
		var remove func()
		write, remove = sharedArchive(tree)
		defer remove()
	}
	out := make([]CodeSent, len(hosts))
	var wg sync.WaitGroup
	for i, host := range hosts {
		out[i].Host = host
		wg.Add(1)
		go func() {
			defer wg.Done()
			u := &out[i]
			u.Sent, u.Bytes, u.Err = uploadTo(ctx, runner, slots, targets[host], job, tree, write, func(step, detail string) {
				progress(Event{Host: host, Step: step, Detail: detail})
			})
			if u.Err != nil && !errors.Is(u.Err, errNotBegun) {
				progress(Event{Host: host, Step: StepFailed, Detail: u.Err.Error()})
			}
		}()
	}
	wg.Wait()
	return out
}

// sharedArchive is a writer of tree's compressed stream that makes it
// once, into a temporary file, when first called, and copies those bytes
// on every call after: what each machine of a job that needs its code is
// sent. remove deletes the file.
func sharedArchive(tree *codetree.Tree) (write func(io.Writer) error, remove func()) {
	a := &archive{tree: tree}
	return a.writeTo, a.remove
}

// archive is a tree's compressed stream, made once for every machine that
// needs it.
type archive struct {
	tree *codetree.Tree
	once sync.Once
	path string
	err  error
}

// writeTo copies the archive to w, making it first if no machine has.
func (a *archive) writeTo(w io.Writer) error {
	a.once.Do(func() {
		f, err := os.CreateTemp("", "gpulayer-code-*.tar.gz")
		if err != nil {
			a.err = err
			return
		}
		a.path = f.Name()
		if err := a.tree.WriteTar(f); err != nil {
			f.Close()
			a.err = err
			return
		}
		a.err = f.Close()
	})
	if a.err != nil {
		return a.err
	}
	f, err := os.Open(a.path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

func (a *archive) remove() {
	if a.path != "" {
		os.Remove(a.path)
	}
}

// errNotBegun is the error of a machine left when the context ended
// before its turn.
var errNotBegun = errors.New("not begun")

// errUploadEnded is what the stream's writer is told once the session
// that read it ended.
var errUploadEnded = errors.New("the upload's session ended")

// uploadTo checks whether the machine has the code and, when not, streams
// it there: one cheap session to ask, one to send. It says whether it
// sent the tree and how many bytes of the stream went into the session.
func uploadTo(ctx context.Context, runner probe.Runner, slots chan struct{}, t ssh.Target, job string, tree *codetree.Tree, write func(io.Writer) error, step func(step, detail string)) (bool, int64, error) {
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return false, 0, fmt.Errorf("%w: %w", errNotBegun, ctx.Err())
	}
	defer func() { <-slots }()
	cctx, cancel := context.WithTimeout(ctx, launch.Timeout)
	res, err := runner.Run(cctx, t, "sh -s -- gpulayer-has-code "+ssh.Quote(job), strings.NewReader(launch.HasCodeScript(job, tree.Hash)))
	cancel()
	if err != nil {
		return false, 0, fmt.Errorf("checking its code: %w", err)
	}
	if strings.Contains(string(res.Stdout), "gpulayer-code:present") {
		step(StepUploaded, "code already on the machine")
		return false, 0, nil
	}
	step(StepUploading, fmt.Sprintf("code %s, %d files", sizeWords(tree.Size), len(tree.Files)))
	pr, pw := io.Pipe()
	var sent countingWriter
	sent.w = pw
	var werr error
	written := make(chan struct{})
	go func() {
		werr = write(&sent)
		close(written)
		pw.CloseWithError(werr)
	}()
	uctx, cancel := context.WithTimeout(ctx, launch.UploadTimeout)
	defer cancel()
	res, err = runner.Run(uctx, t, launch.UploadCommand(job, tree.Hash), pr)
	// The writer may still be blocked on a pipe no one reads any more.
	pr.CloseWithError(errUploadEnded)
	// A stream that could not be made whole (a file that changed since
	// the plan hashed it) ends early, and the machine's tar then fails
	// on a truncated archive: the writer's error says why. (Its error is
	// known once the session ended, since the session waits for the end
	// of the stream; a writer still busy is not waited for.)
	select {
	case <-written:
		if werr != nil && !errors.Is(werr, errUploadEnded) {
			return true, sent.n.Load(), fmt.Errorf("sending its code: %w", werr)
		}
	default:
	}
	if err != nil {
		return true, sent.n.Load(), fmt.Errorf("sending its code: %w", err)
	}
	if err := launch.ParseUpload(res.Stdout); err != nil {
		return true, sent.n.Load(), err
	}
	step(StepUploaded, "code sent")
	return true, sent.n.Load(), nil
}

// countingWriter counts the bytes that went through it to w.
type countingWriter struct {
	w io.Writer
	n atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// setup runs the job's setup on one node.
func (r *run) setup(ctx context.Context, job state.Job, n launch.Node) *LaunchError {
	host := job.Nodes[n.Rank].Host
	fail := func(err error, tail []string) *LaunchError {
		r.progress(Event{Job: job.Name, Run: job.RunID, Rank: n.Rank, Host: host, Step: StepFailed, Detail: err.Error()})
		return &LaunchError{Job: job.Name, Rank: n.Rank, Host: host, Err: err, LogTail: tail}
	}
	t, err := r.declared(host)
	if err != nil {
		return fail(err, nil)
	}
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return fail(errors.New("interrupted before its setup"), nil)
	}
	defer func() { <-r.sem }()
	r.progress(Event{Job: job.Name, Run: job.RunID, Rank: n.Rank, Host: host, Step: StepSetup})
	limit := time.Duration(n.Spec.SetupTimeout)
	if limit <= 0 {
		limit = launch.DefaultSetupTimeout
	}
	sctx, cancel := context.WithTimeout(ctx, limit+setupMargin)
	defer cancel()
	res, err := r.e.Runner.Run(sctx, t, launch.Command("setup", job.Name, job.RunID, fmt.Sprint(n.Rank)), strings.NewReader(launch.SetupScript(n)))
	if err != nil {
		return fail(fmt.Errorf("setup: %w", err), nil)
	}
	out, err := launch.ParseSetup(res.Stdout)
	switch {
	case err != nil:
		return fail(fmt.Errorf("setup: %w", err), nil)
	case out.Failed:
		msg := fmt.Sprintf("setup exited with status %d", out.Status)
		if out.Status == 124 {
			msg = fmt.Sprintf("setup ran past setup_timeout (%s)", limit)
		}
		return fail(fmt.Errorf("%s (log: ~/%s)", msg, launch.SetupLogPath(job.Name, job.RunID, n.Rank)), out.LogTail)
	case out.Skipped:
		r.progress(Event{Job: job.Name, Run: job.RunID, Rank: n.Rank, Host: host, Step: StepSetupDone, Detail: "already done on this machine"})
	default:
		r.progress(Event{Job: job.Name, Run: job.RunID, Rank: n.Rank, Host: host, Step: StepSetupDone})
	}
	return nil
}

// sizeWords is a size for people: "3.2 MiB".
func sizeWords(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

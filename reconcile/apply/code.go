package apply

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpulayer/gpulayer/internal/codetree"
	"github.com/gpulayer/gpulayer/reconcile/launch"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/ssh"
)

// UploadTimeout bounds one machine's code upload.
const UploadTimeout = 30 * time.Minute

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

// upload sends the job's code to each of its machines, in parallel.
func (r *run) upload(ctx context.Context, spec state.JobSpec, job state.Job) *LaunchError {
	tree := r.e.Code[job.Name]
	if tree == nil || tree.Hash != spec.Code.Hash {
		return &LaunchError{Job: job.Name, Rank: 0, Host: "-", Err: errors.New("its code is not the one the plan was made from; make a new plan")}
	}
	var hosts []string
	first := map[string]int{}
	for _, n := range job.Nodes {
		if _, ok := first[n.Host]; !ok {
			first[n.Host] = n.Rank
			hosts = append(hosts, n.Host)
		}
	}
	slices.Sort(hosts)
	// Machines that need the code all get the same bytes: the stream is
	// compressed once, into a temporary file, when the first of them asks
	// (compressing it once per machine is what made an upload to many
	// machines slower than tar | ssh), and streamed as it is made when
	// only one machine needs it.
	write := tree.WriteTar
	if len(hosts) > 1 {
		var remove func()
		write, remove = SharedArchive(tree)
		defer remove()
	}
	var mu sync.Mutex
	var failure *LaunchError
	each(ctx, hosts, func(ctx context.Context, host string) {
		rank := first[host]
		ev := Event{Job: job.Name, Run: job.RunID, Rank: rank, Host: host}
		err := r.uploadTo(ctx, host, job.Name, tree.Hash, func(sent bool) {
			ev.Step, ev.Detail = StepUploading, fmt.Sprintf("code %s, %d files", sizeWords(tree.Size), len(tree.Files))
			if !sent {
				ev.Step, ev.Detail = StepUploaded, "code already on the machine"
			}
			r.progress(ev)
		}, write)
		if err != nil {
			ev.Step, ev.Detail = StepFailed, err.Error()
			r.progress(ev)
			mu.Lock()
			if failure == nil || rank < failure.Rank {
				failure = &LaunchError{Job: job.Name, Rank: rank, Host: host, Err: err}
			}
			mu.Unlock()
			return
		}
	})
	if failure == nil && ctx.Err() != nil {
		failure = &LaunchError{Job: job.Name, Rank: 0, Host: "-", Err: errors.New("interrupted while sending its code")}
	}
	return failure
}

// SharedArchive is a writer of tree's compressed stream that makes it once,
// into a temporary file, when first called, and copies those bytes on
// every call after: what apply sends each machine of a job that needs its
// code. remove deletes the file.
func SharedArchive(tree *codetree.Tree) (write func(io.Writer) error, remove func()) {
	a := &sharedArchive{tree: tree}
	return a.writeTo, a.remove
}

// sharedArchive is a tree's compressed stream, made once for every machine
// that needs it.
type sharedArchive struct {
	tree *codetree.Tree
	once sync.Once
	path string
	err  error
}

// writeTo copies the archive to w, making it first if no machine has.
func (a *sharedArchive) writeTo(w io.Writer) error {
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

func (a *sharedArchive) remove() {
	if a.path != "" {
		os.Remove(a.path)
	}
}

// uploadTo checks whether host has the code and, when not, streams it
// there: one cheap session to ask, one to send.
func (r *run) uploadTo(ctx context.Context, host, job, hash string, starting func(sent bool), write func(io.Writer) error) error {
	t, err := r.declared(host)
	if err != nil {
		return err
	}
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-r.sem }()
	cctx, cancel := context.WithTimeout(ctx, launch.Timeout)
	res, err := r.e.Runner.Run(cctx, t, "sh -s -- gpulayer-has-code "+ssh.Quote(job), strings.NewReader(launch.HasCodeScript(job, hash)))
	cancel()
	if err != nil {
		return fmt.Errorf("checking its code: %w", err)
	}
	if strings.Contains(string(res.Stdout), "gpulayer-code:present") {
		starting(false)
		return nil
	}
	starting(true)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(write(pw)) }()
	uctx, cancel := context.WithTimeout(ctx, UploadTimeout)
	defer cancel()
	res, err = r.e.Runner.Run(uctx, t, launch.UploadCommand(job, hash), pr)
	// The writer may still be blocked on a pipe no one reads any more.
	pr.CloseWithError(errors.New("upload ended"))
	if err != nil {
		return fmt.Errorf("sending its code: %w", err)
	}
	if err := launch.ParseUpload(res.Stdout); err != nil {
		return err
	}
	r.progress(Event{Job: job, Host: host, Step: StepUploaded, Detail: "code sent"})
	return nil
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

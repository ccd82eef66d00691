package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/launch"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/ssh"
)

type logsOptions struct {
	f         *factory
	dir       string // the configuration directory
	job       string
	node      int
	follow    bool
	tail      int
	statePath string
	vars      []config.VarArg
	environ   []string
	// interval is how often --follow asks each node for more.
	interval time.Duration
}

func newCmdLogs(f *factory, runF func(*logsOptions) error) *cobra.Command {
	opts := &logsOptions{f: f, interval: time.Second}
	cmd := &cobra.Command{
		Use:   "logs JOB",
		Short: "Print the logs of a job's nodes",
		Long: `logs prints the end of each node's log (~/.gpulayer/runs/JOB/RUN/node-N.log
on its machine), each line prefixed with its node and host. --follow keeps
printing what the nodes add, until every node has ended (then a last line
per node says how) or Ctrl-C. The configuration in the current
directory (or --chdir) says how to reach the hosts.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.job, opts.dir = args[0], "."
			opts.environ = os.Environ()
			if opts.tail < 1 {
				return fmt.Errorf("--tail must be at least 1, got %d", opts.tail)
			}
			if opts.node < -1 {
				return fmt.Errorf("--node must be a node rank (0, 1, ...), got %d", opts.node)
			}
			if runF != nil {
				return runF(opts)
			}
			return logsRun(opts)
		},
	}
	addVarFlags(cmd, &opts.vars)
	addStateFlags(cmd, &opts.statePath, nil, true)
	cmd.Flags().IntVar(&opts.node, "node", -1, "only the node of rank `N`")
	cmd.Flags().BoolVarP(&opts.follow, "follow", "f", false, "keep printing new lines until every node has ended")
	cmd.Flags().IntVar(&opts.tail, "tail", 20, "print the last `N` lines of each log first")
	return cmd
}

func logsRun(opts *logsOptions) error {
	io := opts.f.IO
	ctx, stop := interruptible(context.Background())
	defer stop()
	cfg, err := loadConfig(io, opts.dir, opts.vars, opts.environ)
	if err != nil {
		return err
	}
	backend, closeBackend, err := newWorkspace(opts.dir, opts.statePath, cfg.Backend).backend(ctx)
	if err != nil {
		return err
	}
	defer closeBackend()
	st, err := backend.Load(ctx)
	if err != nil {
		return err
	}
	job := st.Job(opts.job)
	if job == nil {
		return fmt.Errorf("no job %q in state: gpulayer has not launched it (see gpulayer show)", opts.job)
	}
	targets, err := configTargets(reconcile.WithMachines(cfg, st.Machines))
	if err != nil {
		return err
	}
	var nodes []state.Node
	for _, n := range job.Nodes {
		if opts.node < 0 || n.Rank == opts.node {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		return fmt.Errorf("job %q has no node %d (it has %d nodes)", opts.job, opts.node, len(job.Nodes))
	}
	pool := ssh.NewPool(ssh.Options{MaxOutputBytes: 2 * launch.MaxLogChunk})
	defer pool.Close()
	out := &prefixedWriter{io: io}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := followNode(ctx, pool, targets, job, n, opts, out); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("node %d on %s: %v", n.Rank, n.Host, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// followNode prints a node's last lines, then, with --follow, what it
// adds until its leader has ended (the rest of its log, then a line
// saying how it ended) or ctx is done. A node that cannot be reached is
// asked again at every interval, each call bounded, saying so once on
// stderr: it may have ended, and only it can say so.
func followNode(ctx context.Context, pool *ssh.Pool, targets map[string]ssh.Target, job *state.Job, n state.Node, opts *logsOptions, out *prefixedWriter) error {
	t, err := reconcile.NodeTarget(targets, n)
	if err != nil {
		return err
	}
	prefix := fmt.Sprintf("[%s %d %s] ", job.Name, n.Rank, n.Host)
	logPath := "~/" + launch.LogPath(job.Name, job.RunID, n.Rank)
	fetch := func(req launch.LogsRequest) (launch.LogChunk, error) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		res, err := pool.Run(cctx, t, launch.Command("logs", job.Name, job.RunID, strconv.Itoa(n.Rank)),
			strings.NewReader(launch.LogsScript(req)))
		if err != nil {
			return launch.LogChunk{}, err
		}
		return launch.ParseLogs(res.Stdout)
	}
	req := launch.LogsRequest{Job: job.Name, RunID: job.RunID, Rank: n.Rank, Lines: opts.tail}
	if !opts.follow {
		chunk, err := fetch(req)
		switch {
		case err != nil:
			return err
		case chunk.NotRegular:
			return fmt.Errorf("%s is not a regular file (a FIFO, a device or a link to one): not read", logPath)
		case chunk.Size < 0:
			return fmt.Errorf("no log yet at %s", logPath)
		}
		out.write(prefix, chunk.Text)
		out.flush(prefix)
		return nil
	}
	// The leader is asked about with every chunk, before the log is read:
	// once it has ended, the size the chunk reports is all the log will
	// hold.
	req.Leader = n.Process
	first := true
	var offset int64
	for {
		chunk, err := fetch(req)
		now := true // ask again without waiting: an ended node's log is not all read
		switch {
		case err != nil && ctx.Err() != nil:
			out.flush(prefix)
			return nil
		case err != nil:
			out.note(prefix, fmt.Sprintf("cannot be reached (%v); asking again every %s until interrupted", err, opts.interval))
			now = false
		case chunk.NotRegular:
			out.note(prefix, logPath+" is not a regular file (a FIFO, a device or a link to one): not read")
			now = false
		case !first && chunk.Size >= 0 && chunk.Size < offset:
			// The log was cut or replaced: start again from its start.
			offset = 0
		default:
			out.write(prefix, chunk.Text)
			if first {
				offset = max(chunk.Size, 0)
			} else {
				offset += int64(len(chunk.Text))
			}
			out.quiet(prefix)
			now = chunk.Ended && chunk.Text != "" && offset < chunk.Size
		}
		if err == nil {
			if first {
				first = false
				req.Lines = 0
			}
			if n.Process == nil {
				out.flush(prefix)
				out.line(prefix, "has no recorded process (not started, or stopped when its launch failed)")
				return nil
			}
			if chunk.Ended && (chunk.Size < 0 || offset >= chunk.Size) {
				out.flush(prefix)
				out.line(prefix, chunk.Exit.String())
				return nil
			}
		}
		req.From = offset
		if now {
			continue
		}
		select {
		case <-ctx.Done():
			out.flush(prefix)
			return nil
		case <-time.After(opts.interval):
		}
	}
}

// prefixedWriter prints complete lines of several nodes' logs, each with
// its node's prefix, one line at a time, made safe for a terminal.
type prefixedWriter struct {
	io      *iostreams.IOStreams
	mu      sync.Mutex
	partial map[string]string
	noted   map[string]string // the last note of each node, on stderr
}

func (w *prefixedWriter) write(prefix, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.partial == nil {
		w.partial = map[string]string{}
	}
	text = w.partial[prefix] + text
	lines := strings.Split(text, "\n")
	w.partial[prefix] = lines[len(lines)-1]
	for _, l := range lines[:len(lines)-1] {
		fmt.Fprintln(w.io.Out, prefix+iostreams.Sanitize(strings.TrimSuffix(l, "\r"), false))
	}
}

// line prints a line of gpulayer's own about a node, after its log's.
func (w *prefixedWriter) line(prefix, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Fprintln(w.io.Out, prefix+iostreams.Sanitize(text, false))
}

// note prints a note about a node on stderr, once until quiet: a node
// that stays unreachable says so once, not at every poll.
func (w *prefixedWriter) note(prefix, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.noted == nil {
		w.noted = map[string]string{}
	}
	if w.noted[prefix] == text {
		return
	}
	w.noted[prefix] = text
	fmt.Fprintln(w.io.ErrOut, prefix+iostreams.Sanitize(text, false))
}

// quiet forgets a node's last note, once it answers again.
func (w *prefixedWriter) quiet(prefix string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.noted, prefix)
}

// flush prints a last line that did not end in a newline.
func (w *prefixedWriter) flush(prefix string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l := w.partial[prefix]; l != "" {
		fmt.Fprintln(w.io.Out, prefix+iostreams.Sanitize(l, false))
		w.partial[prefix] = ""
	}
}

// Command upload benchmarks gpulayer's code upload against the OpenSSH
// client doing the same copy, in the same run: a generated tree (by
// default 20 MiB in 2,000 files of source-like text) sent to every machine
// of a sandbox fleet, at the same parallelism, by
//
//   - gpulayer: what apply does for a job's code block (reconcile/apply's
//     uploadTo), one short session asking whether the machine has the
//     tree's hash, then one session streaming codetree's gzip tar into
//     launch.UploadCommand, over a fresh ssh.Pool (every host dialled anew);
//   - openssh: `tar c -C TREE . | ssh HOST 'mkdir -p DIR && tar x -C DIR'`,
//     one ssh process per host, with the options a careful script uses.
//
// Rounds alternate which client goes first; each round sends to a new
// directory (a new job name for gpulayer), and what each upload unpacked
// is removed, synced to disk and left to settle before the next (see
// settle). After the rounds, gpulayer uploads the last
// round's tree again and reports how many bytes it sent (nothing, when
// every machine already has the hash). Last, it times codetree.Read
// (the plan-time hash) of a 200 MiB tree.
//
//	go run ./benchmarks/upload -hosts 16,64 -rounds 5
//
// The sandbox (machines running /bin/sh, so tar is the machine's own)
// runs in a child process, so its work is not the client's garbage
// collector's. It prints one JSON line per measurement, then medians.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpulayer/gpulayer/benchmarks/internal/openssh"
	"github.com/gpulayer/gpulayer/benchmarks/internal/stats"
	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/internal/codetree"
	"github.com/gpulayer/gpulayer/providers/sandbox"
	"github.com/gpulayer/gpulayer/reconcile/apply"
	"github.com/gpulayer/gpulayer/reconcile/launch"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/ssh"
)

func main() {
	var err error
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		err = serve(os.Args[2:])
	} else {
		err = drive(os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchmark:", err)
		os.Exit(1)
	}
}

// result is one measurement.
type result struct {
	What        string  `json:"what"` // "upload", "reupload" or "hash"
	Client      string  `json:"client,omitempty"`
	Hosts       int     `json:"hosts,omitempty"`
	Parallelism int     `json:"parallelism,omitempty"`
	Round       int     `json:"round"`
	Files       int     `json:"files"`
	TreeMiB     float64 `json:"tree_mib"`
	WallSeconds float64 `json:"wall_s"`
	SentBytes   int64   `json:"sent_bytes,omitempty"` // gpulayer: the gzip tar streams, all hosts together
	Load1       float64 `json:"load1"`
}

func drive(args []string) error {
	fs := flag.NewFlagSet("upload", flag.ContinueOnError)
	sizes := fs.String("hosts", "16", "fleet sizes, comma-separated")
	rounds := fs.Int("rounds", 5, "measured rounds per client and size")
	par := fs.Int("parallelism", 16, "machines sent to at once, by both clients")
	files := fs.Int("files", 2000, "files in the uploaded tree")
	treeMiB := fs.Int("tree-mib", 20, "size of the uploaded tree")
	hashMiB := fs.Int("hash-mib", 200, "size of the tree hashed at plan time; 0 skips it")
	hashFiles := fs.Int("hash-files", 2000, "files in the hashed tree")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if _, err := exec.LookPath("ssh"); err != nil {
		return fmt.Errorf("the OpenSSH client (ssh) is needed as the reference: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "gpulayer-upload-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	fmt.Printf("# %s %s/%s, %d CPUs, parallelism %d, tree %d MiB in %d files\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), *par, *treeMiB, *files)

	src := filepath.Join(work, "src")
	if err := writeTree(src, *files, int64(*treeMiB)<<20, 1); err != nil {
		return err
	}
	tree, err := codetree.Read(src, codetree.Options{})
	if err != nil {
		return err
	}
	var all []result
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-hosts: bad size %q", s)
		}
		rs, err := benchSize(self, work, src, tree, n, *rounds, *par)
		if err != nil {
			return fmt.Errorf("%d hosts: %w", n, err)
		}
		all = append(all, rs...)
	}
	if *hashMiB > 0 {
		rs, err := benchHash(work, *hashFiles, int64(*hashMiB)<<20, *rounds)
		if err != nil {
			return fmt.Errorf("hash: %w", err)
		}
		all = append(all, rs...)
	}
	summarize(os.Stdout, all)
	return nil
}

// writeTree fills dir with n files totalling size bytes of source-like
// text (lines of identifiers and numbers drawn from a seeded generator):
// it compresses about as code does, so gzip on the wire is neither free
// nor useless. Files sit 50 to a directory.
func writeTree(dir string, n int, size int64, seed uint64) error {
	r := rand.New(rand.NewPCG(seed, 0))
	words := []string{"def", "return", "self", "import", "torch", "tensor", "model", "loss", "for", "in", "range", "if", "else", "x", "y", "batch", "grad", "=", "(", ")", ":", "+", "*", "0.5", "1", "layer", "optim", "step"}
	per := size / int64(n)
	for i := 0; i < n; i++ {
		d := filepath.Join(dir, fmt.Sprintf("pkg%03d", i/50))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		var b strings.Builder
		for int64(b.Len()) < per {
			for w := 0; w < 8; w++ {
				b.WriteString(words[r.IntN(len(words))])
				if r.IntN(4) == 0 {
					b.WriteString(strconv.Itoa(r.IntN(100000)))
				}
				b.WriteByte(' ')
			}
			b.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("mod%04d.py", i)), []byte(b.String()[:per]), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func benchSize(self, work, src string, tree *codetree.Tree, n, rounds, par int) ([]result, error) {
	dir := filepath.Join(work, fmt.Sprintf("sandbox-%d", n))
	srv := exec.Command(self, "serve", "-hosts", strconv.Itoa(n), "-dir", dir)
	srv.Stderr = os.Stderr
	stdout, err := srv.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, err
	}
	defer func() {
		_ = srv.Process.Signal(syscall.SIGTERM)
		_ = srv.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		return nil, fmt.Errorf("sandbox did not start: %q %v", line, err)
	}
	cfg, diags := config.Load(dir, config.LoadOptions{})
	if diags.HasErrors() {
		return nil, fmt.Errorf("%s: %s", dir, diags.Error())
	}
	machines, err := probe.Machines(cfg)
	if err != nil {
		return nil, err
	}
	homes := make([]string, len(machines))
	for i, m := range machines {
		homes[i] = filepath.Join(dir, "machines", m.Name, "home")
		if _, err := os.Stat(homes[i]); err != nil {
			return nil, fmt.Errorf("machine %s: its home is not where the benchmark cleans up: %w", m.Name, err)
		}
	}
	base := result{Hosts: n, Parallelism: par, Files: len(tree.Files), TreeMiB: float64(tree.Size) / (1 << 20)}
	var out []result
	emit := func(r result) {
		r.Load1 = stats.Load1()
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
		out = append(out, r)
	}
	// Round 0 is an unmeasured warm-up: page cache, first exec of ssh and tar.
	for round := 0; round <= rounds; round++ {
		order := []string{"gpulayer", "openssh"}
		if round%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		job := fmt.Sprintf("bench-r%d", round)
		for _, c := range order {
			r := base
			r.What, r.Client, r.Round = "upload", c, round
			start := time.Now()
			var sent int64
			var err error
			if c == "gpulayer" {
				sent, err = gpulayerUpload(machines, tree, job, par)
			} else {
				err = opensshUpload(machines, src, ".openssh/"+job, par)
			}
			r.WallSeconds, r.SentBytes = time.Since(start).Seconds(), sent
			if err != nil {
				return nil, fmt.Errorf("%s, round %d: %w", c, round, err)
			}
			if err := checkUnpacked(homes, c, job, len(tree.Files)); err != nil {
				return nil, err
			}
			if round > 0 {
				emit(r)
			}
			if c == "gpulayer" && round == rounds {
				// The code is unchanged: apply asks and sends nothing.
				r := base
				r.What, r.Client, r.Round = "reupload", "gpulayer", round
				start := time.Now()
				sent, err := gpulayerUpload(machines, tree, job, par)
				r.WallSeconds, r.SentBytes = time.Since(start).Seconds(), sent
				if err != nil {
					return nil, fmt.Errorf("second upload: %w", err)
				}
				emit(r)
			}
			if err := settle(homes); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// settle removes what the last upload unpacked and waits for the disk to
// take it, so that each measurement starts from the same empty, written-back
// machines. Without it the client that went first in a round paid for the
// previous round's removal (hundreds of MiB of dirty pages written back under
// it): 9-10 s first against 2-3 s second, whichever client it was.
func settle(homes []string) error {
	for _, h := range homes {
		if err := os.RemoveAll(filepath.Join(h, ".gpulayer")); err != nil {
			return err
		}
		if err := os.RemoveAll(filepath.Join(h, ".openssh")); err != nil {
			return err
		}
	}
	syscall.Sync()
	time.Sleep(settlePause)
	return nil
}

// settlePause lets the writeback that sync started and the sandbox's
// reaped shells finish before the next client's clock starts.
const settlePause = 2 * time.Second

// checkUnpacked makes sure each machine holds the whole tree, so a client
// that returned early without copying is not measured as fast.
func checkUnpacked(homes []string, client, job string, files int) error {
	for _, h := range homes {
		root := filepath.Join(h, ".openssh", job)
		if client == "gpulayer" {
			ds, _ := filepath.Glob(filepath.Join(h, launch.CodeRoot, job, "*"))
			if len(ds) != 1 {
				return fmt.Errorf("%s: %d code directories of %s, want 1", h, len(ds), job)
			}
			root = ds[0]
		}
		got, _ := filepath.Glob(filepath.Join(root, "pkg*", "*.py"))
		if len(got) != files {
			return fmt.Errorf("%s: %s unpacked %d files, want %d", h, client, len(got), files)
		}
	}
	return nil
}

// gpulayerUpload is apply's own upload of a job's code (apply.UploadCode)
// to every machine, par at a time, over one new pool: it returns the
// bytes streamed, all machines together.
func gpulayerUpload(machines []probe.Machine, tree *codetree.Tree, job string, par int) (int64, error) {
	pool := ssh.NewPool(ssh.Options{Parallelism: par})
	defer pool.Close()
	targets := map[string]ssh.Target{}
	for _, m := range machines {
		targets[m.Name] = m.Target
	}
	var sent int64
	for _, u := range apply.UploadCode(context.Background(), pool, job, tree, targets, apply.UploadOptions{Parallelism: par}) {
		if u.Err != nil {
			return 0, fmt.Errorf("%s: %w", u.Host, u.Err)
		}
		sent += u.Bytes
	}
	return sent, nil
}

// opensshUpload pipes `tar c` into one ssh per machine, par at a time.
func opensshUpload(machines []probe.Machine, src, dest string, par int) error {
	return fanOut(machines, par, func(m probe.Machine) error {
		t := m.Target
		args := append(openssh.Options(t), "-p", strconv.Itoa(t.Port), "-l", t.User)
		args = append(args, t.Address, "mkdir -p "+ssh.Quote(dest)+" && tar x -C "+ssh.Quote(dest))
		line := "tar c -C " + ssh.Quote(src) + " . | ssh " + quoteAll(args)
		// bash for pipefail: a tar c that failed must fail the copy.
		if b, err := exec.Command("bash", "-o", "pipefail", "-c", line).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", m.Name, err, b)
		}
		return nil
	})
}

func quoteAll(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = ssh.Quote(a)
	}
	return strings.Join(q, " ")
}

// fanOut runs one per machine, par at a time, and returns the first error.
func fanOut(machines []probe.Machine, par int, one func(probe.Machine) error) error {
	errs := make([]error, len(machines))
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(par, len(machines)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				errs[i] = one(machines[i])
			}
		}()
	}
	for i := range machines {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// benchHash times the plan-time read of a tree: every file walked,
// ignore rules applied and content hashed. The tree was just written, so
// it is in the page cache, as a tree being edited is.
func benchHash(work string, files int, size int64, rounds int) ([]result, error) {
	dir := filepath.Join(work, "hash")
	if err := writeTree(dir, files, size, 2); err != nil {
		return nil, err
	}
	var out []result
	for round := 0; round <= rounds; round++ {
		start := time.Now()
		tree, err := codetree.Read(dir, codetree.Options{MaxSize: 2 * size})
		wall := time.Since(start)
		if err != nil {
			return nil, err
		}
		if round == 0 {
			continue
		}
		r := result{What: "hash", Round: round, Files: len(tree.Files), TreeMiB: float64(tree.Size) / (1 << 20), WallSeconds: wall.Seconds(), Load1: stats.Load1()}
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
		out = append(out, r)
	}
	return out, os.RemoveAll(dir)
}

// serve runs a sandbox whose machines run /bin/sh until SIGTERM.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	hosts := fs.Int("hosts", 16, "machines")
	dir := fs.String("dir", "", "sandbox directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sb, err := sandbox.Start(sandbox.Options{Hosts: *hosts, Dir: *dir, Shell: "/bin/sh"})
	if err != nil {
		return err
	}
	defer sb.Close()
	fmt.Println("ready")
	<-ctx.Done()
	return nil
}

func summarize(w io.Writer, rs []result) {
	type key struct {
		what, client string
		hosts        int
	}
	groups := map[key][]result{}
	var sizes []int
	seen := map[int]bool{}
	for _, r := range rs {
		k := key{r.What, r.Client, r.Hosts}
		groups[k] = append(groups[k], r)
		if r.Hosts > 0 && !seen[r.Hosts] {
			seen[r.Hosts] = true
			sizes = append(sizes, r.Hosts)
		}
	}
	sort.Ints(sizes)
	wall := func(r result) float64 { return r.WallSeconds }
	fmt.Fprintf(w, "\n# medians\n%-6s  %-14s  %-14s  %-7s  %-18s  %-18s  %s\n", "hosts", "gpulayer wall", "openssh wall", "ratio", "gpulayer sent", "second upload", "load1")
	for _, n := range sizes {
		g, o, re := groups[key{"upload", "gpulayer", n}], groups[key{"upload", "openssh", n}], groups[key{"reupload", "gpulayer", n}]
		gw, ow := stats.Median(g, wall), stats.Median(o, wall)
		second := "-"
		if len(re) > 0 {
			second = fmt.Sprintf("%.3f s, %d B", re[0].WallSeconds, re[0].SentBytes)
		}
		fmt.Fprintf(w, "%-6d  %-14s  %-14s  %-7s  %-18s  %-18s  %.1f\n", n, fmt.Sprintf("%.3f s", gw), fmt.Sprintf("%.3f s", ow), fmt.Sprintf("%.2fx", gw/ow),
			fmt.Sprintf("%.1f MiB", stats.Median(g, func(r result) float64 { return float64(r.SentBytes) / (1 << 20) })), second,
			stats.Median(append(g[:len(g):len(g)], o...), func(r result) float64 { return r.Load1 }))
	}
	if h := groups[key{"hash", "", 0}]; len(h) > 0 {
		fmt.Fprintf(w, "\nhash at plan time: %.0f MiB in %d files, median %.3f s (min %.3f s) over %d rounds\n",
			h[0].TreeMiB, h[0].Files, stats.Median(h, wall), stats.Min(h, wall), len(h))
	}
}

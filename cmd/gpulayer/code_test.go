package main

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/providers/sandbox"
	"github.com/gpulayer/gpulayer/reconcile/launch"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// homeOf is a sandbox machine's home directory.
func homeOf(t *testing.T, sb *sandbox.Sandbox, host string) string {
	t.Helper()
	for _, m := range sb.Machines {
		if m.Name == host {
			return filepath.Join(m.Dir, "home")
		}
	}
	t.Fatalf("no sandbox machine %s", host)
	return ""
}

// waitFile waits (10 s at most) until path holds want, and returns it.
func waitFile(t *testing.T, path, want string) string {
	t.Helper()
	var b []byte
	for range 200 {
		b, _ = os.ReadFile(path)
		if strings.Contains(string(b), want) {
			return string(b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never held %q: %q", path, want, b)
	return ""
}

const codeJob = `
job "train" {
  nodes         = 2
  gpus_per_node = 1
  launcher      = "plain"
  stop_timeout  = "2s"
  code {
    source  = "./src"
    exclude = ["*.pt"]
  }
  setup   = "echo setting up; echo ran >>\"$HOME/setup-count\""
  command = ["sh", "train.sh"]
}
`

// TestAJobRunsItsUploadedCodeAndItsSetupOnce: the job's tree, minus what
// .gitignore and exclude leave out, is unpacked on each machine and is
// the command's working directory (GPULAYER_CODE_DIR); its setup ran
// once per machine. A second launch of the same code sends nothing and
// skips the setup; an edit shows code_changed with counts, and the next
// apply sends the new tree and runs the setup again.
func TestAJobRunsItsUploadedCodeAndItsSetupOnce(t *testing.T) {
	sb, dir := sandboxJobs(t, 2, codeJob)
	src := filepath.Join(dir, "src")
	for name, text := range map[string]string{
		"train.sh":        "echo \"cwd=$(pwd) code=$GPULAYER_CODE_DIR\"; cat data.txt; while :; do sleep 1; done\n",
		"data.txt":        "v1\n",
		".gitignore":      "*.log\n!keep.log\n/wandb/\n**/cache/**\n",
		"keep.log":        "kept\n",
		"run.log":         "ignored\n",
		"model.pt":        "ignored\n",
		"wandb/run.txt":   "ignored\n",
		"lib/cache/x.bin": "ignored\n",
		"lib/util.sh":     "kept\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(src, name), text)
	}
	out := mustApply(t, dir)
	j := loadState(t, dir).Job("train")
	if j.Spec.Code == nil || j.Spec.Code.Files != 5 {
		t.Fatalf("code in state: %+v\n%s", j.Spec.Code, out)
	}
	for _, n := range j.Nodes {
		home := homeOf(t, sb, n.Host)
		codeDir := filepath.Join(home, launch.CodeDir("train", j.Spec.Code.Hash))
		log := waitFile(t, filepath.Join(home, launch.LogPath("train", j.RunID, n.Rank)), "v1")
		if want := "cwd=" + codeDir + " code=" + codeDir; !strings.Contains(log, want) {
			t.Errorf("node %d log %q, want %q", n.Rank, log, want)
		}
		for _, name := range []string{"train.sh", "keep.log", "lib/util.sh", ".gitignore"} {
			if _, err := os.Stat(filepath.Join(codeDir, name)); err != nil {
				t.Errorf("node %d: %s not sent: %v", n.Rank, name, err)
			}
		}
		for _, name := range []string{"run.log", "model.pt", "wandb", "lib/cache"} {
			if _, err := os.Stat(filepath.Join(codeDir, name)); err == nil {
				t.Errorf("node %d: %s was sent", n.Rank, name)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(home, "setup-count")); string(b) != "ran\n" {
			t.Errorf("node %d: setup ran %q", n.Rank, b)
		}
		if b, _ := os.ReadFile(filepath.Join(home, launch.SetupLogPath("train", j.RunID, n.Rank))); !strings.Contains(string(b), "setting up") {
			t.Errorf("node %d: setup log %q", n.Rank, b)
		}
	}

	out = mustApply(t, dir, "--replace", "job.train")
	if strings.Count(out, "code already on the machine") != 2 || strings.Contains(out, "uploading") ||
		strings.Count(out, "already done on this machine") != 2 {
		t.Errorf("a relaunch of the same code:\n%s", out)
	}

	writeFile(t, filepath.Join(src, "data.txt"), "v2\n")
	writeFile(t, filepath.Join(src, "new.py"), "print()\n")
	if err := os.Remove(filepath.Join(src, "keep.log")); err != nil {
		t.Fatal(err)
	}
	code, planOut, errOut := runCmd(t, "plan", dir)
	if code != 0 || !strings.Contains(planOut, "code_changed") || !strings.Contains(planOut, "1 file added, 1 changed, 1 removed") {
		t.Fatalf("plan after an edit: exit %d\n%s%s", code, planOut, errOut)
	}
	out = mustApply(t, dir)
	if strings.Count(out, "uploading") != 2 {
		t.Errorf("apply after an edit sent the code %d times:\n%s", strings.Count(out, "uploading"), out)
	}
	j = loadState(t, dir).Job("train")
	for _, n := range j.Nodes {
		home := homeOf(t, sb, n.Host)
		waitFile(t, filepath.Join(home, launch.LogPath("train", j.RunID, n.Rank)), "v2")
		if b, _ := os.ReadFile(filepath.Join(home, "setup-count")); string(b) != "ran\nran\n" {
			t.Errorf("node %d: setup ran %q for two codes", n.Rank, b)
		}
	}
}

// TestCodeThatCannotBeSentIsRefusedNamingThePath: a link out of the
// source, a FIFO and a tree over max_size each fail the plan, naming the
// path, and nothing is launched.
func TestCodeThatCannotBeSentIsRefusedNamingThePath(t *testing.T) {
	for _, tc := range []struct {
		name, maxSize, bad, want string
		make                     func(path string) error
	}{
		{"link outside", "", "passwd", "points outside the source", func(p string) error { return os.Symlink("/etc/passwd", p) }},
		{"link up and out", "", "up", "points outside the source", func(p string) error { return os.Symlink("../../..", p) }},
		{"fifo", "", "pipe", "a FIFO", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{"too large", `max_size = "1KiB"`, "big.bin", "over max_size", func(p string) error { return os.WriteFile(p, make([]byte, 2048), 0o644) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := `
job "train" {
  nodes    = 1
  launcher = "plain"
  code {
    source = "./src"
    ` + tc.maxSize + `
  }
  command = ["sh", "train.sh"]
}
`
			_, dir := sandboxJobs(t, 1, job)
			src := filepath.Join(dir, "src")
			if err := os.MkdirAll(src, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(src, "train.sh"), "echo hi\n")
			if err := tc.make(filepath.Join(src, tc.bad)); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := runCmd(t, "plan", dir)
			if code != 1 || !strings.Contains(errOut, filepath.Join(src, tc.bad)) || !strings.Contains(errOut, tc.want) {
				t.Fatalf("plan: exit %d\n%s%s", code, out, errOut)
			}
			if code, _, _ := runCmd(t, "apply", dir, "--auto-approve"); code != 1 || loadState(t, dir).Job("train") != nil {
				t.Fatalf("apply of refused code: exit %d", code)
			}
		})
	}
}

// TestAFailingSetupFailsTheLaunchWithItsLogTail: a setup that fails on
// one node starts nothing anywhere, and apply says which node, with its
// exit status and the end of its setup log.
func TestAFailingSetupFailsTheLaunchWithItsLogTail(t *testing.T) {
	job := `
job "train" {
  nodes    = 2
  launcher = "plain"
  setup    = "echo resolving; if [ \"$NODE_RANK\" = 1 ]; then echo no matching distribution >&2; exit 3; fi"
  command  = ["sh", "-c", "while :; do sleep 1; done"]
}
`
	_, dir := sandboxJobs(t, 2, job)
	code, out, errOut := runCmd(t, "apply", dir, "--auto-approve")
	all := out + errOut
	if code != 1 || !strings.Contains(all, "node 1") || !strings.Contains(all, "setup exited with status 3") ||
		!strings.Contains(all, "no matching distribution") {
		t.Fatalf("apply: exit %d\n%s", code, all)
	}
	j := loadState(t, dir).Job("train")
	if j == nil || j.Status != "failed" {
		t.Fatalf("state: %+v", j)
	}
	if pids := runProcesses(j.RunID); len(pids) > 0 {
		t.Errorf("processes of the failed launch run: %v", pids)
	}
	for _, n := range j.Nodes {
		if n.Process != nil {
			t.Errorf("node %d recorded as started: %+v", n.Rank, n.Process)
		}
	}
}

// TestStatusAndPlanShowAFailedSetupsLogOnOneReadableLine: after a setup
// failed, status's "last failure" and the plan's reason quote the setup
// log's end. The launch error's line breaks were kept in state and shown
// as U+FFFD on the one line ("the log ends with:<U+FFFD>  | resolving").
// And status said "run it again with: gpulayer apply --replace" of a
// launch the plan replaces anyway (launch_incomplete), with "master
// 127.0.0.1:0" for the rendezvous node 0 never chose.
func TestStatusAndPlanShowAFailedSetupsLogOnOneReadableLine(t *testing.T) {
	job := `
job "train" {
  nodes    = 1
  launcher = "plain"
  setup    = "echo resolving; echo no matching distribution >&2; exit 3"
  command  = ["sh", "-c", "while :; do sleep 1; done"]
}
`
	_, dir := sandboxJobs(t, 1, job)
	if code, out, errOut := runCmd(t, "apply", dir, "--auto-approve"); code != 1 || !strings.Contains(errOut, "setup exited with status 3") {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	want := "the log ends with: resolving | no matching distribution"
	code, out, errOut := runCmd(t, "status", dir)
	if code != 0 || strings.ContainsRune(out, '\uFFFD') || !strings.Contains(out, want) ||
		strings.Contains(out, "--replace") || !strings.Contains(out, "the next apply launches it again") || strings.Contains(out, "master 127.0.0.1:0") {
		t.Errorf("status: exit %d, want %q on one line without U+FFFD:\n%s%s", code, want, out, errOut)
	}
	code, out, errOut = runCmd(t, "plan", dir)
	if code != 0 || strings.ContainsRune(out, '\uFFFD') || !strings.Contains(out, "launch_incomplete") || !strings.Contains(out, want) {
		t.Errorf("plan: exit %d, want %q on one line without U+FFFD:\n%s%s", code, want, out, errOut)
	}
}

// cutProxy forwards TCP connections to a machine and, while armed, closes
// the first connection through which more than after bytes went towards
// the machine: an SSH connection lost in the middle of what it carries.
// It cuts once, then forwards everything.
type cutProxy struct {
	l      net.Listener
	target string
	after  int64
	armed  atomic.Bool
	cutAt  atomic.Int64 // bytes forwarded on the cut connection; 0 until cut
}

func startCutProxy(t *testing.T, target string, after int64) *cutProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{l: l, target: target, after: after}
	var conns sync.WaitGroup
	t.Cleanup(func() { l.Close(); conns.Wait() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() { defer conns.Done(); p.forward(c) }()
		}
	}()
	return p
}

func (p *cutProxy) port() int { return p.l.Addr().(*net.TCPAddr).Port }

func (p *cutProxy) forward(c net.Conn) {
	defer c.Close()
	m, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer m.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(c, m); done <- struct{}{} }()
	go func() {
		defer func() { done <- struct{}{} }()
		var sent int64
		buf := make([]byte, 32<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				if _, werr := m.Write(buf[:n]); werr != nil {
					return
				}
				sent += int64(n)
				if sent > p.after && p.armed.CompareAndSwap(true, false) {
					p.cutAt.Store(sent)
					return // both ends closed by forward's defers
				}
			}
			if err != nil {
				return
			}
		}
	}()
	<-done
}

// behindProxy makes the sandbox's configuration reach machine i through a
// cutProxy (its host key trusted at the proxy's address too).
func behindProxy(t *testing.T, sb *sandbox.Sandbox, i int, after int64) *cutProxy {
	t.Helper()
	m := sb.Machines[i]
	real := net.JoinHostPort("127.0.0.1", strconv.Itoa(m.Port))
	p := startCutProxy(t, real, after)
	proxied := net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port()))
	hcl, err := os.ReadFile(sb.ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(hcl), strconv.Quote(real)) {
		t.Fatalf("%s does not declare %s", sb.ConfigPath(), real)
	}
	writeFile(t, sb.ConfigPath(), strings.Replace(string(hcl), strconv.Quote(real), strconv.Quote(proxied), 1))
	known, err := os.ReadFile(sb.KnownHostsPath())
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(known), "\n") {
		if strings.HasPrefix(l, "["+"127.0.0.1]:"+strconv.Itoa(m.Port)+" ") {
			line = "[127.0.0.1]:" + strconv.Itoa(p.port()) + l[strings.IndexByte(l, ' '):]
		}
	}
	if line == "" {
		t.Fatalf("no known_hosts line for %s", real)
	}
	writeFile(t, sb.KnownHostsPath(), string(known)+line+"\n")
	return p
}

// TestAnUploadCutMidStreamIsCompletedByTheNextApply: the SSH connection to
// one of a job's two machines is cut in the middle of its code's tar
// stream. The apply fails naming that machine; no code directory is left
// at the hash's name there (a temporary one at most), no process started
// on either machine, and state records the launch as failed with no
// process and no leftover. The next apply sends the code to that machine
// only (the other has it whole) and the job runs in the complete
// directory, every file there byte for byte.
func TestAnUploadCutMidStreamIsCompletedByTheNextApply(t *testing.T) {
	job := `
job "train" {
  nodes         = 2
  gpus_per_node = 1
  launcher      = "plain"
  stop_timeout  = "2s"
  code { source = "./src" }
  command = ["sh", "train.sh"]
}
`
	sb, dir := sandboxJobs(t, 2, job)
	src := filepath.Join(dir, "src")
	// 48 files of 128 KiB that gzip cannot shrink: a 6 MiB stream, cut
	// after 1 MiB (the probe and the has-code question are a few KiB).
	rng := rand.New(rand.NewPCG(18, 0))
	want := map[string][]byte{"train.sh": []byte("echo \"cwd=$(pwd) files=$(ls data | wc -l)\"; while :; do sleep 1; done\n")}
	for i := range 48 {
		b := make([]byte, 128<<10)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		want[fmt.Sprintf("data/part-%02d.bin", i)] = b
	}
	for name, b := range want {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cut := sb.Machines[0].Name
	proxy := behindProxy(t, sb, 0, 1<<20)
	proxy.armed.Store(true)

	code, out, errOut := runCmd(t, "apply", dir, "--auto-approve")
	all := out + errOut
	if proxy.cutAt.Load() == 0 {
		t.Fatalf("the connection was never cut: exit %d\n%s", code, all)
	}
	if code != 1 || !strings.Contains(errOut, "on "+cut+": sending its code") || !strings.Contains(all, "1 failed to launch") {
		t.Fatalf("apply with the connection cut after %d bytes: exit %d\n%s", proxy.cutAt.Load(), code, all)
	}
	st := loadState(t, dir)
	j := st.Job("train")
	if j == nil || j.Status != state.JobFailed || !strings.Contains(j.Error, cut) || len(st.Leftovers) != 0 {
		t.Fatalf("state after the cut upload: %+v, leftovers %+v", j, st.Leftovers)
	}
	for _, n := range j.Nodes {
		if n.Process != nil {
			t.Errorf("node %d recorded as started: %+v", n.Rank, n.Process)
		}
	}
	if pids := runProcesses(j.RunID); len(pids) > 0 {
		t.Errorf("processes of the failed launch run: %v", pids)
	}
	hash := j.Spec.Code.Hash
	codeRoot := filepath.Join(homeOf(t, sb, cut), launch.CodeRoot, "train")
	if _, err := os.Stat(filepath.Join(codeRoot, hash)); err == nil {
		t.Fatalf("the cut upload left a code directory at %s", filepath.Join(codeRoot, hash))
	}
	entries, _ := os.ReadDir(codeRoot)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("the cut upload left %s in %s", e.Name(), codeRoot)
		}
	}
	t.Logf("cut after %d bytes; %s holds %d temporary entries", proxy.cutAt.Load(), codeRoot, len(entries))
	// Each machine's upload lines name the node that machine runs.
	for _, n := range j.Nodes {
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, " "+n.Host+": upload") && !strings.HasPrefix(l, fmt.Sprintf("train[%d] ", n.Rank)) {
				t.Errorf("node %d on %s reported as %q", n.Rank, n.Host, l)
			}
		}
	}
	// What the killed session left is swept by a later upload once older
	// than any upload lasts.
	old := time.Now().Add(-2 * time.Hour)
	for _, e := range entries {
		if err := os.Chtimes(filepath.Join(codeRoot, e.Name()), old, old); err != nil {
			t.Fatal(err)
		}
	}

	out = mustApply(t, dir)
	if strings.Count(out, "uploading") != 1 || !strings.Contains(out, cut+": uploading") || strings.Count(out, "code already on the machine") != 1 {
		t.Errorf("the apply after the cut did not send the code to %s alone:\n%s", cut, out)
	}
	j = loadState(t, dir).Job("train")
	if j.Status != state.JobRunning {
		t.Fatalf("job after the second apply: %+v", j)
	}
	if entries, _ := os.ReadDir(codeRoot); len(entries) != 1 || entries[0].Name() != hash {
		t.Errorf("after the second apply %s holds %v, want only %s", codeRoot, entries, hash)
	}
	for _, n := range j.Nodes {
		home := homeOf(t, sb, n.Host)
		codeDir := filepath.Join(home, launch.CodeDir("train", hash))
		log := waitFile(t, filepath.Join(home, launch.LogPath("train", j.RunID, n.Rank)), "files=")
		if w := fmt.Sprintf("cwd=%s files=%d", codeDir, len(want)-1); !strings.Contains(log, w) {
			t.Errorf("node %d on %s: log %q, want %q", n.Rank, n.Host, log, w)
		}
		for name, b := range want {
			if got, err := os.ReadFile(filepath.Join(codeDir, name)); err != nil || !bytes.Equal(got, b) {
				t.Errorf("node %d on %s: %s not whole (%d of %d bytes, %v)", n.Rank, n.Host, name, len(got), len(b), err)
			}
		}
	}
}

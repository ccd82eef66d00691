package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/providers/sandbox"
	"github.com/gpulayer/gpulayer/reconcile/launch"
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

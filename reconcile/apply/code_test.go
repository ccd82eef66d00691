package apply_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/codetree"
	"github.com/gpulayer/gpulayer/reconcile/apply"
	"github.com/gpulayer/gpulayer/reconcile/launch"
	"github.com/gpulayer/gpulayer/ssh"
)

// codeFleet is a fleet of n machines, how to reach each, and a tree of
// code to send them.
func codeFleet(t *testing.T, n int) (*fleet, map[string]ssh.Target, string, *codetree.Tree) {
	t.Helper()
	f := newFleet(t, n)
	cfg := f.jobs("")
	targets := f.executor(cfg).Targets
	src := t.TempDir()
	for i, name := range []string{"train.py", "lib/model.py", "data.bin"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), []byte(strings.Repeat("x = 1\n", 1000*(i+1))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tree, err := codetree.Read(src, codetree.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return f, targets, src, tree
}

// TestUploadCodeSendsOnlyWhereTheCodeIsMissing: apply's upload sends the
// tree to each machine, whole, and says how many bytes each got; asked
// again it sends nothing anywhere.
func TestUploadCodeSendsOnlyWhereTheCodeIsMissing(t *testing.T) {
	f, targets, _, tree := codeFleet(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var steps []string
	sent := apply.UploadCode(ctx, f.pool, "train", tree, targets, apply.UploadOptions{Parallelism: 2, Progress: func(ev apply.Event) {
		steps = append(steps, ev.Host+" "+ev.Step)
	}})
	if len(sent) != 3 {
		t.Fatalf("%d machines reported, want 3", len(sent))
	}
	for _, s := range sent {
		if s.Err != nil || !s.Sent || s.Bytes == 0 || s.Bytes != sent[0].Bytes {
			t.Errorf("%s: %+v", s.Host, s)
		}
		if b, err := os.ReadFile(filepath.Join(f.home(s.Host), launch.CodeDir("train", tree.Hash), "lib", "model.py")); err != nil || len(b) != 12000 {
			t.Errorf("%s: lib/model.py %d bytes, %v", s.Host, len(b), err)
		}
	}
	if len(steps) != 6 {
		t.Errorf("steps %v, want uploading and uploaded for each machine", steps)
	}
	for _, s := range apply.UploadCode(ctx, f.pool, "train", tree, targets, apply.UploadOptions{}) {
		if s.Err != nil || s.Sent || s.Bytes != 0 {
			t.Errorf("again, %s: %+v", s.Host, s)
		}
	}
}

// TestUploadOfCodeChangedSinceThePlanSaysSo: a file edited after the plan
// hashed the tree cuts the stream short; each machine's error says the
// code changed since the plan (not only that tar found the archive
// truncated), and no machine holds a code directory.
func TestUploadOfCodeChangedSinceThePlanSaysSo(t *testing.T) {
	for _, n := range []int{1, 2} { // one machine gets the stream as it is made; more, a shared archive
		t.Run(fmt.Sprintf("%d machines", n), func(t *testing.T) {
			f, targets, src, tree := codeFleet(t, n)
			if err := os.WriteFile(filepath.Join(src, "lib", "model.py"), []byte(strings.Repeat("x = 2\n", 2000)), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for _, s := range apply.UploadCode(ctx, f.pool, "train", tree, targets, apply.UploadOptions{}) {
				if s.Err == nil || !strings.Contains(s.Err.Error(), "changed since the plan hashed the code") || !strings.Contains(s.Err.Error(), "model.py") {
					t.Errorf("%s: %v", s.Host, s.Err)
				}
				if _, err := os.Stat(filepath.Join(f.home(s.Host), launch.CodeDir("train", tree.Hash))); err == nil {
					t.Errorf("%s holds a code directory of a changed tree", s.Host)
				}
			}
		})
	}
}

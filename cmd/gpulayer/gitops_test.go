package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/reconcile/state/gcsstate/gcstest"
)

// gcsConfig is a configuration whose state is in the fake's bucket.
func gcsConfig(t *testing.T, fake *gcstest.Server) string {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.hcl"), fmt.Sprintf(`backend "gcs" {
  bucket   = "team-gpulayer"
  prefix   = "gpulayer/prod"
  endpoint = %q
}

fleet "lab" {
  host "a1" { address = "10.1.0.11" }
}
`, fake.URL))
	return dir
}

// TestPlanUsesTheBackendBlock: with a gcs backend the plan reads state
// from the bucket and takes (and gives back) its lock object; a held lock
// object names its holder.
func TestPlanUsesTheBackendBlock(t *testing.T) {
	fake := gcstest.Start(t)
	dir := gcsConfig(t, fake)
	code, out, errOut := runCmd(t, "plan", dir, "--facts", quickstartFacts)
	if code != 0 || !strings.Contains(out, "No changes") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if fake.Requests["POST"] == 0 {
		t.Error("the plan took no lock in the bucket")
	}
	if _, _, ok := fake.Object("team-gpulayer", "gpulayer/prod/default.lock"); ok {
		t.Error("the plan left its lock behind")
	}
	holder, _ := json.Marshal(state.LockInfo{ID: "4f6bc847", Command: "gpulayer apply (ci run 41)", Host: "runner-7"})
	fake.Put("team-gpulayer", "gpulayer/prod/default.lock", holder)
	code, _, errOut = runCmd(t, "plan", dir, "--facts", quickstartFacts)
	if code != 1 || !strings.Contains(errOut, "ci run 41") || !strings.Contains(errOut, "4f6bc847") {
		t.Errorf("locked: exit %d, %q", code, errOut)
	}
	code, out, errOut = runCmd(t, "force-unlock", "4f6bc847", dir)
	if code != 0 || !strings.Contains(out, "broken") {
		t.Errorf("force-unlock: exit %d %q %q", code, out, errOut)
	}
}

// TestStatePushAndPullMoveStateBothWays: a local state moves into the
// bucket and back, keeping its lineage; a state of another lineage is
// never overwritten.
func TestStatePushAndPullMoveStateBothWays(t *testing.T) {
	fake := gcstest.Start(t)
	dir := gcsConfig(t, fake)
	local := filepath.Join(t.TempDir(), "state.json")
	s := state.New()
	s.SetJob(state.Job{Name: "train", Status: state.JobRunning, RunID: "r1"})
	if err := state.NewLocal(local).Save(context.Background(), s, 0); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCmd(t, "state", "push", local, dir); code != 0 || !strings.Contains(out, s.Lineage) {
		t.Fatalf("push: exit %d %q %q", code, out, errOut)
	}
	// --chdir moves the whole test process; t.Chdir puts it back.
	t.Chdir(dir)
	code, out, _ := runCmd(t, "show", "--json")
	var remote state.State
	if code != 0 || json.Unmarshal([]byte(out), &remote) != nil || remote.Lineage != s.Lineage || remote.Job("train") == nil {
		t.Fatalf("show of the bucket's state: exit %d %s", code, out)
	}
	back := filepath.Join(t.TempDir(), "state.json")
	if code, out, errOut := runCmd(t, "state", "pull", back, dir); code != 0 || !strings.Contains(out, s.Lineage) {
		t.Fatalf("pull: exit %d %q %q", code, out, errOut)
	}
	got, err := state.NewLocal(back).Load(context.Background())
	if err != nil || got.Lineage != s.Lineage || got.Job("train") == nil {
		t.Fatalf("pulled %+v %v", got, err)
	}
	// Another configuration's state is refused both ways.
	other := filepath.Join(t.TempDir(), "state.json")
	if err := state.NewLocal(other).Save(context.Background(), state.New(), 0); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCmd(t, "state", "push", other, dir); code != 1 || !strings.Contains(errOut, "another lineage") {
		t.Errorf("push of another lineage: exit %d %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "state", "pull", other, dir); code != 1 || !strings.Contains(errOut, "another lineage") {
		t.Errorf("pull over another lineage: exit %d %q", code, errOut)
	}
}

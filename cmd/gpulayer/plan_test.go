package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

const (
	quickstart      = "../../examples/quickstart"
	quickstartFacts = "../../testdata/facts/quickstart.json"
)

// runCmd runs one command line against buffers.
func runCmd(t testing.TB, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	io, _, out, errOut := iostreams.Test()
	code = run(args, io)
	return code, out.String(), errOut.String()
}

// TestPlanOfflineIsStableAndExitsTwo is the acceptance of plan: the
// quickstart planned from its saved facts, with no network, exits 2 with
// --detailed-exitcode and prints the same bytes every time.
func TestPlanOfflineIsStableAndExitsTwo(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	args := []string{"plan", quickstart, "--facts", quickstartFacts, "--state", state, "--detailed-exitcode"}
	code, first, errOut := runCmd(t, args...)
	if code != 2 {
		t.Fatalf("exit %d, want 2 (changes); stderr:\n%s", code, errOut)
	}
	_, second, _ := runCmd(t, args...)
	if first != second {
		t.Errorf("two runs differ:\n%s\n---\n%s", first, second)
	}
	assertGolden(t, "plan/quickstart.golden", first)
	if _, err := os.Stat(filepath.Dir(state)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(quickstart, ".gpulayer")); err == nil {
		t.Error("plan wrote a .gpulayer directory into the configuration")
	}

	code, out, _ := runCmd(t, "plan", quickstart, "--facts", quickstartFacts, "--state", state, "--json")
	if code != 0 {
		t.Fatalf("--json exit %d", code)
	}
	var p reconcile.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("--json: %v", err)
	}
	if p.FormatVersion != reconcile.PlanFormatVersion || p.Summary.Launch != 1 || p.Summary.Waiting != 1 {
		t.Errorf("plan %+v", p.Summary)
	}
}

func TestPlanWithoutChangesExitsZero(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.hcl"), `fleet "lab" {
  host "a1" { address = "10.1.0.11" }
}
`)
	code, out, errOut := runCmd(t, "plan", dir, "--facts", quickstartFacts, "--detailed-exitcode")
	if code != 0 || !strings.Contains(out, "No changes. Your jobs match the configuration.") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

func TestPlanRejectsBadFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--target", "eval"}, `--target "eval": want job.NAME`},
		{[]string{"--target", "job.nope"}, `no job "nope" is declared`},
		{[]string{"--facts", quickstartFacts, "--refresh=true"}, "contradict"},
		{[]string{"--facts", "/dev/zero"}, "not a regular file"},
		{[]string{"--lock-timeout", "-1s"}, "must not be negative"},
		{[]string{"--probe-timeout", "0s"}, "must be positive"},
	}
	for _, c := range cases {
		args := append([]string{"plan", quickstart, "--state", filepath.Join(t.TempDir(), "s.json")}, c.args...)
		if !containsArg(c.args, "--facts") {
			args = append(args, "--facts", quickstartFacts)
		}
		code, _, errOut := runCmd(t, args...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want it to say %q", c.args, code, errOut, c.want)
		}
	}
}

func containsArg(args []string, a string) bool {
	for _, x := range args {
		if x == a {
			return true
		}
	}
	return false
}

// TestSavedPlanShowsAsPlannedAndIsRefusedOnceStale: show renders a saved
// plan as plan printed it; apply refuses it after state moved on.
func TestSavedPlanShowsAsPlannedAndIsRefusedOnceStale(t *testing.T) {
	dir := t.TempDir()
	statePath := filepath.Join(dir, "state.json")
	planPath := filepath.Join(dir, "quickstart.plan")
	code, planned, errOut := runCmd(t, "plan", quickstart, "--facts", quickstartFacts, "--state", statePath, "--out", planPath)
	if code != 0 {
		t.Fatalf("plan exit %d: %s", code, errOut)
	}
	fi, err := os.Stat(planPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("saved plan %v, mode %v: it may hold secrets and must be 0600", err, fi.Mode())
	}
	_, shown, _ := runCmd(t, "show", planPath)
	if !strings.HasPrefix(planned, shown) {
		t.Errorf("show differs from plan:\n%s\n---\n%s", shown, planned)
	}
	_, shownJSON, _ := runCmd(t, "show", planPath, "--json")
	_, planJSON, _ := runCmd(t, "plan", quickstart, "--facts", quickstartFacts, "--state", statePath, "--json")
	// The same plan, made at another time (made_at is when it was made).
	var shownDoc, planDoc map[string]any
	if json.Unmarshal([]byte(shownJSON), &shownDoc) != nil || json.Unmarshal([]byte(planJSON), &planDoc) != nil {
		t.Fatalf("not JSON:\n%s\n%s", shownJSON, planJSON)
	}
	delete(shownDoc, "made_at")
	delete(planDoc, "made_at")
	if a, b := fmt.Sprint(shownDoc), fmt.Sprint(planDoc); a != b {
		t.Errorf("show --json differs from plan --json:\n%s\n%s", a, b)
	}

	// Someone applies meanwhile: state moves to serial 1.
	st := state.NewLocal(statePath)
	s := state.New()
	if err := st.Save(context.Background(), s, 0); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCmd(t, "apply", planPath)
	if code != 1 || !strings.Contains(errOut, "saved plan is stale") {
		t.Errorf("apply of a stale plan: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runCmd(t, "apply", planPath, "--var", "epochs=5")
	if code != 1 || !strings.Contains(errOut, "--var cannot change a saved plan") {
		t.Errorf("apply of a saved plan with --var: exit %d, stderr %q", code, errOut)
	}
}

func TestApplyNeedsATerminalOrAutoApprove(t *testing.T) {
	code, out, errOut := runCmd(t, "apply", quickstart, "--facts", quickstartFacts, "--state", filepath.Join(t.TempDir(), "s.json"))
	if code != 1 || !strings.Contains(errOut, "standard input is not a terminal; run with --auto-approve") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if !strings.Contains(out, `+ job "eval" will be launched`) {
		t.Errorf("the plan was not shown before the refusal:\n%s", out)
	}
}

func TestApplyAsksForYesOnATerminal(t *testing.T) {
	for _, answer := range []string{"no\n", "yes please\n", ""} {
		io, in, out, errOut := iostreams.Test()
		io.SetStdinTTY(true)
		in.WriteString(answer)
		code := run([]string{"apply", quickstart, "--facts", quickstartFacts, "--state", filepath.Join(t.TempDir(), "s.json")}, io)
		if code != 1 || !strings.Contains(errOut.String(), "apply cancelled") || !strings.Contains(out.String(), "Only 'yes' will be accepted") {
			t.Errorf("answer %q: exit %d, stderr %q", answer, code, errOut.String())
		}
	}
}

// TestPlanFailsAtOnceNamingTheLockHolder: a plan while another process
// holds the lock fails at once, naming it; with --lock-timeout it waits.
func TestPlanFailsAtOnceNamingTheLockHolder(t *testing.T) {
	statePath := filepath.Join(t.TempDir(), "state.json")
	backend := state.NewLocal(statePath)
	if err := backend.Save(context.Background(), state.New(), 0); err != nil {
		t.Fatal(err)
	}
	lock, err := backend.Lock(context.Background(), state.NewLockInfo("gpulayer apply (a test)"), 0)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"plan", quickstart, "--facts", quickstartFacts, "--state", statePath}
	code, _, errOut := runCmd(t, args...)
	if code != 1 || !strings.Contains(errOut, `locked by "gpulayer apply (a test)"`) || !strings.Contains(errOut, lock.Info().ID) {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		lock.Unlock()
	}()
	code, _, errOut = runCmd(t, append(args, "--lock-timeout", "20s")...)
	if code != 0 {
		t.Fatalf("with --lock-timeout: exit %d, stderr %q", code, errOut)
	}
}

func TestForceUnlockBreaksOnlyTheNamedLock(t *testing.T) {
	statePath := filepath.Join(t.TempDir(), "state.json")
	backend := state.NewLocal(statePath)
	if err := backend.Save(context.Background(), state.New(), 0); err != nil {
		t.Fatal(err)
	}
	lock, err := backend.Lock(context.Background(), state.NewLockInfo("stuck"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	if code, _, errOut := runCmd(t, "force-unlock", "not-the-id", "--state", statePath); code != 1 || errOut == "" {
		t.Errorf("wrong id: exit %d, stderr %q", code, errOut)
	}
	if code, out, errOut := runCmd(t, "force-unlock", lock.Info().ID, "--state", statePath); code != 0 || !strings.Contains(out, "broken") {
		t.Errorf("right id: exit %d, %q %q", code, out, errOut)
	}
}

func TestShowWithoutAPlanShowsState(t *testing.T) {
	statePath := filepath.Join(t.TempDir(), "state.json")
	code, out, _ := runCmd(t, "show", "--state", statePath)
	if code != 0 || !strings.Contains(out, "No state yet") {
		t.Fatalf("exit %d: %q", code, out)
	}
	s := state.New()
	s.SetJob(state.Job{Name: "train", Status: state.JobRunning, RunID: "r01",
		Nodes: []state.Node{{Rank: 0, Host: "a1", Address: "10.1.0.11", GPUs: []int{4, 5, 6, 7}, Process: &state.Process{PID: 4211}}}})
	if err := state.NewLocal(statePath).Save(context.Background(), s, 0); err != nil {
		t.Fatal(err)
	}
	_, out, _ = runCmd(t, "show", "--state", statePath)
	for _, want := range []string{`job "train"  running  run r01`, "node 0  a1  10.1.0.11  GPUs 4-7  pid 4211"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	_, out, _ = runCmd(t, "show", "--state", statePath, "--json")
	var got state.State
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Jobs) != 1 || got.Facts != nil {
		t.Errorf("show --json: %v %+v", err, got)
	}
}

// TestDemoRunsTheWholeCycle is the README's first command, shortened: a
// sandbox fleet, apply, status, logs, plan, destroy, exit 0, nothing left.
func TestDemoRunsTheWholeCycle(t *testing.T) {
	code, out, errOut := runCmd(t, "demo", "--hosts", "4", "--run", "500ms")
	if code != 0 {
		t.Fatalf("demo exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		`+ job "train" will be launched`, "Apply complete: 2 launched", `job "train"  running`,
		"[train 0 ", "No changes to apply; 1 waiting.", "Destroy complete: 0 launched, 0 replaced, 2 stopped.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if bytes.Contains([]byte(errOut), []byte("Error")) {
		t.Errorf("stderr: %s", errOut)
	}
}

func writeFile(t testing.TB, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestApplyWaitsForTheLockThenPlansAfresh: of two applies started together
// the second fails at once naming the first, or with --lock-timeout waits
// for it and then makes its own plan.
func TestApplyWaitsForTheLockThenPlansAfresh(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.hcl"), `fleet "lab" {
  host "a1" { address = "10.1.0.11" }
}
`)
	statePath := filepath.Join(dir, "state.json")
	backend := state.NewLocal(statePath)
	if err := backend.Save(context.Background(), state.New(), 0); err != nil {
		t.Fatal(err)
	}
	lock, err := backend.Lock(context.Background(), state.NewLockInfo("gpulayer apply (the first)"), 0)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"apply", dir, "--facts", quickstartFacts, "--state", statePath, "--auto-approve"}
	code, _, errOut := runCmd(t, args...)
	if code != 1 || !strings.Contains(errOut, `locked by "gpulayer apply (the first)"`) {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		// The first apply saves, then lets go.
		s, _ := backend.Load(context.Background())
		_ = backend.Save(context.Background(), s, s.Serial)
		lock.Unlock()
	}()
	code, out, errOut := runCmd(t, append(args, "--lock-timeout", "20s")...)
	if code != 0 || !strings.Contains(out, "No changes") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

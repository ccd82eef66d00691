package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpulayer/gpulayer/providers/sandbox"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/ssh/sshdtest"
)

// sandboxJobs starts a sandbox of hosts machines (its sandbox.hcl declares
// every machine's region, zone and network group) and writes jobs beside
// its configuration; the directory is the configuration to plan.
func sandboxJobs(t *testing.T, hosts int, jobs string) (*sandbox.Sandbox, string) {
	t.Helper()
	sb := startProbeSandbox(t, hosts)
	writeFile(t, filepath.Join(sb.Dir, "jobs.hcl"), jobs)
	t.Cleanup(func() { runCmd(t, "destroy", sb.Dir, "--auto-approve") })
	return sb, sb.Dir
}

const sleeperJob = `
job "train" {
  nodes         = 2
  gpus_per_node = 2
  launcher      = "plain"
  stop_timeout  = "2s"
  command       = ["sh", "-c", "echo rank $NODE_RANK; while :; do sleep 1; done"]
}
`

// TestGitOpsFlowAppliesTheReviewedPlanOnTheSandbox is the GitOps flow of
// examples/gitops on the sandbox, whose fleet declares every host's
// location: plan --out on the pull request, apply of that file on merge.
// The apply re-probes the hosts the plan launches on with the locations
// the configuration declared, finds nothing changed and launches; the
// next plan has no changes.
func TestGitOpsFlowAppliesTheReviewedPlanOnTheSandbox(t *testing.T) {
	_, dir := sandboxJobs(t, 4, sleeperJob)
	planPath := filepath.Join(t.TempDir(), "reviewed.plan")
	if code, out, errOut := runCmd(t, "plan", dir, "--out", planPath); code != 0 || !strings.Contains(out, `+ job "train" will be launched`) {
		t.Fatalf("plan --out: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := runCmd(t, "apply", planPath)
	if code != 0 || !strings.Contains(out, "Apply complete: 1 launched") {
		t.Fatalf("apply of the reviewed plan: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "status", dir)
	if code != 0 || strings.Count(out, "running for") != 2 {
		t.Errorf("status after the saved plan: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCmd(t, "plan", dir, "--detailed-exitcode"); code != 0 {
		t.Errorf("plan after applying the reviewed plan: exit %d\n%s%s", code, out, errOut)
	}
}

// TestSavedPlanIsRefusedWhenAHostReallyMoved: a plan made from facts in
// which every machine's GCE metadata put it in zone europe-west1-d (the
// metadata ranks above the configuration) is refused once the machines
// no longer say so, naming the host and both places; nothing is launched.
func TestSavedPlanIsRefusedWhenAHostReallyMoved(t *testing.T) {
	_, dir := sandboxJobs(t, 4, sleeperJob)
	factsPath := filepath.Join(t.TempDir(), "facts.json")
	if code, _, errOut := runCmd(t, "probe", dir, "--out", factsPath); code != 0 {
		t.Fatalf("probe: exit %d %s", code, errOut)
	}
	data, err := os.ReadFile(factsPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc facts.Document
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for i := range doc.Hosts {
		doc.Hosts[i].Location.Source = facts.SourceGCEMetadata
		doc.Hosts[i].Location.Zone = "europe-west1-d"
	}
	data, _ = json.Marshal(&doc)
	writeFile(t, factsPath, string(data))
	planPath := filepath.Join(t.TempDir(), "old.plan")
	if code, out, errOut := runCmd(t, "plan", dir, "--facts", factsPath, "--out", planPath); code != 0 || !strings.Contains(out, "will be launched") {
		t.Fatalf("plan from the old facts: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := runCmd(t, "apply", planPath)
	if code != 1 || !strings.Contains(errOut, "saved plan is stale") || !strings.Contains(errOut, "now reports location") ||
		!strings.Contains(errOut, `not "europe-west1/europe-west1-d/`) {
		t.Fatalf("apply of a plan whose hosts moved: exit %d\n%s%s", code, out, errOut)
	}
	if _, out, _ := runCmd(t, "status", dir); strings.Contains(out, "running") {
		t.Errorf("a refused plan launched something:\n%s", out)
	}
}

// opensshFleet is one sandbox machine served by OpenSSH's sshd (its
// sessions run the user's real login shell), declared with its zone and
// network group, and jobs beside it. Skipped where sshd cannot run,
// except under CI=true.
func opensshFleet(t *testing.T, jobs string) string {
	t.Helper()
	dir := t.TempDir()
	_, env, err := sandbox.Prepare(filepath.Join(dir, "machine"), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sshPub, _ := gossh.NewPublicKey(pub)
	block, _ := gossh.MarshalPrivateKey(priv, "")
	keyFile := filepath.Join(dir, "id_ed25519")
	writeFile(t, keyFile, string(pem.EncodeToMemory(block)))
	srv := sshdtest.Start(t, sshdtest.Options{AuthorizedKeys: []gossh.PublicKey{sshPub}, SetEnv: env})
	known := filepath.Join(dir, "known_hosts")
	writeFile(t, known, srv.KnownHostsLine("127.0.0.1")+"\n")
	cfgDir := filepath.Join(dir, "config")
	if err := os.Mkdir(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(cfgDir, "main.hcl"), fmt.Sprintf(`
ssh "sshd" {
  user           = %q
  identity_file  = %q
  known_hosts    = %q
  host_key_check = "strict"
}
fleet "lab" {
  ssh    = ssh.sshd
  region = "europe-west4"
  zone   = "europe-west4-a"
  host "sshd" {
    address       = "127.0.0.1:%d"
    network_group = "rack-7"
  }
}
`, srv.User, keyFile, known, srv.Port))
	writeFile(t, filepath.Join(cfgDir, "jobs.hcl"), jobs)
	t.Cleanup(func() { runCmd(t, "destroy", cfgDir, "--auto-approve") })
	return cfgDir
}

// TestGitOpsFlowOverOpenSSH: the same flow against OpenSSH's sshd.
func TestGitOpsFlowOverOpenSSH(t *testing.T) {
	dir := opensshFleet(t, `
job "solo" {
  nodes         = 1
  gpus_per_node = 2
  launcher      = "plain"
  stop_timeout  = "2s"
  command       = ["sleep", "300"]
}
`)
	planPath := filepath.Join(t.TempDir(), "reviewed.plan")
	if code, out, errOut := runCmd(t, "plan", dir, "--out", planPath); code != 0 || !strings.Contains(out, `+ job "solo" will be launched`) {
		t.Fatalf("plan --out: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := runCmd(t, "apply", planPath)
	if code != 0 || !strings.Contains(out, "Apply complete: 1 launched") {
		t.Fatalf("apply of the reviewed plan: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCmd(t, "plan", dir, "--detailed-exitcode"); code != 0 {
		t.Errorf("plan after applying the reviewed plan: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "destroy", dir, "--auto-approve")
	if code != 0 || !strings.Contains(out, "1 stopped") {
		t.Errorf("destroy: exit %d\n%s%s", code, out, errOut)
	}
}

// runProcesses lists the live processes of this computer whose
// environment carries GPULAYER_RUN_ID=runID: on the sandbox every
// machine's processes are this computer's.
func runProcesses(runID string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil || strings.Contains(string(stat[strings.LastIndexByte(string(stat), ')')+1:]), " Z ") {
			continue
		}
		env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		if strings.Contains("\x00"+string(env), "\x00GPULAYER_RUN_ID="+runID+"\x00") {
			out = append(out, pid)
		}
	}
	return out
}

// TestARunOnAHostRemovedFromTheConfigurationIsStopped: a host that runs a
// node is removed from the configuration (and another moved to a new
// address); the plan replaces the job, apply stops the old run on the
// machines it was started on, reached as state recorded them, and
// launches the new one; status and destroy reach everything, and nothing
// of either run is left.
func TestARunOnAHostRemovedFromTheConfigurationIsStopped(t *testing.T) {
	sb, dir := sandboxJobs(t, 6, sleeperJob)
	if code, out, errOut := runCmd(t, "apply", dir, "--auto-approve"); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	first := loadState(t, dir).Job("train")
	if first == nil || len(runProcesses(first.RunID)) == 0 {
		t.Fatalf("no run started: %+v", first)
	}
	// Remove the first node's host from sandbox.hcl; declare the second
	// node's host by name instead of by address (another address, the
	// same machine: what a renumbering looks like from here).
	hcl, err := os.ReadFile(sb.ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	text := string(hcl)
	removed, moved := first.Nodes[0], first.Nodes[1]
	start := strings.Index(text, fmt.Sprintf("  host %q {", removed.Host))
	end := start + strings.Index(text[start:], "  }\n") + 4
	text = text[:start] + text[end:]
	text = strings.Replace(text, fmt.Sprintf("%q", fmt.Sprintf("%s:%d", moved.Address, moved.Port)), fmt.Sprintf("%q", fmt.Sprintf("localhost:%d", moved.Port)), 1)
	writeFile(t, sb.ConfigPath(), text)
	code, out, errOut := runCmd(t, "plan", dir)
	if code != 0 || !strings.Contains(out, "host_removed") || !strings.Contains(out, "address_changed") {
		t.Fatalf("plan: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCmd(t, "status", dir); code != 0 || strings.Count(out, "running for") != 2 {
		t.Errorf("status reaches the old run's machines: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "apply", dir, "--auto-approve")
	if code != 0 || !strings.Contains(out, "1 replaced") {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	if left := runProcesses(first.RunID); len(left) > 0 {
		t.Errorf("processes %v of the old run %s are still running", left, first.RunID)
	}
	st := loadState(t, dir)
	if len(st.Leftovers) != 0 {
		t.Errorf("leftovers %+v", st.Leftovers)
	}
	second := st.Job("train")
	if second == nil || second.RunID == first.RunID || len(runProcesses(second.RunID)) == 0 {
		t.Fatalf("the new run: %+v", second)
	}
	if code, out, errOut := runCmd(t, "destroy", dir, "--auto-approve"); code != 0 || !strings.Contains(out, "1 stopped") {
		t.Errorf("destroy: exit %d\n%s%s", code, out, errOut)
	}
	if left := runProcesses(second.RunID); len(left) > 0 {
		t.Errorf("processes %v survived destroy", left)
	}
}

// TestAnEditedSavedPlanWithNamesTheConfigurationRefusesIsRefused: a saved
// plan edited to name a job "../../../../x" (which would make a run
// directory outside ~/.gpulayer/runs), to give a job an environment
// variable sh cannot export, or a torchrun argument that replaces the
// rendezvous gpulayer sets up, is refused by apply and show, naming what
// is wrong; nothing is launched.
func TestAnEditedSavedPlanWithNamesTheConfigurationRefusesIsRefused(t *testing.T) {
	dir := t.TempDir()
	statePath := filepath.Join(dir, "state.json")
	planPath := filepath.Join(dir, "quickstart.plan")
	if code, _, errOut := runCmd(t, "plan", quickstart, "--facts", quickstartFacts, "--state", statePath, "--out", planPath); code != 0 {
		t.Fatalf("plan exit %d: %s", code, errOut)
	}
	saved, err := os.ReadFile(planPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, edit, want string
	}{
		{"job name", `"../../../../x"`, `job "../../../../x" is not a valid name`},
		{"env name", "", `environment variable "A=B"`},
		{"torchrun argument", "torchrun", `torchrun argument "--rdzv_backend=c10d"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var doc map[string]any
			if err := json.Unmarshal(saved, &doc); err != nil {
				t.Fatal(err)
			}
			jobs := doc["config"].(map[string]any)["jobs"].([]any)
			first := jobs[0].(map[string]any)
			switch c.edit {
			case "torchrun":
				first["spec"].(map[string]any)["torchrun_args"] = []string{"--rdzv_backend=c10d"}
			case "":
				spec := first["spec"].(map[string]any)
				env, _ := spec["env"].(map[string]any)
				if env == nil {
					env = map[string]any{}
				}
				env["A=B"] = "x"
				spec["env"] = env
			default:
				var name string
				json.Unmarshal([]byte(c.edit), &name)
				old := first["name"].(string)
				first["name"] = name
				for _, pj := range doc["plan"].(map[string]any)["jobs"].([]any) {
					if m := pj.(map[string]any); m["job"] == old {
						m["job"] = name
					}
				}
			}
			edited, _ := json.Marshal(doc)
			path := filepath.Join(t.TempDir(), "edited.plan")
			if err := os.WriteFile(path, edited, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, cmd := range []string{"apply", "show"} {
				code, out, errOut := runCmd(t, cmd, path)
				if code != 1 || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, path) {
					t.Errorf("%s of the edited plan: exit %d\n%s%s", cmd, code, out, errOut)
				}
			}
		})
	}
}

// TestDestroyWithAHostThatDoesNotAnswerSaysSoAndExitsOne: destroy cannot
// reach one node's machine: it exits 1, says the run was not stopped and
// where, and keeps it in state; once the machine answers again, the next
// destroy stops it and exits 0.
func TestDestroyWithAHostThatDoesNotAnswerSaysSoAndExitsOne(t *testing.T) {
	sb, dir := sandboxJobs(t, 4, sleeperJob)
	if code, out, errOut := runCmd(t, "apply", dir, "--auto-approve"); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	run := loadState(t, dir).Job("train")
	down := run.Nodes[1].Host
	if err := sb.SetReachable(down, false); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "destroy", dir, "--auto-approve")
	if code != 1 || !strings.Contains(out, "0 stopped, 1 not stopped") ||
		!strings.Contains(errOut, "could not be stopped on "+down) || !strings.Contains(errOut, "1 run could not be stopped") {
		t.Fatalf("destroy with %s down: exit %d\n%s%s", down, code, out, errOut)
	}
	st := loadState(t, dir)
	if len(st.Leftovers) != 1 || st.Leftovers[0].RunID != run.RunID || len(runProcesses(run.RunID)) == 0 {
		t.Fatalf("leftovers %+v; processes %v", st.Leftovers, runProcesses(run.RunID))
	}
	if err := sb.SetReachable(down, true); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCmd(t, "destroy", dir, "--auto-approve")
	if code != 0 || !strings.Contains(out, "1 leftover run stopped") {
		t.Fatalf("destroy once %s answers: exit %d\n%s%s", down, code, out, errOut)
	}
	if left := runProcesses(run.RunID); len(left) > 0 {
		t.Errorf("processes %v survived", left)
	}
}

// TestApplyOfAJobThatCanNeverBePlacedExitsOne: a job whose policy says
// on_unschedulable = "fail" and that no group can hold makes apply exit
// 1, naming it, whether or not there was anything else to do.
func TestApplyOfAJobThatCanNeverBePlacedExitsOne(t *testing.T) {
	_, dir := sandboxJobs(t, 4, sleeperJob+`
policy "strict" {
  on_unschedulable = "fail"
}
job "huge" {
  policy        = policy.strict
  nodes         = 9
  gpus_per_node = 1
  launcher      = "plain"
  command       = ["sleep", "60"]
}
`)
	for _, want := range []string{"1 launched", "No changes"} {
		code, out, errOut := runCmd(t, "apply", dir, "--auto-approve")
		if code != 1 || !strings.Contains(out, want) || !strings.Contains(errOut, `job "huge" cannot be placed`) {
			t.Errorf("apply (%s): exit %d\n%s%s", want, code, out, errOut)
		}
	}
}

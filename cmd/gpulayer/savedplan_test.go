package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
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

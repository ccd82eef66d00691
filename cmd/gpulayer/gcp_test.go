package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/providers"
	"github.com/gpulayer/gpulayer/providers/gcp"
	"github.com/gpulayer/gpulayer/providers/gcp/gcptest"
	"github.com/gpulayer/gpulayer/providers/sandbox"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// gcpFleet is a sandbox machine that a fake Compute Engine API hands out
// as the machine it creates: the fake gives every instance the sandbox
// machine's address and publishes its host key, and the configuration's
// cloud fleet reaches it with an empty known_hosts file, so only the
// pinned key lets gpulayer in.
func gcpFleet(t *testing.T, count int) (dir string, fake *gcptest.Server) {
	t.Helper()
	dir = t.TempDir()
	sb, err := sandbox.Start(sandbox.Options{Hosts: 1, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	m := sb.Machines[0]
	known, err := os.ReadFile(sb.KnownHostsPath())
	if err != nil {
		t.Fatal(err)
	}
	var keyType, key string
	for _, line := range strings.Split(string(known), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == fmt.Sprintf("[127.0.0.1]:%d", m.Port) {
			keyType, key = f[1], f[2]
		}
	}
	if key == "" {
		t.Fatalf("no host key for port %d in:\n%s", m.Port, known)
	}
	fake = gcptest.Start(t)
	fake.Addresses = func(int, string) (string, string) { return "10.0.0.7", "127.0.0.1" }
	fake.HostKeys = func(int, string) []gcptest.KeyValue { return []gcptest.KeyValue{{Key: keyType, Value: key}} }
	old := openProvider
	openProvider = func(ctx context.Context) (providers.Provider, error) {
		return gcp.New(ctx, gcp.Options{Endpoint: fake.URL, PollInterval: 10 * time.Millisecond})
	}
	t.Cleanup(func() { openProvider = old })
	empty := filepath.Join(dir, "empty_known_hosts")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cloud := fmt.Sprintf(`
ssh "cloud" {
  user           = %q
  identity_file  = %q
  known_hosts    = %q
  host_key_check = "strict"
  port           = %d
}

fleet "cloud" {
  ssh   = ssh.cloud
  count = %d
  gcp {
    project      = "my-project"
    zone         = "asia-northeast1-a"
    machine_type = "a2-highgpu-8g"
    image        = "projects/deeplearning-platform-release/global/images/family/pytorch-latest-gpu"
  }
}

policy "tokyo" {
  regions = ["asia-northeast1"]
}

job "train" {
  policy        = policy.tokyo
  nodes         = 1
  gpus_per_node = 1
  launcher      = "plain"
  command       = ["sleep", "300"]
}
`, sb.User, sb.KeyPath(), empty, m.Port, count)
	if err := os.WriteFile(filepath.Join(dir, "cloud.hcl"), []byte(cloud), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, fake
}

func loadState(t testing.TB, dir string) *state.State {
	t.Helper()
	st, err := state.NewLocal(filepath.Join(dir, ".gpulayer", "state.json")).Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestApplyCreatesMachinesAndPlacesTheJobsWaitingForThemInOneRun is the
// acceptance of created machines: plan shows the machine to create and the
// job waiting for it; one apply creates it (labelled, recorded), waits for
// SSH with the pinned host key, probes it and launches the job on it; the
// next plan has nothing to do; a machine deleted outside gpulayer is
// created again; destroy stops the job and deletes the machine.
func TestApplyCreatesMachinesAndPlacesTheJobsWaitingForThemInOneRun(t *testing.T) {
	dir, fake := gcpFleet(t, 1)
	code, out, errOut := runCmd(t, "plan", dir)
	if code != 0 {
		t.Fatalf("plan: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{`fleet "cloud" (gcp): 0 of 1 machines exist; 1 to create`, "+ machine cloud-0 (a2-highgpu-8g in asia-northeast1-a): count is 1", "machines_pending: waits for cloud-0"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}

	code, out, errOut = runCmd(t, "apply", "--auto-approve", dir)
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"machine cloud-0: created (127.0.0.1)", "train[0] cloud-0: running", "1 launched", "1 machines created"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}
	st := loadState(t, dir)
	if len(st.Machines) != 1 || st.Machines[0].Name != "cloud-0" || len(st.Machines[0].HostKeys) != 1 || st.Machines[0].Zone != "asia-northeast1-a" {
		t.Fatalf("state machines %+v", st.Machines)
	}
	j := st.Job("train")
	if j == nil || j.Status != state.JobRunning || j.Nodes[0].Host != "cloud-0" || j.Nodes[0].Location.Region != "asia-northeast1" {
		t.Fatalf("job train in state: %+v", j)
	}
	if h := st.Facts.Find("cloud-0"); h == nil || h.Location.Source != "provider" || h.Location.Zone != "asia-northeast1-a" {
		t.Errorf("facts of cloud-0: %+v", h)
	}
	inst := fake.Instances()
	if len(inst) != 1 || inst[0].Labels["gpulayer-fleet"] != "cloud" || inst[0].Labels["gpulayer-lineage"] != st.Lineage {
		t.Fatalf("instances %+v", inst)
	}

	if code, out, errOut := runCmd(t, "plan", "--detailed-exitcode", dir); code != 0 {
		t.Fatalf("plan after apply: exit %d, want 0 (no changes)\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCmd(t, "status", dir); code != 0 || !strings.Contains(out, "cloud-0") || !strings.Contains(out, "running") {
		t.Errorf("status: exit %d\n%s%s", code, out, errOut)
	}

	fake.Remove("cloud-0")
	code, out, _ = runCmd(t, "plan", "--json", dir)
	var p struct {
		Fleets []struct {
			Machines []struct {
				Name, Action string
				Reasons      []struct{ Code string }
			}
		}
		Jobs []struct {
			Job, Action string
			Reasons     []struct{ Code string }
		}
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil || code != 0 {
		t.Fatalf("plan --json: exit %d %v\n%s", code, err, out)
	}
	if len(p.Fleets) != 1 || len(p.Fleets[0].Machines) != 1 || p.Fleets[0].Machines[0].Action != "create" || p.Fleets[0].Machines[0].Reasons[0].Code != "machine_missing" {
		t.Errorf("a machine deleted outside gpulayer: %+v", p.Fleets)
	}
	if len(p.Jobs) != 1 || p.Jobs[0].Reasons[0].Code != "machine_missing" {
		t.Errorf("its job: %+v", p.Jobs)
	}

	code, out, errOut = runCmd(t, "destroy", "--auto-approve", dir)
	if code != 0 {
		t.Fatalf("destroy: exit %d\n%s%s", code, out, errOut)
	}
	if st := loadState(t, dir); len(st.Machines) != 0 || len(st.Jobs) != 0 {
		t.Errorf("after destroy: machines %+v jobs %+v", st.Machines, st.Jobs)
	}
}

// TestGCPExampleValidatesAndPlansOffline: examples/gcp is valid, and a plan
// from an empty facts document (no SSH, no API call) shows its eight
// machines to create and its job waiting for them.
func TestGCPExampleValidatesAndPlansOffline(t *testing.T) {
	if code, out, errOut := runCmd(t, "validate", "../../examples/gcp", "--var", "project=my-project"); code != 0 {
		t.Fatalf("validate: exit %d\n%s%s", code, out, errOut)
	}
	empty := filepath.Join(t.TempDir(), "facts.json")
	if err := os.WriteFile(empty, []byte(`{"version": 1, "hosts": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "plan", "../../examples/gcp", "--var", "project=my-project", "--facts", empty,
		"--state", filepath.Join(t.TempDir(), "state.json"), "--detailed-exitcode")
	if code != 2 {
		t.Fatalf("plan: exit %d, want 2\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"0 of 8 machines exist; 8 to create", "+ machine a100-7 (a2-highgpu-8g in us-central1-a)",
		"machines_pending: waits for a100-0, a100-1", "8 machines to create, 0 to delete"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
}

// TestAFailedCreateIsReportedAndTheNextApplyCreatesTheRest: GCP runs out
// of GPUs for one of two machines (an operation error behind HTTP 200);
// apply records the one it made, places the job on it, fails naming the
// project, zone and machine type, and the next apply creates the other.
func TestAFailedCreateIsReportedAndTheNextApplyCreatesTheRest(t *testing.T) {
	dir, fake := gcpFleet(t, 2)
	fake.FailInsertOperation(1, gcptest.Stockout)
	code, out, errOut := runCmd(t, "apply", "--auto-approve", dir)
	if code != 1 {
		t.Fatalf("apply: exit %d, want 1\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"my-project", "asia-northeast1-a", "a2-highgpu-8g", "1 machine could not be created"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	st := loadState(t, dir)
	if len(st.Machines) != 1 || st.Job("train") == nil || st.Job("train").Nodes[0].Host != st.Machines[0].Name {
		t.Fatalf("after a partial create: machines %+v, job %+v", st.Machines, st.Job("train"))
	}
	code, out, errOut = runCmd(t, "apply", "--auto-approve", dir)
	if code != 0 || !strings.Contains(out, "count is 2") {
		t.Fatalf("second apply: exit %d\n%s%s", code, out, errOut)
	}
	if st := loadState(t, dir); len(st.Machines) != 2 || len(fake.Instances()) != 2 {
		t.Errorf("after the second apply: %d recorded, %d instances", len(st.Machines), len(fake.Instances()))
	}
	if code, out, errOut := runCmd(t, "destroy", "--auto-approve", dir); code != 0 || len(fake.Instances()) != 0 {
		t.Fatalf("destroy: exit %d, %d instances left\n%s%s", code, len(fake.Instances()), out, errOut)
	}
}

// TestAMachineAKilledApplyMadeIsRecordedNotLeaked: an apply killed between
// GCP's insert and the save leaves a machine with this state's labels that
// state does not record. The plan reports it; the next apply's create of
// that name is refused by GCP, and the machine, being this state's, is
// recorded, so the one after converges with nothing leaked.
func TestAMachineAKilledApplyMadeIsRecordedNotLeaked(t *testing.T) {
	dir, fake := gcpFleet(t, 1)
	if code, out, errOut := runCmd(t, "apply", "--auto-approve", dir); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCmd(t, "destroy", "--auto-approve", "--target", "job.train", dir); code != 0 {
		t.Fatalf("destroy of the job: exit %d\n%s%s", code, out, errOut)
	}
	// What a kill after the insert leaves: the machine, no record.
	path := filepath.Join(dir, ".gpulayer", "state.json")
	st := loadState(t, dir)
	st.Machines = nil
	if err := state.NewLocal(path).Save(context.Background(), st, st.Serial); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCmd(t, "plan", dir)
	if code != 0 || !strings.Contains(out, "cloud-0 carries fleet \"cloud\"'s labels and this state's lineage") {
		t.Errorf("plan does not report the unrecorded machine:\n%s", out)
	}
	code, out, errOut := runCmd(t, "apply", "--auto-approve", dir)
	if st := loadState(t, dir); len(st.Machines) != 1 || st.Machines[0].Name != "cloud-0" {
		t.Fatalf("apply (exit %d) did not record the machine: %+v\n%s%s", code, st.Machines, out, errOut)
	}
	if code, out, errOut := runCmd(t, "apply", "--auto-approve", dir); code != 0 || len(fake.Instances()) != 1 {
		t.Fatalf("next apply: exit %d, %d instances\n%s%s", code, len(fake.Instances()), out, errOut)
	}
	if code, out, errOut := runCmd(t, "destroy", "--auto-approve", dir); code != 0 || len(fake.Instances()) != 0 {
		t.Fatalf("destroy: exit %d, %d instances left\n%s%s", code, len(fake.Instances()), out, errOut)
	}
}

// TestGCPMachineThatGainsItsTopologyIsPlacedByItAndKeepsItsJob: GCP
// reports no physical topology for an a2 machine at insert, and the plan
// says its machine is placed by zone; once GCP reports one, the refresh
// records it (an apply with nothing else to do saves it, so a plan
// without a refresh knows it too), and the job placed on the machine by
// zone keeps running: the machine did not move.
func TestGCPMachineThatGainsItsTopologyIsPlacedByItAndKeepsItsJob(t *testing.T) {
	dir, fake := gcpFleet(t, 1)
	if code, out, errOut := runCmd(t, "apply", "--auto-approve", dir); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	const byZone = "no physical host topology reported for cloud-0; placed by zone, not by block"
	if code, out, errOut := runCmd(t, "plan", dir); code != 0 || !strings.Contains(out, byZone) {
		t.Errorf("plan: exit %d, want it to say %q\n%s%s", code, byZone, out, errOut)
	}

	fake.SetPhysical("cloud-0", &gcptest.PhysicalTopology{Cluster: "cl-a", Block: "blk-7", SubBlock: "sb-2", Host: "h-1"})
	code, out, errOut := runCmd(t, "plan", "--detailed-exitcode", dir)
	if code != 0 || strings.Contains(out, byZone) {
		t.Errorf("plan once GCP reports the topology: exit %d (want 0: the job stays), want no %q\n%s%s", code, byZone, out, errOut)
	}
	if code, out, errOut := runCmd(t, "apply", "--auto-approve", dir); code != 0 {
		t.Fatalf("apply with nothing to do: exit %d\n%s%s", code, out, errOut)
	}
	st := loadState(t, dir)
	want := state.PhysicalHost{Cluster: "cl-a", Block: "blk-7", SubBlock: "sb-2", Host: "h-1"}
	if len(st.Machines) != 1 || st.Machines[0].Physical == nil || *st.Machines[0].Physical != want {
		t.Fatalf("state's machines %+v, want cloud-0 at %+v", st.Machines, want)
	}
	if j := st.Job("train"); j == nil || j.Status != state.JobRunning || j.Nodes[0].Location.NetworkGroup != "" {
		t.Errorf("job train: %+v, want it running where it was placed, by zone", j)
	}
	if code, out, errOut := runCmd(t, "plan", "--refresh=false", dir); code != 0 || strings.Contains(out, byZone) {
		t.Errorf("plan --refresh=false: exit %d, want no %q\n%s%s", code, byZone, out, errOut)
	}

	if code, out, errOut := runCmd(t, "destroy", "--auto-approve", dir); code != 0 || len(fake.Instances()) != 0 {
		t.Fatalf("destroy: exit %d, %d instances left\n%s%s", code, len(fake.Instances()), out, errOut)
	}
}

// TestGCPMachineWhoseTopologyAppearsBeforeItAnswersIsPlacedByIt: GCP
// reports an A3 machine's topology only after the create has read the
// machine; apply, waiting for it to answer SSH, reads it again, records
// the topology and places the waiting job in its block.
func TestGCPMachineWhoseTopologyAppearsBeforeItAnswersIsPlacedByIt(t *testing.T) {
	dir, fake := gcpFleet(t, 1)
	path := filepath.Join(dir, "cloud.hcl")
	hcl, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(hcl), "a2-highgpu-8g", "a3-highgpu-8g", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	fake.Physical = func(int, string) *gcptest.PhysicalTopology {
		return &gcptest.PhysicalTopology{Cluster: "cl-a", Block: "blk-7", SubBlock: "sb-2", Host: "h-1"}
	}
	fake.PhysicalReads = 1

	if code, out, errOut := runCmd(t, "apply", "--auto-approve", dir); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}

	st := loadState(t, dir)
	if len(st.Machines) != 1 || reconcile.PhysicalGroup(st.Machines[0].Physical) != "cl-a/blk-7/sb-2" {
		t.Fatalf("state's machines %+v, want cloud-0 in cl-a/blk-7/sb-2", st.Machines)
	}
	if j := st.Job("train"); j == nil || j.Nodes[0].Location.NetworkGroup != "cl-a/blk-7/sb-2" {
		t.Errorf("job train: %+v, want it placed in network group cl-a/blk-7/sb-2", j)
	}
	if code, out, errOut := runCmd(t, "destroy", "--auto-approve", dir); code != 0 || len(fake.Instances()) != 0 {
		t.Fatalf("destroy: exit %d, %d instances left\n%s%s", code, len(fake.Instances()), out, errOut)
	}
}

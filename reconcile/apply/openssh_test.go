package apply_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/providers/sandbox"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/apply"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/ssh"
	"github.com/gpulayer/gpulayer/ssh/sshdtest"
)

// TestApplyOverOpenSSH launches a job on a machine served by OpenSSH's
// sshd (its sessions run the user's real login shell and find the
// sandbox's nvidia-smi first on PATH), checks its status, and stops it:
// what production machines run. Skipped where sshd cannot run (not
// installed, not root), except under CI=true.
func TestApplyOverOpenSSH(t *testing.T) {
	dir := t.TempDir()
	_, env, err := sandbox.Prepare(filepath.Join(dir, "machine"), 0, 1) // a DGX A100
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
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := sshdtest.Start(t, sshdtest.Options{AuthorizedKeys: []gossh.PublicKey{sshPub}, SetEnv: env})
	if err := os.WriteFile(filepath.Join(dir, "known_hosts"), []byte(srv.KnownHostsLine("127.0.0.1")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgDir := filepath.Join(dir, "config")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	hcl := fmt.Sprintf(`
ssh "sshd" {
  user           = %q
  identity_file  = %q
  known_hosts    = %q
  host_key_check = "strict"
}
fleet "lab" {
  ssh = ssh.sshd
  host "sshd" { address = "127.0.0.1:%d" }
}
job "solo" {
  nodes         = 1
  gpus_per_node = 2
  launcher      = "plain"
  stop_timeout  = "2s"
  command       = ["sleep", "300"]
}
`, srv.User, keyFile, filepath.Join(dir, "known_hosts"), srv.Port)
	if err := os.WriteFile(filepath.Join(cfgDir, "main.hcl"), []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	load := func(text string) *config.Config {
		if text != "" {
			if err := os.WriteFile(filepath.Join(cfgDir, "main.hcl"), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cfg, diags := config.Load(cfgDir, config.LoadOptions{})
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		return cfg
	}
	backend := state.NewLocal(filepath.Join(dir, "state.json"))
	pool := ssh.NewPool(ssh.Options{NoAgent: true})
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	applyCfg := func(cfg *config.Config) (*reconcile.Plan, *apply.Result) {
		t.Helper()
		st, err := backend.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := reconcile.RefreshFacts(ctx, pool, cfg, st, probe.Options{Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if h := doc.Hosts[0]; h.Status != "ok" {
			t.Fatalf("probe: %s %s\nsshd log:\n%s", h.Status, h.Error, srv.Log())
		}
		p := reconcile.MakePlan(reconcile.Input{Config: cfg, State: st, Facts: doc})
		machines, _ := probe.Machines(cfg)
		specs := map[string]state.JobSpec{}
		for _, j := range cfg.Jobs {
			specs[j.Name] = reconcile.JobSpec(j, nil)
		}
		ex := &apply.Executor{Runner: pool, Backend: backend, Targets: map[string]ssh.Target{"sshd": machines[0].Target}, Specs: specs}
		res, err := ex.Apply(ctx, st, p, doc)
		if err != nil || len(res.Failed) > 0 {
			t.Fatalf("apply: %v %v\nsshd log:\n%s", err, res.Failed, srv.Log())
		}
		return p, res
	}

	cfg := load("")
	_, res := applyCfg(cfg)
	job := res.State.Job("solo")
	if res.Launched != 1 || job == nil || job.Nodes[0].Process == nil {
		t.Fatalf("launch: %+v", res)
	}
	runID := job.RunID
	if len(runProcesses(runID)) == 0 {
		t.Fatal("no process carries the run's id after the launch")
	}

	// Status: the process runs, and the next plan changes nothing.
	st, _ := backend.Load(ctx)
	doc, _ := reconcile.RefreshFacts(ctx, pool, cfg, st, probe.Options{Timeout: 30 * time.Second})
	report := reconcile.Status(reconcile.StatusInput{State: st, Facts: doc, Now: time.Now()})
	if n := report.Jobs[0].Nodes[0]; n.Process != reconcile.ProcessRunning {
		t.Errorf("status %+v", n)
	}
	if p := reconcile.MakePlan(reconcile.Input{Config: cfg, State: st, Facts: doc}); p.HasChanges() {
		t.Errorf("plan after launch has changes: %+v", p.Jobs)
	}

	// Stop: the job removed, nothing with its run id is left.
	noJobs := load(hcl[:strings.Index(hcl, `job "solo"`)])
	p, res := applyCfg(noJobs)
	if p.Job("solo").Action != reconcile.ActionDestroy || res.Stopped != 1 {
		t.Fatalf("stop: %+v %+v", p.Job("solo"), res)
	}
	waitFor(t, "the run's processes to end", func() bool { return len(runProcesses(runID)) == 0 })
}

package reconcile_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/placement"
	"github.com/gpulayer/gpulayer/providers/sandbox"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/planview"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/ssh"
)

// nvlJobs are jobs for a sandbox with a simulated NVL72 rack of four
// trays: "big" prefers the tightest group (3 nodes: inside the rack's
// NVLink domain), "strict" requires one domain for 2 nodes (one tray is
// left: it waits), and "wide" prefers for 2 nodes (passes over the domain,
// which big holds, for ordinary machines).
const nvlJobs = `
policy "nvl" {
  group_locality = "nvlink_domain"
}
job "big" {
  nodes         = 3
  gpus_per_node = 4
  launcher      = "plain"
  command       = ["python3", "train.py"]
}
job "strict" {
  policy        = policy.nvl
  nodes         = 2
  gpus_per_node = 4
  launcher      = "plain"
  command       = ["python3", "train.py"]
}
job "wide" {
  nodes         = 2
  gpus_per_node = 2
  launcher      = "plain"
  command       = ["python3", "train.py"]
}
`

// TestSandboxNVLinkDomainIsPlacedEndToEnd probes, over SSH, a sandbox of
// ordinary machines and an NVL72 rack, and plans jobs that prefer and
// require one NVLink domain: the plan names the domain, places inside it,
// estimates its links and says what kept the later job out of it.
func TestSandboxNVLinkDomainIsPlacedEndToEnd(t *testing.T) {
	sb, err := sandbox.Start(sandbox.Options{Hosts: 4, NVLinkDomain: 4, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if err := os.WriteFile(filepath.Join(sb.Dir, "jobs.hcl"), []byte(nvlJobs), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(sb.Dir, config.LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	pool := ssh.NewPool(ssh.Options{NoAgent: true})
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	doc, err := reconcile.RefreshFacts(ctx, pool, cfg, nil, probe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := reconcile.MakePlan(reconcile.Input{Config: cfg, State: state.New(), Facts: doc, Refresh: reconcile.Refresh{Source: reconcile.RefreshProbe}})
	var text bytes.Buffer
	if err := planview.Text(&text, p, planview.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("plan:\n%s", text.String())

	domain := doc.Find("nvl-01").NVLinkDomain
	short := placement.DomainName(domain)
	if domain == "" || len(short) > 20 {
		t.Fatalf("nvl-01: NVLink domain %q (%q)", domain, short)
	}

	big := p.Job("big")
	if big == nil || big.Action != reconcile.ActionCreate || big.Placement.Level != placement.LevelNVLinkDomain {
		t.Fatalf("big: %+v, want created at nvlink_domain", big)
	}
	for _, n := range big.Placement.Nodes {
		if !strings.HasPrefix(n.Host, "nvl-") || n.Location.NVLinkDomain != domain {
			t.Errorf("big: node %d on %s (domain %q), want a tray of %s", n.Rank, n.Host, n.Location.NVLinkDomain, domain)
		}
	}
	if c := big.Placement.Cost; c == nil || c.Between == nil || c.Between.Level != placement.LevelNVLinkDomain || c.Inside == nil || c.Inside.Over != "NVLink5" {
		t.Errorf("big: cost %+v, want links inside one NVLink domain and NVLink5 inside nodes", c)
	}

	strict := p.Job("strict")
	if strict == nil || strict.Action != reconcile.ActionWaiting || !strings.Contains(strict.Decision.Summary, "no NVLink domain has 2 free workers") {
		t.Errorf("strict: %+v, want waiting for 2 free workers in one NVLink domain", strict)
	}

	wide := p.Job("wide")
	if wide == nil || wide.Action != reconcile.ActionCreate {
		t.Fatalf("wide: %+v, want created", wide)
	}
	for _, n := range wide.Placement.Nodes {
		if n.Location.NVLinkDomain != "" {
			t.Errorf("wide: node on %s in the domain big and strict leave no pair of", n.Host)
		}
	}
	var passed *reconcile.RejectedOption
	for i, r := range wide.Placement.Cost.Rejected {
		if r.Level == placement.LevelNVLinkDomain {
			passed = &wide.Placement.Cost.Rejected[i]
		}
	}
	if passed == nil || passed.Free != 1 || len(passed.HeldBy) != 1 || passed.HeldBy[0].Job != "big" || len(passed.HeldBy[0].Hosts) != 3 {
		t.Fatalf("wide: rejected %+v, want the domain with 1 of 2 free, held by big on 3 trays", wide.Placement.Cost.Rejected)
	}
	for _, want := range []string{
		"same NVLink domain " + short,
		"est. slowest link: inside one NVLink domain (~900 GB/s); inside nodes NV18 (~900 GB/s, NVLink5)",
		"passed over NVLink domain " + short + `: 1 of 2 machines free; job "big" holds nvl-01, nvl-02, nvl-03`,
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the plan does not say %q", want)
		}
	}
	if strings.Contains(text.String(), domain) {
		t.Errorf("the plan's text prints the whole domain id %q", domain)
	}
}

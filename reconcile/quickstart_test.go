package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/providers/sandbox"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/ssh"
)

// quickstartFacts is the facts document of examples/quickstart's hosts,
// for plans with no SSH (`gpulayer plan examples/quickstart --facts
// testdata/facts/quickstart.json`).
const quickstartFacts = "../testdata/facts/quickstart.json"

// TestQuickstartFactsAreASandboxProbe probes a sandbox fleet made like
// examples/quickstart's declared hosts, over SSH, and checks that
// testdata/facts/quickstart.json is exactly what that probe reports, with
// the machine-specific fields (addresses, host names, kernel, boot ids,
// times) set to the quickstart's. Regenerate it with
//
//	go test ./reconcile -run TestQuickstartFactsAreASandboxProbe -update
//
// The same probe, planned against an empty state, launches the quickstart's
// jobs that its hosts can hold.
func TestQuickstartFactsAreASandboxProbe(t *testing.T) {
	cfg, diags := config.Load("../examples/quickstart", config.LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	sb, err := sandbox.Start(sandbox.Options{Like: sandbox.LikeConfig(cfg), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	sbCfg, diags := config.Load(sb.Dir, config.LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	pool := ssh.NewPool(ssh.Options{NoAgent: true})
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	doc, err := reconcile.RefreshFacts(ctx, pool, sbCfg, nil, probe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	asQuickstart(t, cfg, doc)

	// A live plan of the quickstart on its sandbox: nothing runs yet, so
	// the job its lab hosts can hold is launched.
	p := reconcile.MakePlan(reconcile.Input{Config: cfg, State: state.New(), Facts: doc, Refresh: reconcile.Refresh{Source: reconcile.RefreshProbe}})
	if c := p.Job("eval"); c == nil || c.Action != reconcile.ActionCreate {
		t.Errorf("eval: %+v, want create", c)
	}
	if c := p.Job("train"); c == nil || c.Action != reconcile.ActionWaiting {
		t.Errorf("train (its policy wants europe-west1, where only the cloud fleet is): %+v, want waiting", c)
	}

	got, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.MkdirAll(filepath.Dir(quickstartFacts), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(quickstartFacts, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(quickstartFacts)
	if err != nil {
		t.Fatalf("%v (regenerate with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what a probe of the quickstart's sandbox reports; regenerate it with -update", quickstartFacts)
	}
}

// asQuickstart makes a sandbox probe read as the quickstart's hosts: their
// configured addresses, and fixed values where the sandbox reports this
// computer's own (host name, kernel, boot id, whether it has torchrun)
// and for the time. The quickstart's machines have torchrun, where pip
// puts it.
func asQuickstart(t *testing.T, cfg *config.Config, doc *facts.Document) {
	t.Helper()
	for i := range doc.Hosts {
		h := &doc.Hosts[i]
		if h.Status != facts.StatusOK {
			t.Fatalf("host %s: %s: %s", h.Name, h.Status, h.Error)
		}
		var ch *config.Host
		for _, c := range cfg.Hosts() {
			if c.Name == h.Name {
				ch = c
			}
		}
		if ch == nil {
			t.Fatalf("the sandbox has a host %s the quickstart does not declare", h.Name)
		}
		h.Address, h.Port = ch.Address, ch.Port
		var fleet config.Location
		for _, f := range cfg.Fleets {
			if f.Name == ch.Fleet {
				fleet = f.Location
			}
		}
		own := ch.OwnLocation
		h.Location = facts.ResolveLocation(
			facts.LocationClaim{Source: facts.SourceHost, Region: own.Region, Zone: own.Zone, NetworkGroup: own.NetworkGroup},
			facts.LocationClaim{Source: facts.SourceFleet, Region: fleet.Region, Zone: fleet.Zone, NetworkGroup: fleet.NetworkGroup})
		h.Hostname = h.Name
		if h.Torchrun == nil {
			t.Fatalf("host %s: the probe did not say whether it has torchrun", h.Name)
		}
		torchrun := "/usr/local/bin/torchrun"
		h.Torchrun = &torchrun
		h.Kernel, h.Arch, h.ProductName = "Linux 6.1.0-28-amd64", "x86_64", ""
		h.BootID = fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1)
		h.ProbedAt = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
		h.Warnings = nil
	}
}

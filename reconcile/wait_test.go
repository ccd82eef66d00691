package reconcile_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/placement"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/planview"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// waitHCL: rack-3 (a1 a2 a3) and rack-4 (b1 b2) in one zone. "pretrain"
// holds a2 and a3, launched at 11:00 and expected to last 72m (until
// 12:12); "train" needs 3 whole machines: now only a1, b1 and b2 are
// free, one zone but two network groups.
const waitFleetHCL = `
fleet "lab" {
  region        = "paris"
  zone          = "paris-1"
  network_group = "rack-3"
  host "a1" { address = "10.1.0.11" }
  host "a2" { address = "10.1.0.12" }
  host "a3" { address = "10.1.0.13" }
  host "b1" {
    address       = "10.1.0.21"
    network_group = "rack-4"
  }
  host "b2" {
    address       = "10.1.0.22"
    network_group = "rack-4"
  }
}

policy "close" {
  max_wait = "15m"
}

job "pretrain" {
  nodes             = 2
  gpus_per_node     = 8
  command           = ["python", "pretrain.py"]
  expected_duration = "72m"
}

job "train" {
  policy        = policy.close
  nodes         = 3
  gpus_per_node = 8
  command       = ["python", "train.py"]
}
`

func waitFacts() *facts.Document {
	return &facts.Document{Version: facts.Version, Hosts: []facts.Host{
		machine("a1", "rack-3"), machine("a2", "rack-3"), machine("a3", "rack-3"), machine("b1", "rack-4"), machine("b2", "rack-4"),
	}}
}

// waitInput is the plan of waitHCL at now against st, with pretrain
// running on a2 and a3 (recorded in st when it is not yet).
func waitInput(t *testing.T, st *state.State, now time.Time) reconcile.Input {
	t.Helper()
	cfg, doc := loadConfig(t, waitFleetHCL), waitFacts()
	if st.Job("pretrain") != nil {
		st.RemoveJob("pretrain")
	}
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	running(t, st, doc, cfg, "pretrain", "r-pre1", map[string][]int{"a2": all, "a3": all}, "a2", "a3")
	in := input(cfg, st, doc)
	in.Now = now
	return in
}

func TestPlanWaitsForATighterGroupAHolderFreesWithinMaxWait(t *testing.T) {
	at := func(hhmm string) time.Time {
		tm, err := time.Parse("15:04", hhmm)
		if err != nil {
			t.Fatal(err)
		}
		return time.Date(2026, 12, 1, tm.Hour(), tm.Minute(), 0, 0, time.UTC)
	}
	st := state.New()

	// 12:00: pretrain frees rack-3 at 12:12, within max_wait (until 12:15).
	p := reconcile.MakePlan(waitInput(t, st, at("12:00")))
	c := action(t, p, "train", reconcile.ActionWaiting, reconcile.ReasonWaitingForGroup)
	want := `waiting for network group rack-3: job "pretrain" is expected to free 2 machines in ~12m (max_wait 15m0s until 2026-12-01T12:15:00Z)`
	if c.Reasons[0].Message != want {
		t.Errorf("reason %q\nwant   %q", c.Reasons[0].Message, want)
	}
	// status and wait say what it waits for, not "not launched yet".
	if js := reconcile.JudgeJob(c, nil); js.State != reconcile.JobPending || js.Message != want {
		t.Errorf("judged %q: %q\nwant pending: %q", js.State, js.Message, want)
	}
	w := c.Wait
	if w == nil || !w.Waiting || !w.Record || !w.Since.Equal(at("12:00")) || w.Level != placement.LevelNetworkGroup ||
		w.Location.NetworkGroup != "rack-3" || w.ExpectedAt == nil || !w.ExpectedAt.Equal(at("12:12")) {
		t.Fatalf("wait %+v", w)
	}
	if c.Placement != nil || c.StopPrior || p.HasChanges() || !p.HasRecords() {
		t.Errorf("a waiting job launches nothing but is recorded: placement %v, changes %v, records %v", c.Placement, p.HasChanges(), p.HasRecords())
	}
	if p.Summary.Waiting != 1 {
		t.Errorf("summary %+v", p.Summary)
	}
	// Apply records when the wait started.
	reconcile.RecordWaits(st, p)
	if rec := st.Wait("train"); rec == nil || !rec.Since.Equal(at("12:00")) || rec.Location.NetworkGroup != "rack-3" {
		t.Fatalf("state's wait %+v", rec)
	}

	// 12:10: still waiting, measured from 12:00, nothing new to record.
	p = reconcile.MakePlan(waitInput(t, st, at("12:10")))
	c = action(t, p, "train", reconcile.ActionWaiting, reconcile.ReasonWaitingForGroup)
	if c.Wait.Record || !c.Wait.Since.Equal(at("12:00")) || p.HasRecords() {
		t.Errorf("a second plan of the same wait: %+v, records %v", c.Wait, p.HasRecords())
	}
	if !strings.Contains(c.Reasons[0].Message, "in ~2m") {
		t.Errorf("reason %q; pretrain ends in 2 minutes", c.Reasons[0].Message)
	}

	// 12:13: pretrain runs past its expected end: overdue, not freeing;
	// train is placed now at the zone level.
	p = reconcile.MakePlan(waitInput(t, st, at("12:13")))
	c = action(t, p, "train", reconcile.ActionCreate, reconcile.ReasonNewJob, reconcile.ReasonNoTighterGroup)
	want = `placed now at zone level: no tighter group frees within max_wait (15m0s); job "pretrain" past its expected_duration, counted as holding its machines`
	if c.Reasons[1].Message != want {
		t.Errorf("reason %q\nwant   %q", c.Reasons[1].Message, want)
	}
	if c.Placement == nil || c.Placement.Level != placement.LevelZone || len(c.Placement.Nodes) != 3 {
		t.Fatalf("placement %+v", c.Placement)
	}
	if len(p.EndedWaits) != 1 || p.EndedWaits[0] != "train" {
		t.Errorf("ended waits %v; the placed job's wait record goes", p.EndedWaits)
	}
	reconcile.RecordWaits(st, p)
	if st.Waits != nil {
		t.Errorf("waits %+v after the job was placed", st.Waits)
	}
}

func TestPlanPlacesNowWhenNoHolderFreesWithinMaxWait(t *testing.T) {
	// pretrain ends at 12:12; a wait that began at 11:50 ends at 12:05.
	st := state.New()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	in := waitInput(t, st, now)
	p := reconcile.MakePlan(in)
	action(t, p, "train", reconcile.ActionWaiting, reconcile.ReasonWaitingForGroup)
	st.SetWait(state.Wait{Job: "train", ConfigHash: p.Job("train").ConfigHash, Since: now.Add(-10 * time.Minute)})
	p = reconcile.MakePlan(waitInput(t, st, now))
	c := action(t, p, "train", reconcile.ActionCreate, reconcile.ReasonNewJob, reconcile.ReasonNoTighterGroup)
	if want := "placed now at zone level: no tighter group frees within max_wait (15m0s)"; c.Reasons[1].Message != want {
		t.Errorf("reason %q, want %q", c.Reasons[1].Message, want)
	}
	// After max_wait the job is placed, whatever frees.
	st.SetWait(state.Wait{Job: "train", ConfigHash: c.ConfigHash, Since: now.Add(-20 * time.Minute)})
	p = reconcile.MakePlan(waitInput(t, st, now))
	c = action(t, p, "train", reconcile.ActionCreate, reconcile.ReasonNewJob, reconcile.ReasonNoTighterGroup)
	if want := "placed now at zone level: it waited max_wait (15m0s, since 2026-12-01T11:40:00Z) for a tighter group"; c.Reasons[1].Message != want {
		t.Errorf("reason %q, want %q", c.Reasons[1].Message, want)
	}
	// A wait of another configuration is a new wait.
	st.SetWait(state.Wait{Job: "train", ConfigHash: "sha256:old", Since: now.Add(-20 * time.Minute)})
	p = reconcile.MakePlan(waitInput(t, st, now))
	if c := action(t, p, "train", reconcile.ActionWaiting, reconcile.ReasonWaitingForGroup); !c.Wait.Record || !c.Wait.Since.Equal(now) {
		t.Errorf("wait %+v; a changed job starts waiting again", c.Wait)
	}
}

func TestPlanWithoutMaxWaitNeverWaits(t *testing.T) {
	src := strings.Replace(waitFleetHCL, `max_wait = "15m"`, `rank = "spread"`, 1)
	cfg, doc := loadConfig(t, src), waitFacts()
	st := state.New()
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	running(t, st, doc, cfg, "pretrain", "r-pre1", map[string][]int{"a2": all, "a3": all}, "a2", "a3")
	p := reconcile.MakePlan(input(cfg, st, doc))
	if c := action(t, p, "train", reconcile.ActionCreate, reconcile.ReasonNewJob); c.Wait != nil {
		t.Errorf("wait %+v without max_wait", c.Wait)
	}
}

func TestMaxWaitAndExpectedDurationChangeNoRunningJobsHash(t *testing.T) {
	// Declared on a running job, neither replaces it: one decides when a
	// job is placed, the other what others expect of it.
	cfg := loadConfig(t, waitFleetHCL)
	st, doc := state.New(), waitFacts()
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	running(t, st, doc, cfg, "train", "r-t1", map[string][]int{"a1": all, "b1": all, "b2": all}, "a1", "b1", "b2")
	plain := loadConfig(t, strings.NewReplacer(`max_wait = "15m"`, "", `expected_duration = "72m"`, "").Replace(waitFleetHCL))
	for _, j := range plain.Jobs {
		if j.Name == "train" {
			if got, was := reconcile.JobSpec(j, nil).Hash(), st.Job("train").ConfigHash; got != was {
				t.Fatalf("hash without max_wait %s, with %s: must be equal", got, was)
			}
		}
	}
	p := reconcile.MakePlan(input(cfg, st, doc))
	action(t, p, "train", reconcile.ActionNoOp)
}

// TestWaitingPlanRenders pins the text, markdown and JSON of a plan whose
// job waits for a tighter group: three renderings of one value.
func TestWaitingPlanRenders(t *testing.T) {
	p := reconcile.MakePlan(waitInput(t, state.New(), time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)))
	var text, md, js bytes.Buffer
	if err := planview.Text(&text, p, planview.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := planview.Markdown(&md, p); err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(&js)
	enc.SetIndent("", "  ")
	if err := enc.Encode(p); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`waiting_for_group: waiting for network group rack-3: job "pretrain" is expected to free 2 machines in ~12m`,
		"starts waiting now (2026-12-01T12:00:00Z); placed at the looser level after 2026-12-01T12:15:00Z",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	assertGolden(t, filepath.Join("testdata", "plan", "wait-for-group.txt"), text.Bytes())
	assertGolden(t, filepath.Join("testdata", "plan", "wait-for-group.md"), md.Bytes())
	assertGolden(t, filepath.Join("testdata", "plan", "wait-for-group.json"), js.Bytes())
}

func TestTwoJobsNeverWaitForTheSameMachines(t *testing.T) {
	// train waits for rack-3 (a1 free now, a2 and a3 when pretrain
	// ends): a1 is promised to it, so train2, the same job, neither
	// counts on rack-3 nor is placed on a1; without a1 no 3 machines
	// are free, and it waits for machines like any job.
	src := waitFleetHCL + "\njob \"train2\" {" + strings.SplitAfter(waitFleetHCL, `job "train" {`)[1]
	cfg, doc := loadConfig(t, src), waitFacts()
	st := state.New()
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	running(t, st, doc, cfg, "pretrain", "r-pre1", map[string][]int{"a2": all, "a3": all}, "a2", "a3")
	p := reconcile.MakePlan(input(cfg, st, doc))
	c := action(t, p, "train", reconcile.ActionWaiting, reconcile.ReasonWaitingForGroup)
	if c.Wait.Location.NetworkGroup != "rack-3" {
		t.Errorf("train waits for %+v", c.Wait.Location)
	}
	if c2 := action(t, p, "train2", reconcile.ActionWaiting, reconcile.ReasonUnschedulableNow); c2.Wait != nil {
		t.Errorf("train2 counts on the machines train waits for: %+v", c2.Wait)
	}
}

func TestAChangedJobKeepsRunningWhileItsNewConfigurationWaits(t *testing.T) {
	// train runs on a1, b1 and b2 (one zone); its command changes. Its
	// new configuration would get the same zone now, and rack-3 at 12:12:
	// it waits, and the running one is left running on its GPUs.
	old := loadConfig(t, waitFleetHCL)
	st, doc := state.New(), waitFacts()
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	running(t, st, doc, old, "train", "r-t1", map[string][]int{"a1": all, "b1": all, "b2": all}, "a1", "b1", "b2")
	running(t, st, doc, old, "pretrain", "r-pre1", map[string][]int{"a2": all, "a3": all}, "a2", "a3")
	cfg := loadConfig(t, strings.Replace(waitFleetHCL, `"train.py"]`, `"train.py", "--v2"]`, 1))
	p := reconcile.MakePlan(input(cfg, st, doc))
	c := action(t, p, "train", reconcile.ActionWaiting, reconcile.ReasonConfigChanged, reconcile.ReasonWaitingForGroup)
	if c.StopPrior || c.Placement == nil || len(c.Placement.Nodes) != 3 || c.Placement.Nodes[0].Host != "a1" {
		t.Fatalf("stop %v placement %+v; the running job keeps running as launched", c.StopPrior, c.Placement)
	}
	if !strings.HasSuffix(c.Reasons[1].Message, "; the job keeps running as it was launched") || p.HasChanges() {
		t.Errorf("reason %q, changes %v", c.Reasons[1].Message, p.HasChanges())
	}
}

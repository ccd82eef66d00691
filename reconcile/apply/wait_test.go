package apply_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/placement"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/apply"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// TestApplyOfAWaitingJobRecordsOnlyWhenItStartedWaiting: a plan whose only
// change is a job starting to wait for a tighter group launches nothing
// (no machine is reached: the executor has no runner) and saves the
// wait's start; a later plan that ends the wait removes it.
func TestApplyOfAWaitingJobRecordsOnlyWhenItStartedWaiting(t *testing.T) {
	backend := state.NewLocal(filepath.Join(t.TempDir(), "state.json"))
	since := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	waiting := &reconcile.Plan{FormatVersion: reconcile.PlanFormatVersion, Jobs: []reconcile.JobChange{{
		Job: "train", Action: reconcile.ActionWaiting, ConfigHash: "sha256:abc", Nodes: 3, GPUsPerNode: 8,
		Reasons: []reconcile.Reason{{Code: reconcile.ReasonWaitingForGroup, Message: "waiting for network group rack-3"}},
		Wait: &reconcile.WaitReport{Waiting: true, Record: true, Since: since, Until: since.Add(15 * time.Minute),
			MaxWait: state.Duration(15 * time.Minute), Level: placement.LevelNetworkGroup,
			Location: placement.Location{Region: "paris", Zone: "paris-1", NetworkGroup: "rack-3"}},
	}}}
	waiting.Summary = reconcile.Summary{Waiting: 1}
	if waiting.HasChanges() || !waiting.HasRecords() {
		t.Fatalf("changes %v records %v: a new wait changes nothing and is recorded", waiting.HasChanges(), waiting.HasRecords())
	}
	ex := &apply.Executor{Backend: backend}
	res, err := ex.Apply(context.Background(), state.New(), waiting, nil)
	if err != nil || res.Launched != 0 {
		t.Fatalf("apply: %v %+v", err, res)
	}
	st, err := backend.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	w := st.Wait("train")
	if w == nil || !w.Since.Equal(since) || w.ConfigHash != "sha256:abc" || w.Level != "network_group" || w.Location.NetworkGroup != "rack-3" || st.Job("train") != nil {
		t.Fatalf("state after the wait: waits %+v, job %+v", st.Waits, st.Job("train"))
	}
	// The job is placed by a later plan (here, one that only ends the
	// wait): the record goes.
	ended := &reconcile.Plan{FormatVersion: reconcile.PlanFormatVersion, State: reconcile.StateRef{Lineage: st.Lineage, Serial: st.Serial},
		Jobs: []reconcile.JobChange{}, EndedWaits: []string{"train"}}
	if _, err := ex.Apply(context.Background(), st, ended, nil); err != nil {
		t.Fatal(err)
	}
	if st, err = backend.Load(context.Background()); err != nil || st.Waits != nil {
		t.Fatalf("waits %+v after the wait ended (%v)", st.Waits, err)
	}
}

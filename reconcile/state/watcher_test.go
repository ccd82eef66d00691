package state

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func lease(id string, at time.Time) Watcher {
	return Watcher{ID: id, Host: "vm-1", PID: 4242, User: "ana", StartedAt: at, RenewedAt: at, ExpiresAt: at.Add(time.Minute)}
}

// TestWatcherLeaseRoundTripsThroughTheStrictReader: a state holding a
// watcher's lease saves and reads back as it was (the strict reader knows
// the field), a state without one is written without the field, and a
// clone's lease is its own.
func TestWatcherLeaseRoundTripsThroughTheStrictReader(t *testing.T) {
	l := NewLocal(filepath.Join(t.TempDir(), "state.json"))
	s := sample()
	mustSave(t, l, s, 0)
	data, err := os.ReadFile(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), `"watcher"`) {
		t.Errorf("a state with no watcher names one:\n%s", data)
	}
	at := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	s.SetWatcher(lease("w-1", at), true)
	mustSave(t, l, s, 1)
	got := mustLoad(t, l)
	if got.Watcher == nil || *got.Watcher != *s.Watcher {
		t.Fatalf("read back %+v, saved %+v", got.Watcher, s.Watcher)
	}
	c := got.Clone()
	c.Watcher.ID = "changed"
	if got.Watcher.ID != "w-1" {
		t.Error("changing a clone's lease changed the original")
	}
	if !got.Watcher.Live(at.Add(59*time.Second)) || got.Watcher.Live(at.Add(time.Minute)) {
		t.Errorf("lease until %s: live at +59s and not at +60s", got.Watcher.ExpiresAt)
	}
	if w := got.Watcher.String(); !strings.Contains(w, "pid 4242 on vm-1") || !strings.Contains(w, "id w-1") {
		t.Errorf("holder %q does not name the pid, host and id", w)
	}
}

// TestAWatcherLeaseWithoutIDIsRefused: a lease names its holder.
func TestAWatcherLeaseWithoutIDIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	doc := `{"format_version": 1, "lineage": "0e4a9f3c-5f6b-4d7e-8a9b-0c1d2e3f4a5b", "serial": 3, "gpulayer_version": "v",
  "jobs": [], "leftovers": [], "machines": [], "watcher": {"id": "", "host": "vm", "pid": 1,
  "started_at": "2026-12-02T04:00:00Z", "renewed_at": "2026-12-02T04:00:00Z", "expires_at": "2026-12-02T04:01:00Z"}}`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := NewLocal(path).Load(t.Context())
	var bad *UnreadableError
	if !errors.As(err, &bad) || !strings.Contains(err.Error(), "watcher lease with no id") {
		t.Fatalf("Load: %v", err)
	}
}

// TestStateHoldsThroughLeaseRenewalsOnly: a plan made at a version is
// still right at every later version that only renewed the watcher's
// lease, and no longer once anything else was saved, by the watcher or by
// another command that carried the lease over unchanged.
func TestStateHoldsThroughLeaseRenewalsOnly(t *testing.T) {
	l := NewLocal(filepath.Join(t.TempDir(), "state.json"))
	s := sample()
	mustSave(t, l, s, 0) // 1
	at := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	renew := func(leaseOnly bool) {
		t.Helper()
		cur := mustLoad(t, l)
		at = at.Add(20 * time.Second)
		w := lease("w-1", at)
		if !leaseOnly {
			cur.Jobs[0].Status = JobFailed
		}
		cur.SetWatcher(w, leaseOnly)
		mustSave(t, l, cur, cur.Serial)
	}
	renew(true) // 2
	renew(true) // 3
	cur := mustLoad(t, l)
	for serial, want := range map[uint64]bool{1: true, 2: true, 3: true, 0: false, 4: false} {
		if got := cur.Holds(cur.Lineage, serial); got != want {
			t.Errorf("after two renewals, Holds(serial %d) = %v, want %v", serial, got, want)
		}
	}
	if cur.Holds("another-lineage", 1) {
		t.Error("a state holds another lineage's version")
	}

	// Another command (an apply) changes a job and saves the lease as
	// it found it.
	cur.Jobs[0].Status = JobStopping
	mustSave(t, l, cur, cur.Serial) // 4
	cur = mustLoad(t, l)
	if cur.Holds(cur.Lineage, 3) || !cur.Holds(cur.Lineage, 4) {
		t.Errorf("after an apply's save: Holds(3) %v Holds(4) %v, want false true", cur.Holds(cur.Lineage, 3), cur.Holds(cur.Lineage, 4))
	}
	renew(true) // 5
	cur = mustLoad(t, l)
	if cur.Holds(cur.Lineage, 3) || !cur.Holds(cur.Lineage, 4) {
		t.Errorf("renewed after an apply: Holds(3) %v Holds(4) %v, want false true", cur.Holds(cur.Lineage, 3), cur.Holds(cur.Lineage, 4))
	}

	// The watcher's own save of a change.
	renew(false) // 6
	cur = mustLoad(t, l)
	if cur.Holds(cur.Lineage, 5) || !cur.Holds(cur.Lineage, 6) {
		t.Errorf("after the watcher changed a job: Holds(5) %v Holds(6) %v, want false true", cur.Holds(cur.Lineage, 5), cur.Holds(cur.Lineage, 6))
	}
	renew(true) // 7
	cur = mustLoad(t, l)
	if !cur.Holds(cur.Lineage, 6) || cur.Holds(cur.Lineage, 5) {
		t.Errorf("renewed after its change: Holds(6) %v Holds(5) %v, want true false", cur.Holds(cur.Lineage, 6), cur.Holds(cur.Lineage, 5))
	}
}

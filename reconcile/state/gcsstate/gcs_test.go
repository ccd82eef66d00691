package gcsstate_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/reconcile/state/gcsstate"
	"github.com/gpulayer/gpulayer/reconcile/state/gcsstate/gcstest"
)

const bucket = "team-gpulayer"

func backend(t *testing.T, fake *gcstest.Server) *gcsstate.Backend {
	t.Helper()
	b, err := gcsstate.New(context.Background(), gcsstate.Options{Bucket: bucket, Prefix: "gpulayer/prod", Endpoint: fake.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestSaveAndLoadRoundTrip(t *testing.T) {
	fake := gcstest.Start(t)
	b := backend(t, fake)
	s, err := b.Load(ctx(t))
	if err != nil || s.Serial != 0 || s.Lineage != "" {
		t.Fatalf("empty bucket: %+v %v", s, err)
	}
	s.SetJob(state.Job{Name: "train", Status: state.JobRunning, RunID: "r1"})
	if err := b.Save(ctx(t), s, 0); err != nil {
		t.Fatal(err)
	}
	if s.Serial != 1 || s.Lineage == "" {
		t.Fatalf("after save: serial %d lineage %q", s.Serial, s.Lineage)
	}
	if _, _, ok := fake.Object(bucket, "gpulayer/prod/default.json"); !ok {
		t.Fatal("no object at <prefix>/default.json")
	}
	// A second save over the first, from the same backend.
	s.SetJob(state.Job{Name: "eval", Status: state.JobRunning, RunID: "r2"})
	if err := b.Save(ctx(t), s, 1); err != nil {
		t.Fatal(err)
	}
	// Another runner reads what was saved.
	got, err := backend(t, fake).Load(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got.Serial != 2 || got.Lineage != s.Lineage || len(got.Jobs) != 2 || got.Job("eval").RunID != "r2" {
		t.Errorf("loaded %+v", got)
	}
}

// TestTwoWritersOneWins: two runners load the same version and save; the
// bucket takes exactly one, and the other is told state changed.
func TestTwoWritersOneWins(t *testing.T) {
	fake := gcstest.Start(t)
	first := backend(t, fake)
	s, _ := first.Load(ctx(t))
	if err := first.Save(ctx(t), s, 0); err != nil {
		t.Fatal(err)
	}
	a, b := backend(t, fake), backend(t, fake)
	sa, _ := a.Load(ctx(t))
	sb, _ := b.Load(ctx(t))
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, w := range []struct {
		be *gcsstate.Backend
		s  *state.State
	}{{a, sa}, {b, sb}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.s.SetJob(state.Job{Name: "job" + string(rune('a'+i)), Status: state.JobRunning})
			errs[i] = w.be.Save(ctx(t), w.s, 1)
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		var conflict *state.ConflictError
		switch {
		case err == nil:
			won++
		case errors.As(err, &conflict):
			if !strings.Contains(err.Error(), "changed since it was read") || conflict.FoundSerial != 2 {
				t.Errorf("conflict %v (found serial %d)", err, conflict.FoundSerial)
			}
		default:
			t.Errorf("unexpected error %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d writers won, want exactly 1 (errors %v)", won, errs)
	}
}

// TestALostLockDoesNotAllowAStaleWrite: a writer whose lock was broken, and
// whose state another writer has since saved over, cannot save the version
// it read.
func TestALostLockDoesNotAllowAStaleWrite(t *testing.T) {
	fake := gcstest.Start(t)
	slow := backend(t, fake)
	s, _ := slow.Load(ctx(t))
	lock, err := slow.Lock(ctx(t), state.NewLockInfo("gpulayer apply (slow)"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := slow.Save(ctx(t), s, 0); err != nil {
		t.Fatal(err)
	}
	// Someone breaks the lock and applies.
	other := backend(t, fake)
	if err := other.ForceUnlock(ctx(t), lock.Info().ID); err != nil {
		t.Fatal(err)
	}
	os, _ := other.Load(ctx(t))
	olock, err := other.Lock(ctx(t), state.NewLockInfo("gpulayer apply (other)"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Save(ctx(t), os, os.Serial); err != nil {
		t.Fatal(err)
	}
	olock.Unlock()
	// The slow writer wakes up and saves what it had.
	s.SetJob(state.Job{Name: "stale"})
	var conflict *state.ConflictError
	if err := slow.Save(ctx(t), s, 1); !errors.As(err, &conflict) {
		t.Fatalf("stale save: %v, want a conflict", err)
	}
	// Its unlock does not delete a lock it no longer holds.
	relock, err := other.Lock(ctx(t), state.NewLockInfo("gpulayer apply (third)"), 0)
	if err != nil {
		t.Fatal(err)
	}
	lock.Unlock()
	if _, _, ok := fake.Object(bucket, "gpulayer/prod/default.lock"); !ok {
		t.Error("a broken lock's unlock deleted the lock taken since")
	}
	relock.Unlock()
}

func TestLockContentionNamesTheHolderOrWaits(t *testing.T) {
	fake := gcstest.Start(t)
	a, b := backend(t, fake), backend(t, fake)
	held, err := a.Lock(ctx(t), state.NewLockInfo("gpulayer apply (ci run 41)"), 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Lock(ctx(t), state.NewLockInfo("gpulayer apply (ci run 42)"), 0)
	var locked *state.LockedError
	if !errors.As(err, &locked) || locked.Holder.ID != held.Info().ID || !strings.Contains(err.Error(), "ci run 41") {
		t.Fatalf("contention: %v", err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		held.Unlock()
	}()
	got, err := b.Lock(ctx(t), state.NewLockInfo("gpulayer apply (ci run 42)"), 20*time.Second)
	if err != nil {
		t.Fatalf("waiting for the lock: %v", err)
	}
	got.Unlock()
}

func TestForceUnlockWithAnotherIDIsRefused(t *testing.T) {
	fake := gcstest.Start(t)
	b := backend(t, fake)
	held, err := b.Lock(ctx(t), state.NewLockInfo("stuck"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ForceUnlock(ctx(t), "not-the-id"); err == nil || !strings.Contains(err.Error(), held.Info().ID) {
		t.Errorf("wrong id: %v", err)
	}
	if _, _, ok := fake.Object(bucket, "gpulayer/prod/default.lock"); !ok {
		t.Fatal("a refused force-unlock deleted the lock")
	}
	if err := b.ForceUnlock(ctx(t), held.Info().ID); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := fake.Object(bucket, "gpulayer/prod/default.lock"); ok {
		t.Error("the lock is still there")
	}
}

func TestCorruptStateIsRefusedAndLeftAlone(t *testing.T) {
	fake := gcstest.Start(t)
	fake.Put(bucket, "gpulayer/prod/default.json", []byte(`{"format_version": 1, "lineage": "x", "serial": `))
	b := backend(t, fake)
	if _, err := b.Load(ctx(t)); err == nil || !strings.Contains(err.Error(), "gs://team-gpulayer/gpulayer/prod/default.json") {
		t.Fatalf("corrupt: %v", err)
	}
	if err := b.Save(ctx(t), state.New(), 0); err == nil {
		t.Error("a save over a corrupt object it could not read succeeded")
	}
	if data, _, _ := fake.Object(bucket, "gpulayer/prod/default.json"); !strings.HasSuffix(string(data), `"serial": `) {
		t.Error("the corrupt object was overwritten")
	}
}

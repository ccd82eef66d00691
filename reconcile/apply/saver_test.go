package apply

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/reconcile/state"
)

// countingBackend counts saves; each takes delay, the first first.
type countingBackend struct {
	state.Backend
	mu           sync.Mutex
	saves        int
	first, delay time.Duration
	last         *state.State
}

func (b *countingBackend) Save(_ context.Context, s *state.State, expected uint64) error {
	b.mu.Lock()
	d := b.delay
	if b.saves == 0 {
		d = b.first
	}
	b.saves++
	b.mu.Unlock()
	time.Sleep(d)
	s.Serial = expected + 1
	b.mu.Lock()
	b.last = s
	b.mu.Unlock()
	return nil
}

func (b *countingBackend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.saves
}

// TestTheSaverPacesTricklingUpdatesAndAFlushDoesNotWait: updates that
// arrive one by one after a save that took 60 ms (nodes confirmed over a
// start check) are saved together after a wait as long as that save,
// not each on its own as they were; a flush during the wait saves at
// once; and the last version saved is the last update.
func TestTheSaverPacesTricklingUpdatesAndAFlushDoesNotWait(t *testing.T) {
	b := &countingBackend{first: 60 * time.Millisecond, delay: time.Millisecond}
	sv := newSaver(b, state.New())
	sv.update(func(st *state.State) { st.Jobs = append(st.Jobs, state.Job{Name: "j0"}) })
	if err := sv.flush(); err != nil {
		t.Fatal(err)
	}
	// Ten updates 3 ms apart, within the 60 ms the first save took:
	// saved at once, each would be a save of its own.
	for i := 1; i <= 10; i++ {
		sv.update(func(st *state.State) { st.Jobs = append(st.Jobs, state.Job{Name: "j"}) })
		time.Sleep(3 * time.Millisecond)
	}
	if got := b.count(); got > 2 {
		t.Errorf("%d saves of ten trickling updates before any flush; want them to wait for the pace", got-1)
	}
	began := time.Now()
	if err := sv.flush(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 45*time.Millisecond {
		t.Errorf("flush took %v: it waited for the pace (60 ms) instead of saving at once", took)
	}
	if got := b.count(); got > 3 {
		t.Errorf("%d saves in all, want at most 3 (the first, maybe one paced, the flush's)", got)
	}
	if n := len(b.last.Jobs); n != 11 {
		t.Errorf("the last save holds %d jobs, want 11", n)
	}
}

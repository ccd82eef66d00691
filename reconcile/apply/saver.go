package apply

import (
	"context"
	"sync"
	"time"

	"github.com/gpulayer/gpulayer/reconcile/state"
)

// saver owns the state during an apply: every change goes through update,
// and a goroutine saves the latest version whenever there is an unsaved
// one, so that steps finishing at once (the nodes of a 64-node job) cost
// a few saves, not one each. flush waits until everything updated so far
// is saved; apply flushes before each step that must not be lost (a run id
// before its processes start, a job's end before the next plan).
//
// Each save writes the whole document (with the facts of every machine),
// so updates that trickle in (nodes confirmed one by one over a start
// check) would be saved back to back, each for one node: 34 saves of
// half a megabyte for a 64-node apply with the default check. After a
// save the next waits as long as that save took, from minPace to
// maxPace, unless a flush waits: at most 50 saves a second, and saving
// takes at most about half of a core's time whatever the size of the
// state. A crash can lose the changes of that wait more than a save in
// progress would lose; what must not be lost is flushed (a run id before
// its processes start, so that they are found whatever else was lost).
type saver struct {
	backend state.Backend

	mu      sync.Mutex
	cond    *sync.Cond
	st      *state.State
	serial  uint64 // the serial the backend holds now
	version uint64 // changes made
	saved   uint64 // changes saved
	saving  bool
	err     error // the first failed save; later saves are not tried
	// pace is the least time from the end of a save (ended) to the
	// start of the next, cut short by a flush (kick); flushes counts the
	// flush calls waiting.
	pace    time.Duration
	ended   time.Time
	flushes int
	kick    chan struct{}
}

// minPace and maxPace bound the wait between saves.
const (
	minPace = 20 * time.Millisecond
	maxPace = 250 * time.Millisecond
)

func newSaver(backend state.Backend, st *state.State) *saver {
	s := &saver{backend: backend, st: st, serial: st.Serial, kick: make(chan struct{}, 1)}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// update changes the state and has it saved soon.
func (s *saver) update(f func(st *state.State)) {
	s.mu.Lock()
	f(s.st)
	s.version++
	if !s.saving && s.err == nil {
		s.saving = true
		go s.loop()
	}
	s.mu.Unlock()
}

// view reads the state.
func (s *saver) view(f func(st *state.State)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.st)
}

// loop saves until nothing is left unsaved. A save runs on a context of
// its own: an interrupted apply still records what it did.
func (s *saver) loop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.saved < s.version && s.err == nil {
		if wait := s.pace - time.Since(s.ended); wait > 0 && s.flushes == 0 {
			// No flush waits: a kick left is one no wait took.
			select {
			case <-s.kick:
			default:
			}
			s.mu.Unlock()
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-s.kick:
				t.Stop()
			}
			s.mu.Lock()
		}
		snap, version, expected := s.st.Clone(), s.version, s.serial
		s.mu.Unlock()
		began := time.Now()
		err := s.backend.Save(context.Background(), snap, expected)
		s.mu.Lock()
		s.ended = time.Now()
		s.pace = min(max(s.ended.Sub(began), minPace), maxPace)
		if err != nil {
			s.err = err
			break
		}
		s.serial = snap.Serial
		s.st.Serial, s.st.Lineage = snap.Serial, snap.Lineage
		s.saved = version
		s.cond.Broadcast()
	}
	s.saving = false
	s.cond.Broadcast()
}

// flush waits until every update made so far is saved, and returns the
// first save error.
func (s *saver) flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := s.version
	s.flushes++
	defer func() { s.flushes-- }()
	// A save waiting out its pace goes now.
	select {
	case s.kick <- struct{}{}:
	default:
	}
	for s.saved < want && s.err == nil {
		if !s.saving {
			s.saving = true
			go s.loop()
		}
		s.cond.Wait()
	}
	return s.err
}

// state is the state as saved last, for the caller once apply is done.
func (s *saver) state() *state.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

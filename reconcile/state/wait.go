package state

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Wait is a job waiting for a tighter group than it could have now
// (policy max_wait, docs/lifecycle.md): when it started waiting, so that
// every later plan measures max_wait from the same moment, and for what.
// A job that is placed, removed or no longer under max_wait has none.
type Wait struct {
	Job string `json:"job"`
	// ConfigHash is the hash of the configuration that waits: a job
	// whose configuration changes starts a new wait.
	ConfigHash string    `json:"config_hash"`
	Since      time.Time `json:"waiting_since"`
	// Level and Location name the group waited for ("network_group",
	// "rack-3"), as the plan that started the wait chose it; later plans
	// may wait for another one, within the same max_wait.
	Level    string   `json:"level,omitempty"`
	Location Location `json:"location"`
}

// Wait returns job's wait record, or nil.
func (s *State) Wait(job string) *Wait {
	for i := range s.Waits {
		if s.Waits[i].Job == job {
			return &s.Waits[i]
		}
	}
	return nil
}

// SetWait records w, replacing job's earlier record, keeping Waits sorted.
func (s *State) SetWait(w Wait) {
	if old := s.Wait(w.Job); old != nil {
		*old = w
		return
	}
	s.Waits = append(s.Waits, w)
	slices.SortFunc(s.Waits, func(a, b Wait) int { return strings.Compare(a.Job, b.Job) })
}

// RemoveWait forgets job's wait record.
func (s *State) RemoveWait(job string) {
	s.Waits = slices.DeleteFunc(s.Waits, func(w Wait) bool { return w.Job == job })
	if len(s.Waits) == 0 {
		s.Waits = nil
	}
}

// checkWaits says what makes the wait records incoherent; "" when
// nothing does.
func checkWaits(ws []Wait) string {
	seen := make(map[string]bool, len(ws))
	for _, w := range ws {
		switch {
		case w.Job == "":
			return "has a wait with no job name"
		case seen[w.Job]:
			return fmt.Sprintf("has two waits of job %q", w.Job)
		case w.Since.IsZero():
			return fmt.Sprintf("has a wait of job %q with no since time", w.Job)
		}
		seen[w.Job] = true
	}
	return ""
}

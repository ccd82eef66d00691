package state

import (
	"fmt"
	"time"
)

// Watcher is the lease of the `gpulayer watch` that supervises a state's
// jobs (docs/lifecycle.md): one watcher at a time acts on a state's
// runs. It is renewed, under the state lock, by every round of the
// watcher; a second watcher refuses to start while it is live, and takes
// it over once ExpiresAt has passed (its holder crashed or hung).
type Watcher struct {
	ID        string    `json:"id"`
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	User      string    `json:"user,omitempty"`
	StartedAt time.Time `json:"started_at"`
	RenewedAt time.Time `json:"renewed_at"`
	// ExpiresAt is when another watcher may take the lease over; a
	// watcher that stops sets it to the time it stopped.
	ExpiresAt time.Time `json:"expires_at"`
	// RenewedSerial is the serial of the save that renewed the lease and
	// changed nothing else (0 when the watcher's last save changed more),
	// and SameSince the first serial of the run of versions that hold
	// what that one holds but for the lease. They are what lets a saved
	// plan made a few renewals ago still be applied (Holds): a watcher
	// renewing every 20 seconds must not make every reviewed plan stale.
	RenewedSerial uint64 `json:"renewed_serial,omitempty"`
	SameSince     uint64 `json:"same_since,omitempty"`
}

// Live says whether the lease is still held at now.
func (w *Watcher) Live(now time.Time) bool {
	return w != nil && now.Before(w.ExpiresAt)
}

// String names the holder for messages: `gpulayer watch (pid 4242 on
// vm-1, user ana, started 2026-12-02T04:00:00Z, lease renewed
// 2026-12-02T05:00:00Z and held until 2026-12-02T05:01:00Z, id 3b0d…)`.
func (w *Watcher) String() string {
	user := ""
	if w.User != "" {
		user = ", user " + w.User
	}
	return fmt.Sprintf("gpulayer watch (pid %d on %s%s, started %s, lease renewed %s and held until %s, id %s)",
		w.PID, w.Host, user, w.StartedAt.UTC().Format(time.RFC3339), w.RenewedAt.UTC().Format(time.RFC3339),
		w.ExpiresAt.UTC().Format(time.RFC3339), w.ID)
}

// SetWatcher records w as the watcher's lease in s, which was loaded at
// s.Serial and is to be saved next over it. leaseOnly says that save
// changes nothing but the lease: the versions before and after it then
// hold the same, which Holds lets a saved plan rely on.
func (s *State) SetWatcher(w Watcher, leaseOnly bool) {
	w.RenewedSerial, w.SameSince = 0, 0
	if leaseOnly {
		w.RenewedSerial, w.SameSince = s.Serial+1, s.Serial
		if prev := s.Watcher; prev != nil && prev.RenewedSerial != 0 && prev.RenewedSerial == s.Serial {
			// The version loaded was itself a renewal: the run of equal
			// versions goes on.
			w.SameSince = prev.SameSince
		}
	}
	s.Watcher = &w
}

// Holds says whether s is the version of lineage at serial, or a later
// one that differs from it only by renewals of a watcher's lease: a plan
// made from that version plans right against s.
func (s *State) Holds(lineage string, serial uint64) bool {
	if s.Lineage != lineage {
		return false
	}
	if s.Serial == serial {
		return true
	}
	w := s.Watcher
	return w != nil && w.RenewedSerial != 0 && w.RenewedSerial == s.Serial && w.SameSince <= serial && serial < s.Serial
}

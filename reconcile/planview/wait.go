package planview

import (
	"time"

	"github.com/gpulayer/gpulayer/reconcile"
)

// waitLine says since when a job waits for a tighter group and until
// when at most: the part of its max_wait decision that its reason does
// not (`waiting since 2026-12-02T12:00:00Z; placed at the looser level
// after 2026-12-02T12:15:00Z if no tighter group frees by then`); "" for
// a job that does not wait.
func waitLine(c reconcile.JobChange) string {
	w := c.Wait
	if w == nil || !w.Waiting {
		return ""
	}
	since := "waiting since " + w.Since.UTC().Format(time.RFC3339)
	if w.Record {
		since = "starts waiting now (" + w.Since.UTC().Format(time.RFC3339) + ")"
	}
	return since + "; placed at the looser level after " + w.Until.UTC().Format(time.RFC3339) + " if no tighter group frees by then"
}

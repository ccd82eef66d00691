package reconcile

import (
	"slices"
	"testing"
)

// TestSplitLogTailReadsAnOldMultiLineLaunchError: a state written by a
// gpulayer before 2026-12-03 holds a failed launch's error as apply
// printed it, over several lines; plans and status read its sentence and
// its log apart (a one-line sentence, the log as the reason's tail), and
// a line about nodes not stopped stays in the sentence. Today's one-line
// error is kept as it is.
func TestSplitLogTailReadsAnOldMultiLineLaunchError(t *testing.T) {
	for _, tt := range []struct {
		err, want string
		tail      []string
	}{
		{`job "a": node 0 on h1: the process ended right after it started; the log ends with: boom | bang`,
			`job "a": node 0 on h1: the process ended right after it started; the log ends with: boom | bang`, nil},
		{"job \"a\": node 0 on h1: the process ended right after it started; the log ends with:\n  | boom\n  | bang",
			`job "a": node 0 on h1: the process ended right after it started`, []string{"boom", "bang"}},
		{"job \"a\": node 0 on h1: the process ended right after it started; the log ends with:\n  | boom\n  the nodes it started on h2 could not be stopped: they are kept in state as a leftover",
			`job "a": node 0 on h1: the process ended right after it started; the nodes it started on h2 could not be stopped: they are kept in state as a leftover`, []string{"boom"}},
		{"", "", nil},
	} {
		got, tail := splitLogTail(tt.err)
		if got != tt.want || !slices.Equal(tail, tt.tail) {
			t.Errorf("splitLogTail(%q) = %q, %q; want %q, %q", tt.err, got, tail, tt.want, tt.tail)
		}
	}
}

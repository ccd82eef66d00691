package state

import (
	"encoding/json"
	"testing"
)

// TestAnOldMultiLineLaunchErrorIsReadOnOneLine: a state written by a
// gpulayer before 2026-12-03 kept a failed launch's error over several
// lines (the log's last lines under it, and a line about nodes not
// stopped); read today it is on one line, in the form apply now writes,
// in the job, a leftover and a run of the history, and an error that is
// already one line is left as it is.
func TestAnOldMultiLineLaunchErrorIsReadOnOneLine(t *testing.T) {
	old := "job \"a\": node 0 on h1: the process ended right after it started; the log ends with:\n  | boom\n  | bang\n  the nodes it started on h2 could not be stopped: they are kept in state as a leftover"
	want := `job "a": node 0 on h1: the process ended right after it started; the log ends with: boom | bang; the nodes it started on h2 could not be stopped: they are kept in state as a leftover`
	s := New()
	s.Lineage, s.Serial = "3f0c6a52-8a0e-4b8e-9d8e-1c2b3a4d5e6f", 1
	s.Jobs = []Job{{Name: "a", Status: JobFailed, Error: old, History: []Run{{RunID: "r1", Status: JobFailed, Message: old, Nodes: []NodeEnd{}}}}}
	s.Leftovers = []Job{{Name: "b", Status: JobFailed, Error: old}}
	s.Jobs = append(s.Jobs, Job{Name: "c", Status: JobFailed, Error: want})
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode("state.json", data)
	if err != nil {
		t.Fatal(err)
	}
	for what, v := range map[string]string{
		"job": got.Jobs[0].Error, "history": got.Jobs[0].History[0].Message, "leftover": got.Leftovers[0].Error, "one line already": got.Jobs[1].Error,
	} {
		if v != want {
			t.Errorf("%s: %q, want %q", what, v, want)
		}
	}
}

package state

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWaitsRoundTripAndStateWithoutThemIsWrittenAsBefore(t *testing.T) {
	l := NewLocal(DefaultPath(t.TempDir()))
	s := sample()
	mustSave(t, l, s, 0)
	if bytes.Contains(readFile(t, l.Path()), []byte(`"waits"`)) {
		t.Fatal("a state without waits writes a waits field")
	}
	s = mustLoad(t, l)
	since := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	s.SetWait(Wait{Job: "train", ConfigHash: "sha256:b", Since: since, Level: "network_group", Location: Location{NetworkGroup: "rack-3"}})
	s.SetWait(Wait{Job: "eval", ConfigHash: "sha256:a", Since: since})
	mustSave(t, l, s, s.Serial)
	if !bytes.Contains(readFile(t, l.Path()), []byte(`"waiting_since": "2026-12-02T12:00:00Z"`)) {
		t.Errorf("the state file does not record when the job started waiting:\n%s", readFile(t, l.Path()))
	}
	got := mustLoad(t, l)
	if len(got.Waits) != 2 || got.Waits[0].Job != "eval" || got.Wait("train") == nil || !got.Wait("train").Since.Equal(since) {
		t.Fatalf("waits %+v", got.Waits)
	}
	c := got.Clone()
	c.RemoveWait("eval")
	if len(got.Waits) != 2 {
		t.Error("a clone's RemoveWait changed the original")
	}
	c.RemoveWait("train")
	if c.Waits != nil {
		t.Errorf("waits %+v; none left is none written", c.Waits)
	}
}

func TestTwoWaitsOfOneJobAreRefused(t *testing.T) {
	l := NewLocal(DefaultPath(t.TempDir()))
	s := sample()
	since := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	s.Waits = []Wait{{Job: "train", Since: since}, {Job: "train", Since: since}}
	if err := l.Save(t.Context(), s, 0); err == nil || !strings.Contains(err.Error(), `two waits of job "train"`) {
		t.Fatalf("Save = %v", err)
	}
	// A file written so by hand is refused too.
	s.Lineage, s.Serial = "6f1d1a8e-7c39-4d4f-9a51-3a0d2b7c9e10", 3
	if err := os.MkdirAll(filepath.Dir(l.Path()), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.Path(), mustEncode(t, s), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := l.Load(t.Context())
	var unreadable *UnreadableError
	if !errors.As(err, &unreadable) || !strings.Contains(err.Error(), `two waits of job "train"`) {
		t.Fatalf("Load = %v", err)
	}
}

package sandbox

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordingWriter keeps every write it gets.
type recordingWriter struct {
	mu     sync.Mutex
	writes []string
	err    error
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

func (w *recordingWriter) got() (string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.writes, ""), len(w.writes)
}

func TestCoalescingWriterSendsSmallWritesTogetherInOrder(t *testing.T) {
	w := &recordingWriter{}
	c := newCoalescingWriter(w)
	var want bytes.Buffer
	for i := range 200 {
		line := "line " + strconv.Itoa(i) + "\n"
		want.WriteString(line)
		if n, err := c.Write([]byte(line)); n != len(line) || err != nil {
			t.Fatalf("Write: %d %v", n, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	got, writes := w.got()
	if got != want.String() {
		t.Fatalf("output differs:\n%s", got)
	}
	if writes > 20 {
		t.Errorf("200 small writes reached the channel as %d writes", writes)
	}
	// After Close, a late writer goes straight through.
	if _, err := c.Write([]byte("late\n")); err != nil {
		t.Fatal(err)
	}
	if got, _ := w.got(); !strings.HasSuffix(got, "line 199\nlate\n") {
		t.Errorf("a write after Close was lost: %q", got[len(got)-20:])
	}
}

// Output of a command that is still running arrives without Close, so a
// session streams as a shell's would.
func TestCoalescingWriterFlushesWithoutClose(t *testing.T) {
	w := &recordingWriter{}
	c := newCoalescingWriter(w)
	defer c.Close()
	if _, err := c.Write([]byte("progress 1\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if got, _ := w.got(); got == "progress 1\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("output held for 5 s without Close")
		}
		time.Sleep(time.Millisecond)
	}
	big := strings.Repeat("x", coalesceLimit)
	if _, err := c.Write([]byte(big)); err != nil {
		t.Fatal(err)
	}
	if got, _ := w.got(); got != "progress 1\n"+big {
		t.Error("a write of the coalescing limit was held")
	}
}

func TestCoalescingWriterReportsTheChannelsError(t *testing.T) {
	closed := errors.New("channel closed")
	w := &recordingWriter{err: closed}
	c := newCoalescingWriter(w)
	_, _ = c.Write([]byte("lost\n"))
	if err := c.Close(); !errors.Is(err, closed) {
		t.Errorf("Close: %v, want %v", err, closed)
	}
	if _, err := c.Write([]byte("more\n")); !errors.Is(err, closed) {
		t.Errorf("Write after a failed flush: %v, want %v", err, closed)
	}
}

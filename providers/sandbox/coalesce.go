package sandbox

import (
	"io"
	"sync"
	"time"
)

// flushDelay is the longest a session's output waits in a
// coalescingWriter.
const flushDelay = 2 * time.Millisecond

// coalesceLimit is how much output a coalescingWriter holds before it
// writes at once.
const coalesceLimit = 32 << 10

// coalescingWriter gathers a session's small writes into fewer, larger
// ones. The interpreter writes every printf and echo on its own, and each
// write to an SSH channel is an encrypted packet and a system call on both
// ends: most of the sandbox's side of a probe, and a share of the
// client's, before this. Output reaches w at most flushDelay after it was
// written, in order, and all of it by Close.
type coalescingWriter struct {
	mu     sync.Mutex
	w      io.Writer
	buf    []byte
	timer  *time.Timer
	armed  bool
	closed bool
	err    error // the first error w returned; later writes fail with it
}

func newCoalescingWriter(w io.Writer) *coalescingWriter {
	c := &coalescingWriter{w: w}
	c.timer = time.AfterFunc(time.Hour, c.flushTimer)
	c.timer.Stop()
	return c
}

func (c *coalescingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if c.closed {
		// A late writer (a process that outlived its command): straight
		// through.
		return c.w.Write(p)
	}
	c.buf = append(c.buf, p...)
	if len(c.buf) >= coalesceLimit {
		c.flushLocked()
		return len(p), c.err
	}
	if !c.armed {
		c.armed = true
		c.timer.Reset(flushDelay)
	}
	return len(p), nil
}

func (c *coalescingWriter) flushTimer() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = false
	c.flushLocked()
}

// flushLocked writes what is held. Holding the lock while w blocks (an SSH
// channel's window is full) makes writers wait, as a pipe would.
func (c *coalescingWriter) flushLocked() {
	if len(c.buf) == 0 || c.err != nil {
		return
	}
	_, c.err = c.w.Write(c.buf)
	c.buf = c.buf[:0]
}

// Close writes what is held; later writes go straight to w. It returns the
// first error w returned.
func (c *coalescingWriter) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timer.Stop()
	c.armed = false
	c.flushLocked()
	c.closed = true
	return c.err
}

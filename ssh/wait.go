package ssh

import "context"

// await runs f in a goroutine of its own and returns its result, or, as
// soon as ctx ends, ctx's error with abandoned set. x/crypto/ssh's calls
// take no context (opening a channel, a request that wants a reply, a
// handshake waiting on the agent); a server that never answers would hold
// the caller for ever. A result that arrives after the caller left is
// handed to late, which must release it (close the session or connection,
// give back a slot); late may be nil when there is nothing to release.
// The goroutine itself ends once f returns, at the latest when the
// connection f uses is closed.
func await[T any](ctx context.Context, f func() (T, error), late func(T, error)) (v T, abandoned bool, err error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, false, r.err
	case <-ctx.Done():
	}
	go func() {
		r := <-ch
		if late != nil {
			late(r.v, r.err)
		}
	}()
	var zero T
	return zero, true, ctx.Err()
}

// pending is a value made once in the background, which any number of
// callers wait for, each only as long as its own context allows: a file
// being read, a connection to the agent being made.
type pending[T any] struct {
	done chan struct{}
	v    T
	err  error
}

// startPending starts making a value with f.
func startPending[T any](f func() (T, error)) *pending[T] {
	p := &pending[T]{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.v, p.err = f()
	}()
	return p
}

// wait returns the value, or ctx's error if ctx ends first.
func (p *pending[T]) wait(ctx context.Context) (T, error) {
	select {
	case <-p.done:
		return p.v, p.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// made reports, without waiting, whether the value is made (v and err
// may then be read).
func (p *pending[T]) made() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

package sema

import (
	"context"
	"sync/atomic"
	"time"
)

// releaseCtx is the context of a release on a backend outside the process:
// detached from the caller's cancellation (it keeps the caller's values) and
// done at its deadline, the client's release timeout from the start. What
// context.WithTimeout costs — a timer, five allocations — is spent only if
// the backend asks for Done (or for Err past the deadline): most releases
// wait on nothing (a lock taken at once, a connection with a deadline of its
// own), so most never make it.
type releaseCtx struct {
	vals     context.Context // the caller's context without its cancellation
	deadline time.Time
	inner    atomic.Pointer[timeoutCtx] // made on first need
}

// release gives back the lease id of name on a backend outside the
// process: detached from ctx's cancellation, bounded by the client's
// release timeout (by the backend itself if it is a DeadlineReleaser, else
// by a releaseCtx), retrying transient errors until then.
func (c *Client) release(ctx context.Context, name, id string) error {
	deadline := time.Now().Add(c.releaseTimeout)
	if dr := c.dreleaser; dr != nil {
		vals := context.WithoutCancel(ctx)
		return retryUntil(deadline, func() error { return dr.ReleaseBy(vals, name, id, deadline) })
	}
	rctx := newReleaseCtx(ctx, deadline)
	defer rctx.stop()
	return retryUntil(deadline, func() error { return c.b.Release(rctx, name, id) })
}

type timeoutCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newReleaseCtx(parent context.Context, deadline time.Time) *releaseCtx {
	return &releaseCtx{vals: context.WithoutCancel(parent), deadline: deadline}
}

// Deadline reports the release's deadline.
func (r *releaseCtx) Deadline() (time.Time, bool) { return r.deadline, true }

// Done returns a channel closed at the deadline.
func (r *releaseCtx) Done() <-chan struct{} { return r.timer().Done() }

// Err returns context.DeadlineExceeded once the deadline has passed.
func (r *releaseCtx) Err() error {
	if in := r.inner.Load(); in != nil {
		return in.ctx.Err()
	}
	if time.Now().Before(r.deadline) {
		return nil
	}
	return r.timer().Err() // made past its deadline: done already
}

// Value returns the caller's values. Once the timer context exists it
// answers, so that contexts derived from this one find it and are cancelled
// with it directly (no goroutine watching Done).
func (r *releaseCtx) Value(key any) any {
	if in := r.inner.Load(); in != nil {
		return in.ctx.Value(key)
	}
	return r.vals.Value(key)
}

// timer returns the context that carries the deadline, making it once.
func (r *releaseCtx) timer() context.Context {
	if in := r.inner.Load(); in != nil {
		return in.ctx
	}
	ctx, cancel := context.WithDeadline(r.vals, r.deadline)
	if !r.inner.CompareAndSwap(nil, &timeoutCtx{ctx, cancel}) {
		cancel() // another goroutine made one first
		return r.inner.Load().ctx
	}
	return ctx
}

// stop releases the timer, if one was made, when the release is over.
func (r *releaseCtx) stop() {
	if in := r.inner.Load(); in != nil {
		in.cancel()
	}
}

package remote

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/wire"
)

// TryAcquire asks the server once for the permits, without waiting.
func (b *Backend) TryAcquire(ctx context.Context, req sema.Request) (sema.Grant, error) {
	if err := req.Validate(); err != nil {
		return sema.Grant{}, err
	}
	if b.closed.Load() {
		return sema.Grant{}, sema.ErrClosed
	}
	if ctx.Err() != nil {
		return sema.Grant{}, notAcquired(ctx)
	}
	g, err := b.acquireOnce(ctx, &req, 0)
	if err != nil && ctx.Err() != nil {
		b.giveBack(req.Name, req.ID)
		return sema.Grant{}, notAcquired(ctx)
	}
	g.Waited = 0
	return g, err
}

// acquireOnce posts one acquire; waitMs > 0 makes it a long poll.
func (b *Backend) acquireOnce(ctx context.Context, req *sema.Request, waitMs int64) (sema.Grant, error) {
	buf := getBuffer()
	in := wire.AcquireRequest{Name: req.Name, Limit: req.Limit, Weight: req.Weight, TTLMillis: ttlMillis(req.TTL),
		Owner: req.Owner, ID: req.ID, WaitMillis: waitMs, Host: req.Host, PID: req.PID}
	buf.b = in.Append(buf.b[:0])
	l := wire.Lease{Name: req.Name, ID: req.ID, Owner: req.Owner}
	timeout := b.cfg.RequestTimeout
	if waitMs > 0 {
		timeout = 0 // a long poll
	}
	found, err := b.leaseCall(ctx, opAcquire, req.Name, buf.b, req.ID, timeout, &l)
	putBuffer(buf)
	if err != nil {
		return sema.Grant{}, err
	}
	if !found || l.ID != req.ID || l.Name != req.Name {
		return sema.Grant{}, fmt.Errorf("remote: acquire %q: %w: the server answered with another lease", req.Name, sema.ErrUnavailable)
	}
	return grantOf(&l), nil
}

// Acquire waits in the server's FIFO queue for the permits (a long poll),
// until granted or ctx is done. A poll that the server ends at its cap is
// repeated with the same lease ID; so is one that failed for a transient
// reason (for up to Config.RetryTimeout).
func (b *Backend) Acquire(ctx context.Context, req sema.Request) (sema.Grant, error) {
	if err := req.Validate(); err != nil {
		return sema.Grant{}, err
	}
	if b.closed.Load() {
		return sema.Grant{}, sema.ErrClosed
	}
	if ctx.Err() != nil {
		return sema.Grant{}, notAcquired(ctx)
	}
	// Close ends a long poll in flight itself (the sema-mux transport
	// half-closes, roundTrip ties net/http's request to the backend's
	// closing), so there is no context per call to derive here: stopped
	// polls both.
	stopped := func() bool { return ctx.Err() != nil || b.closed.Load() }
	var failing time.Time // start of the current run of transient failures
	backoff := 10 * time.Millisecond
	for {
		wait := b.cfg.MaxWait
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		if stopped() || wait <= 0 {
			return sema.Grant{}, b.abandoned(ctx, &req, false)
		}
		sent := time.Now()
		g, err := b.acquireOnce(ctx, &req, max(int64(wait/time.Millisecond), 1))
		switch {
		case err == nil && stopped():
			// Granted as the wait was cancelled (sema-mux still reads the
			// final answer after a cancellation): give it back.
			b.giveBack(req.Name, req.ID)
			return sema.Grant{}, b.abandoned(ctx, &req, false)
		case err == nil:
			// Never trust a server's wait beyond what this client saw: the
			// core's local deadline counts from sent + Waited.
			g.Waited = min(g.Waited, time.Since(sent))
			return g, nil
		case stopped():
			// A poll the server answered as cancelled (sema-mux) was
			// dequeued: there is nothing to give back.
			return sema.Grant{}, b.abandoned(ctx, &req, !errors.Is(err, errMuxCancelled))
		case errors.Is(err, sema.ErrNotAcquired):
			// The server's cap ended the poll: poll again. An early answer
			// (a server with a tiny cap) is paced.
			failing = time.Time{}
			if time.Since(sent) < 50*time.Millisecond {
				if !b.sleep(ctx, 50*time.Millisecond) {
					return sema.Grant{}, b.abandoned(ctx, &req, false)
				}
			}
		case errors.Is(err, sema.ErrUnavailable):
			if failing.IsZero() {
				failing = sent
				backoff = 10 * time.Millisecond
			}
			if b.cfg.RetryTimeout < 0 || time.Since(failing) > b.cfg.RetryTimeout || !b.reached.Load() {
				return sema.Grant{}, err // (a server never reached is likely a wrong URL: fail fast)
			}
			b.cfg.Logger.Debug("remote: acquire failed; retrying with the same lease id",
				"name", req.Name, "lease", req.ID, "err", err)
			if !b.sleep(ctx, backoff) {
				return sema.Grant{}, b.abandoned(ctx, &req, true)
			}
			backoff = min(backoff*2, time.Second)
		default:
			return sema.Grant{}, err
		}
	}
}

// abandoned ends an Acquire whose context (or the backend) closed. If a
// poll was in flight, the server may have granted just then: give it back.
func (b *Backend) abandoned(ctx context.Context, req *sema.Request, inFlight bool) error {
	if inFlight {
		b.giveBack(req.Name, req.ID)
	}
	if ctx.Err() == nil && b.closed.Load() {
		return sema.ErrClosed
	}
	return notAcquired(ctx)
}

// giveBackTimeout bounds giving back a grant nobody will use.
func (b *Backend) giveBackTimeout() time.Duration { return min(b.cfg.RequestTimeout, 2*time.Second) }

// giveBack releases a grant nobody will use, within a short timeout, even
// if the backend is closing (Close cut the poll that brought the grant).
func (b *Backend) giveBack(name, id string) {
	ctx := context.Background()
	if err := b.release(ctx, name, id, b.giveBackTimeout()); err != nil && !errors.Is(err, sema.ErrNotHeld) {
		b.cfg.Logger.Debug("remote: giving back an abandoned grant failed", "name", name, "lease", id, "err", err)
	}
}

// notAcquired is the error of an acquire that ctx ended. A deadline that
// has passed is context.DeadlineExceeded, whether or not ctx's timer has
// fired yet.
func notAcquired(ctx context.Context) error {
	cause := context.Cause(ctx)
	if cause == nil {
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
			cause = context.DeadlineExceeded
		}
	}
	if cause == nil {
		return sema.ErrNotAcquired
	}
	return fmt.Errorf("%w: %w", sema.ErrNotAcquired, cause)
}

// sleep waits d or until ctx is done or the backend closed; it reports
// whether d passed.
func (b *Backend) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-b.closeCtx.Done():
		return false
	}
}

package remote

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sema-dev/sema"
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
	body := appendAcquire(make([]byte, 0, 160+len(req.Name)+len(req.Owner)+len(req.Host)), req, waitMs)
	l, err := b.leaseCall(ctx, "acquire", b.uAcquire, req.Name, body, req.ID, waitMs == 0)
	if err != nil {
		return sema.Grant{}, err
	}
	if l == nil || l.ID != req.ID || l.Name != req.Name {
		return sema.Grant{}, fmt.Errorf("remote: acquire %q: %w: the server answered with another lease", req.Name, sema.ErrUnavailable)
	}
	return grantOf(l), nil
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
	pctx := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.closeCtx, cancel)()

	var failing time.Time // start of the current run of transient failures
	backoff := 10 * time.Millisecond
	for {
		wait := b.cfg.MaxWait
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		if ctx.Err() != nil || wait <= 0 {
			return sema.Grant{}, b.abandoned(pctx, &req, false)
		}
		sent := time.Now()
		g, err := b.acquireOnce(ctx, &req, max(int64(wait/time.Millisecond), 1))
		switch {
		case err == nil && ctx.Err() != nil:
			// Granted as the wait was cancelled (the h1 client still reads
			// the final answer after a cancellation): give it back.
			b.giveBack(req.Name, req.ID)
			return sema.Grant{}, b.abandoned(pctx, &req, false)
		case err == nil:
			// Never trust a server's wait beyond what this client saw: the
			// core's local deadline counts from sent + Waited.
			g.Waited = min(g.Waited, time.Since(sent))
			return g, nil
		case ctx.Err() != nil:
			return sema.Grant{}, b.abandoned(pctx, &req, true)
		case errors.Is(err, sema.ErrNotAcquired):
			// The server's cap ended the poll: poll again. An early answer
			// (a server with a tiny cap) is paced.
			failing = time.Time{}
			if time.Since(sent) < 50*time.Millisecond {
				if !sleep(ctx, 50*time.Millisecond) {
					return sema.Grant{}, b.abandoned(pctx, &req, false)
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
			if !sleep(ctx, backoff) {
				return sema.Grant{}, b.abandoned(pctx, &req, true)
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

// giveBack releases a grant nobody will use, on its own short context.
func (b *Backend) giveBack(name, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), b.giveBackTimeout())
	defer cancel()
	if err := b.release(ctx, name, id); err != nil && !errors.Is(err, sema.ErrNotHeld) {
		b.cfg.Logger.Debug("remote: giving back an abandoned grant failed", "name", name, "lease", id, "err", err)
	}
}

func notAcquired(ctx context.Context) error {
	return fmt.Errorf("%w: %w", sema.ErrNotAcquired, context.Cause(ctx))
}

// sleep waits d or until ctx is done; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

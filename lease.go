package sema

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Lease is a grant of permits. Ownership is the possession of this value:
// any goroutine may release it. A lease can be lost at any time (expiry,
// force-release, a backend that stops answering); [Lease.Done] closes and
// [Lease.Context] is cancelled before the backend could give the permits to
// anyone else, and [Lease.Err] tells why.
type Lease struct {
	c      *Client
	g      Grant
	cfg    acquireConfig
	parent context.Context // the acquire context, for its values only

	mu        sync.Mutex // guards the fields below
	deadline  time.Time  // local, monotonic: sent + TTL − margin
	nextRenew time.Time
	expiresAt time.Time // backend clock
	ended     bool
	reason    error // why it ended
	stopping  bool  // Release has begun
	renewing  bool  // a keepalive renewal is in flight
	failures  int
	timer     *leaseTimer // the next renewal or the deadline, whichever comes first
	maxHoldT  *time.Timer
	inflight  context.CancelFunc // cancels the renewal in progress
	ctx       context.Context    // created on first use
	cancel    context.CancelCauseFunc

	renewMu sync.Mutex // held for the duration of each renewal
	relMu   sync.Mutex // serialises Release calls
	relDone bool
	relErr  error
}

func newLease(c *Client, g Grant, cfg *acquireConfig, now, deadline time.Time, parent context.Context) *Lease {
	l := &Lease{c: c, g: g, cfg: *cfg, parent: parent, deadline: deadline, expiresAt: g.ExpiresAt}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nextRenew = now.Add(cfg.interval)
	l.timer = getTimer(l, l.nextWake(now))
	if cfg.maxHold > 0 {
		l.maxHoldT = time.AfterFunc(cfg.maxHold, func() { l.end(ErrMaxHold) })
	}
	return l
}

// stopTimer stops the lease's timer and forgets it: once stopped it may be
// lent to another lease, so it must never be touched again from here.
func (l *Lease) stopTimer() {
	if l.timer != nil {
		l.timer.stop()
		l.timer = nil
	}
}

// nextWake is how long until the timer must fire: the next renewal with
// keepalive on, else the deadline.
func (l *Lease) nextWake(now time.Time) time.Duration {
	if l.cfg.keepalive && !l.renewing && l.nextRenew.Before(l.deadline) {
		return l.nextRenew.Sub(now)
	}
	return l.deadline.Sub(now)
}

// Name returns the semaphore's name.
func (l *Lease) Name() string { return l.g.Name }

// ID returns the lease ID: random, unique per acquisition.
func (l *Lease) ID() string { return l.g.ID }

// Token returns the fencing token: strictly increasing per name over every
// grant. Pass it to the resource you guard so it can refuse stale holders.
func (l *Lease) Token() uint64 { return l.g.Token }

// Owner returns the owner label.
func (l *Lease) Owner() string { return l.g.Owner }

// Weight returns the number of permits held.
func (l *Lease) Weight() int64 { return l.g.Weight }

// Limit returns the semaphore's limit.
func (l *Lease) Limit() int64 { return l.g.Limit }

// AcquiredAt returns when the backend granted the lease, by its clock.
func (l *Lease) AcquiredAt() time.Time { return l.g.AcquiredAt }

// ExpiresAt returns when the backend will expire the lease unless renewed,
// by its clock, as of the last confirmed renewal.
func (l *Lease) ExpiresAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiresAt
}

// Context returns a context cancelled when the lease ends, with the reason
// as its cause ([context.Cause]). It carries the values of the context the
// lease was acquired with, not its cancellation.
func (l *Lease) Context() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		l.ctx, l.cancel = context.WithCancelCause(context.WithoutCancel(l.parent))
		if l.ended {
			l.cancel(l.reason)
		}
	}
	return l.ctx
}

// Done returns a channel closed when the lease ends.
func (l *Lease) Done() <-chan struct{} { return l.Context().Done() }

// Err returns nil while the lease is held, then why it ended: ErrReleased,
// ErrExpired, ErrForceReleased, ErrMaxHold (all but the first satisfy
// errors.Is(err, ErrLeaseLost)), or a backend error.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reason
}

// String describes the lease for logs.
func (l *Lease) String() string {
	return fmt.Sprintf("lease %s on %q token %d weight %d/%d owner %q",
		l.g.ID, l.g.Name, l.g.Token, l.g.Weight, l.g.Limit, l.g.Owner)
}

// end finishes the lease with reason unless it already ended.
func (l *Lease) end(reason error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endLocked(reason)
}

func (l *Lease) endLocked(reason error) {
	if l.ended {
		return
	}
	l.ended = true
	l.reason = reason
	l.stopTimer()
	if l.maxHoldT != nil {
		l.maxHoldT.Stop()
	}
	if l.cancel != nil {
		l.cancel(reason)
	}
	if !errors.Is(reason, ErrReleased) {
		l.c.log.Warn("sema: lease lost", "name", l.g.Name, "lease", l.g.ID, "token", l.g.Token, "reason", reason)
	}
}

// Release gives the permits back and stops keepalive before it returns. It
// runs on its own context, detached from ctx's cancellation and bounded by
// the client's release timeout, so a cancelled caller does not leave the
// permits held until the TTL. It is idempotent: later calls return the first
// result. It returns nil if the lease was held until released, or an error
// wrapping ErrLeaseLost if it had been lost before.
func (l *Lease) Release(ctx context.Context) error {
	l.relMu.Lock()
	defer l.relMu.Unlock()
	if !l.relDone {
		l.relErr = l.release(ctx)
		l.relDone = true
	}
	return l.relErr
}

func (l *Lease) release(ctx context.Context) error {
	l.mu.Lock()
	l.stopping = true
	l.stopTimer()
	if l.inflight != nil {
		l.inflight()
	}
	lost := l.reason
	l.mu.Unlock()
	l.renewMu.Lock() // wait for a renewal in progress: none runs after this
	l.renewMu.Unlock()

	var err error
	if l.c.local {
		// An in-process backend answers at once: nothing to bound or cancel.
		err = l.c.b.Release(context.Background(), l.g.Name, l.g.ID)
	} else {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.c.releaseTimeout)
		defer cancel()
		err = retry(rctx, func() error { return l.c.b.Release(rctx, l.g.Name, l.g.ID) })
	}
	l.end(ErrReleased)
	switch {
	case lost != nil:
		return fmt.Errorf("sema: release %q: lease had ended: %w", l.g.Name, lost)
	case errors.Is(err, ErrNotHeld):
		return fmt.Errorf("sema: release %q: backend no longer held it: %w", l.g.Name, ErrExpired)
	case err != nil:
		return fmt.Errorf("sema: release %q: %w", l.g.Name, err)
	}
	return nil
}

// retry calls op until it succeeds, fails with a sentinel other than
// ErrUnavailable, or ctx ends.
func retry(ctx context.Context, op func() error) error {
	delay := 5 * time.Millisecond
	for {
		err := op()
		if err == nil || !transient(err) {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		delay = min(delay*2, 500*time.Millisecond)
	}
}

// transient reports whether err says nothing definite about the lease.
func transient(err error) bool {
	for _, s := range []error{ErrLeaseLost, ErrNotHeld, ErrClosed, ErrPermission, ErrInvalidArgument, ErrInvalidName, ErrLimitMismatch, ErrNotAcquired} {
		if errors.Is(err, s) {
			return false
		}
	}
	return true
}

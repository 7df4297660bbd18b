package sema

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// tick is the lease timer's callback: it ends the lease at its deadline and
// runs keepalive renewals in between.
func (l *Lease) tick() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended || l.stopping {
		return
	}
	now := l.c.now()
	if !now.Before(l.deadline) {
		l.endLocked(ErrExpired)
		return
	}
	if !l.cfg.keepalive || l.renewing || now.Before(l.nextRenew) {
		l.timer.t.Reset(l.nextWake(now)) // early, or a renewal is in flight
		return
	}
	l.renewing = true
	l.timer.t.Reset(l.deadline.Sub(now)) // the deadline holds even if the renewal hangs
	l.mu.Unlock()
	err := l.renew(context.Background(), l.cfg.interval/2)
	l.mu.Lock()
	l.renewing = false
	if l.ended || l.stopping {
		return
	}
	now = l.c.now()
	if err == nil {
		l.failures = 0
		l.nextRenew = now.Add(l.cfg.interval)
	} else {
		// A transient failure: retry while the lease is provably still valid.
		l.failures++
		l.c.log.Debug("sema: renewal failed", "name", l.g.Name, "lease", l.g.ID, "attempt", l.failures, "err", err)
		backoff := min(time.Duration(l.failures)*l.cfg.interval/8, l.cfg.interval)
		l.nextRenew = now.Add(min(backoff, l.deadline.Sub(now)/2+time.Millisecond))
	}
	l.timer.t.Reset(l.nextWake(now))
}

// Refresh extends the lease now (compare-and-extend on its ID). It never
// re-creates a lost lease: then it returns an error wrapping ErrLeaseLost and
// the lease ends.
func (l *Lease) Refresh(ctx context.Context) error {
	return l.renew(ctx, 0)
}

// renew performs one renewal, bounded by the lease's deadline and, if
// attempt > 0, by attempt: a hung call is abandoned in time to retry.
// Definite answers (lost, closed) end the lease; transient errors are
// returned for the caller to retry.
func (l *Lease) renew(ctx context.Context, attempt time.Duration) error {
	l.renewMu.Lock()
	defer l.renewMu.Unlock()
	l.mu.Lock()
	if l.ended || l.stopping {
		err := l.reason
		l.mu.Unlock()
		if err != nil {
			return err
		}
		return ErrReleased
	}
	// The renewal must not outlive the window in which the lease is valid.
	limit := l.deadline
	if attempt > 0 {
		if t := l.c.now().Add(attempt); t.Before(limit) {
			limit = t
		}
	}
	rctx, cancel := context.WithDeadline(ctx, limit)
	l.inflight = cancel
	l.mu.Unlock()

	sent := l.c.now()
	g, err := l.c.b.Renew(rctx, l.g.Name, l.g.ID, l.cfg.ttl)
	cancel()

	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight = nil
	if l.ended {
		return l.reason
	}
	switch {
	case err == nil:
		if d := sent.Add(l.cfg.ttl - l.cfg.margin); d.After(l.deadline) {
			l.deadline = d
		}
		l.expiresAt = g.ExpiresAt
		return nil
	case errors.Is(err, ErrLeaseLost), errors.Is(err, ErrNotHeld):
		reason := ErrExpired
		if errors.Is(err, ErrForceReleased) {
			reason = ErrForceReleased
		}
		l.endLocked(reason)
		return fmt.Errorf("sema: renew %q: %w", l.g.Name, reason)
	case errors.Is(err, ErrClosed):
		l.endLocked(err)
		return err
	}
	return fmt.Errorf("sema: renew %q: %w", l.g.Name, err)
}

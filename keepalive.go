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
	now := l.sem.c.now()
	if now >= l.deadline {
		l.endLocked(ErrExpired)
		return
	}
	if !l.cfg.keepalive || l.renewing || now < l.nextRenew {
		l.schedule(now) // early, or a renewal is in flight
		return
	}
	l.renewing = true
	l.schedule(now) // the deadline holds even if the renewal hangs
	l.mu.Unlock()
	err := l.renew(context.Background(), l.cfg.interval/2)
	l.mu.Lock()
	l.renewing = false
	if l.ended || l.stopping {
		return
	}
	now = l.sem.c.now()
	if err == nil {
		l.failures = 0
		l.nextRenew = now + l.cfg.interval
		if l.recheckDue {
			l.recheckDue, l.nextRenew = false, now
		} else if l.x != nil {
			l.x.forcedBy = "" // not force-released after all
		}
	} else {
		// A transient failure: retry while the lease is provably still valid.
		l.failures++
		l.sem.c.log.Debug("sema: renewal failed", "name", l.sem.name, "lease", l.id, "attempt", l.failures, "err", err)
		backoff := min(time.Duration(l.failures)*l.cfg.interval/8, l.cfg.interval)
		l.nextRenew = now + min(backoff, (l.deadline-now)/2+time.Millisecond)
	}
	l.schedule(now)
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
	limit := l.deadline - l.sem.c.now()
	if attempt > 0 {
		limit = min(limit, attempt)
	}
	rctx, cancel := context.WithTimeout(ctx, limit)
	l.extra().inflight = cancel
	l.mu.Unlock()

	sent := l.sem.c.now()
	g, err := l.sem.c.b.Renew(rctx, l.sem.name, l.id, l.cfg.ttl)
	cancel()

	l.mu.Lock()
	defer l.mu.Unlock()
	l.x.inflight = nil
	if l.ended {
		return l.reason
	}
	switch {
	case err == nil:
		l.deadline = max(l.deadline, sent+l.cfg.ttl-l.cfg.margin)
		l.expires = unixNano(g.ExpiresAt)
		return nil
	case errors.Is(err, ErrLeaseLost), errors.Is(err, ErrNotHeld):
		reason := ErrExpired
		if errors.Is(err, ErrForceReleased) {
			reason = ErrForceReleased
			if l.x != nil && l.x.forcedBy != "" {
				reason = &ForcedError{By: l.x.forcedBy}
			}
		}
		l.endLocked(reason)
		return fmt.Errorf("sema: renew %q: %w", l.sem.name, reason)
	case errors.Is(err, ErrClosed):
		l.endLocked(err)
		return err
	}
	return fmt.Errorf("sema: renew %q: %w", l.sem.name, err)
}

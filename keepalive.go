package sema

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// onRenew is the keepalive timer's callback.
func (l *Lease) onRenew() {
	err := l.renew(context.Background())
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended || l.stopping {
		return
	}
	if err == nil {
		l.failures = 0
		l.renewT.Reset(l.cfg.interval)
		return
	}
	// A transient failure: retry while the lease is provably still valid.
	l.failures++
	l.c.log.Debug("sema: renewal failed", "name", l.g.Name, "lease", l.g.ID, "attempt", l.failures, "err", err)
	backoff := min(time.Duration(l.failures)*l.cfg.interval/8, l.cfg.interval)
	if left := time.Until(l.deadline); left > 0 {
		l.renewT.Reset(min(backoff, left/2+time.Millisecond))
	}
}

// Refresh extends the lease now (compare-and-extend on its ID). It never
// re-creates a lost lease: then it returns an error wrapping ErrLeaseLost and
// the lease ends.
func (l *Lease) Refresh(ctx context.Context) error {
	return l.renew(ctx)
}

// renew performs one renewal. Definite answers (lost, closed) end the lease;
// transient errors are returned for the caller to retry.
func (l *Lease) renew(ctx context.Context) error {
	l.renewMu.Lock()
	defer l.renewMu.Unlock()
	l.mu.Lock()
	if l.ended || l.stopping {
		l.mu.Unlock()
		if err := l.Err(); err != nil {
			return err
		}
		return ErrReleased
	}
	// The renewal must not outlive the window in which the lease is valid.
	rctx, cancel := context.WithDeadline(ctx, l.deadline)
	l.inflight = cancel
	l.mu.Unlock()

	sent := time.Now()
	g, err := l.c.b.Renew(rctx, l.g.Name, l.g.ID, l.cfg.ttl)
	cancel()

	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight = nil
	if l.ended {
		return context.Cause(l.ctx)
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

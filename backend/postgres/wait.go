package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/sema-dev/sema"
)

// Acquire waits in the name's FIFO queue until the request is granted or
// ctx is done. The request is queued in the database with a short lease of
// its own (Config.WaiterTTL) that this call renews while it waits. The
// release (or expiry, or cancellation) that frees the permits grants them
// to the head of the queue in its own transaction and announces the grant
// by NOTIFY; the listen connection hands it to this call. Without an event
// the call looks at its request every Config.Recheck, and at the expiry
// that could free its turn. A grant that races with the cancellation of
// ctx is given back.
func (b *Backend) Acquire(ctx context.Context, req sema.Request) (sema.Grant, error) {
	if err := req.Validate(); err != nil {
		return sema.Grant{}, err
	}
	b.closing.RLock()
	defer b.closing.RUnlock()
	if b.closed.Load() {
		return sema.Grant{}, sema.ErrClosed
	}
	if ctx.Err() != nil {
		return sema.Grant{}, b.notAcquired(ctx, &req)
	}
	w := b.lis.register(req.Name, req.ID)
	defer b.lis.unregister(w)
	wt := waiting{b: b, req: &req, w: w}
	st, _, err := b.acquire(ctx, &req, true)
	switch {
	case ctx.Err() != nil: // granted or queued: take it back
		b.leave(ctx, &req)
		return sema.Grant{}, b.notAcquired(ctx, &req)
	case err != nil && !transient(err):
		return sema.Grant{}, err
	case err != nil:
		// The database did not answer (restarting?): whether the request
		// was queued is unknown; look, and ride it out like a waiter.
		st, wt.failing = row{kind: kindGone}, time.Now()
	}
	g, err := wt.wait(ctx, st)
	if err == nil {
		b.holding()
	}
	return g, err
}

// waiting is one waiting Acquire.
type waiting struct {
	b       *Backend
	req     *sema.Request
	w       *waiter
	since   int64     // when the request was queued (µs, database clock)
	due     time.Time // when an expiry that may free its turn is due; zero if none known
	failing time.Time // since when the database has not answered; zero if it does
}

func (wt *waiting) wait(ctx context.Context, st row) (sema.Grant, error) {
	b, req := wt.b, wt.req
	look, err := wt.settle(st)
	if look < 0 || err != nil {
		return wt.result(st, err)
	}
	poll, err := b.lis.ensure(ctx, wt.w)
	if err != nil {
		b.leave(ctx, req)
		return sema.Grant{}, err
	}
	timer := time.NewTimer(look)
	defer timer.Stop()
	for {
		if poll {
			poll = false
			st, err := wt.look(ctx)
			switch {
			case ctx.Err() != nil: // granted, queued or failed: take it back
				b.leave(ctx, req)
				return sema.Grant{}, b.notAcquired(ctx, req)
			case err == nil:
				look, err := wt.settle(st)
				if look < 0 || err != nil {
					if err != nil {
						b.leave(ctx, req)
					}
					return wt.result(st, err)
				}
				timer.Reset(look)
			case b.closed.Load():
				b.leave(ctx, req)
				return sema.Grant{}, sema.ErrClosed
			case !transient(err) || !wt.failing.IsZero() && time.Since(wt.failing) > b.cfg.WaiterTTL:
				// Wrong, or unreachable for longer than the request's own
				// lease: the request has left the queue by now anyway.
				b.leave(ctx, req)
				return sema.Grant{}, err
			default:
				if wt.failing.IsZero() {
					wt.failing = time.Now()
				}
				timer.Reset(min(b.cfg.Recheck, 100*time.Millisecond))
			}
		}
		select {
		case g := <-wt.w.grant:
			if g.acquired >= wt.since { // not one made before the request was queued again
				return wt.grantOf(g.token, g.acquired), nil
			}
		case <-wt.w.recheck:
			poll = true
		case <-timer.C:
			poll = true
		case <-ctx.Done():
			b.leave(ctx, req)
			return sema.Grant{}, b.notAcquired(ctx, req)
		case <-b.done:
			b.leave(ctx, req)
			return sema.Grant{}, sema.ErrClosed
		}
	}
}

// settle reads a step's answer: look is how long to wait before looking at
// the request again, or -1 if the wait is over (granted, or failed).
func (wt *waiting) settle(st row) (look time.Duration, err error) {
	switch st.kind {
	case kindGranted:
		return -1, nil
	case kindQueued:
		// Look again at the expiry that may free the request's turn (then
		// with poll), or after Recheck (with check), ±20% so that the
		// waiters of a name do not look all at once.
		wt.since, wt.failing, wt.due = st.t1, time.Time{}, time.Time{}
		look = jitter(wt.b.cfg.Recheck)
		if hint := time.Duration(st.n)*time.Microsecond + time.Millisecond; st.n >= 0 && hint <= look {
			look, wt.due = hint, time.Now().Add(hint)
		}
		return look, nil
	case kindRevoked:
		return -1, fmt.Errorf("postgres: acquire %q: %w: granted, then force-released before the grant was seen",
			wt.req.Name, sema.ErrNotAcquired)
	case kindGone: // not known to be queued: look soon
		return min(wt.b.cfg.Recheck, 100*time.Millisecond), nil
	case "": // no answer: the step failed
		return -1, nil
	}
	return -1, wt.b.wrap("acquire", wt.req.Name, fmt.Errorf("%w: %q", errAnswer, st.kind))
}

// result ends the wait with a grant or an error.
func (wt *waiting) result(st row, err error) (sema.Grant, error) {
	if err != nil {
		return sema.Grant{}, err
	}
	if st.kind != kindGranted {
		return sema.Grant{}, wt.b.wrap("acquire", wt.req.Name, fmt.Errorf("%w: %q", errAnswer, st.kind))
	}
	if st.id != wt.req.ID {
		return sema.Grant{}, wt.b.wrap("acquire", wt.req.Name, fmt.Errorf("%w: lease %q", errAnswer, st.id))
	}
	return wt.grantOf(st.token, st.t1), nil
}

// grantOf is the grant of the request, made at acquired (µs). Waited is
// the time it spent queued, by the database's clock: the grant was made no
// earlier than that after the request was sent.
func (wt *waiting) grantOf(token, acquired int64) sema.Grant {
	r := wt.req
	at := usTime(acquired)
	g := sema.Grant{
		Name: r.Name, ID: r.ID, Token: uint64(token), Owner: r.Owner, Weight: r.Weight, Limit: r.Limit,
		AcquiredAt: at, ExpiresAt: at.Add(r.TTL),
	}
	if wt.since > 0 && acquired > wt.since {
		g.Waited = time.Duration(acquired-wt.since) * time.Microsecond
	}
	return g
}

// look looks at the request: granted, still queued (its lease renewed), or
// gone from the queue — then it queues again. When an expiry that may free
// its turn is due it polls (which expires and grants under the name's
// lock); otherwise it only checks (which takes no lock on the name).
func (wt *waiting) look(ctx context.Context) (row, error) {
	b, req := wt.b, wt.req
	var rs []row
	var err error
	if !wt.due.IsZero() && !time.Now().Before(wt.due) {
		rs, err = b.step(ctx, "acquire", req.Name, b.stmt.poll, req.Name, req.ID, b.lis.channel, b.cfg.WaiterTTL.Microseconds())
	} else {
		rs, err = b.step(ctx, "acquire", req.Name, b.stmt.check, req.Name, req.ID, b.cfg.WaiterTTL.Microseconds())
	}
	if err != nil {
		return row{}, err
	}
	st, _, err := b.settle(rs, "acquire", req.Name)
	if err != nil || st.kind != kindGone {
		return st, err
	}
	// The request expired from the queue (this process stalled, or the
	// database lost it in a crash): queue again, at the back.
	st, _, err = b.acquire(ctx, req, true)
	return st, err
}

// leave takes the request out of the queue, or gives back what it was
// granted meanwhile, on a context of its own: the caller's is done.
func (b *Backend) leave(ctx context.Context, req *sema.Request) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveTimeout)
	defer cancel()
	b.free.take(req.Name, req.ID)
	rs, err := b.call(lctx, "leave", req.Name, b.stmt.leave, req.Name, req.ID, b.lis.channel)
	if err == nil {
		_, _, err = b.settle(rs, "leave", req.Name)
	}
	if err != nil {
		b.log.Warn("postgres: leaving the queue failed; the request expires with its waiter lease",
			"name", req.Name, "err", err, "waiter_ttl", b.cfg.WaiterTTL)
	}
}

func (b *Backend) notAcquired(ctx context.Context, req *sema.Request) error {
	return fmt.Errorf("postgres: acquire %q: %w: %w", req.Name, sema.ErrNotAcquired, context.Cause(ctx))
}

package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sema-dev/sema"
)

// How a waiter is served: its request waits in the name's queue in Redis
// with a lease of its own (3×Recheck, renewed at every re-check). A
// release (or an expiry, a cancelled waiter, a force-release) runs the
// queue in the same script: it grants the head waiters whose weight fits,
// in order, and publishes each grant on the waiter's backend channel. The
// grant is made in Redis before the message is sent, so the message only
// tells the waiter what it already holds; a lost message costs at most
// Recheck, after which the waiter finds its grant (or its place) by
// running the acquire script again. The head waiter also re-checks when
// the earliest holder's lease is due to expire, so expired permits pass
// on without a release.

// Acquire waits in the name's FIFO queue until the request is granted or
// ctx is done. A grant made as ctx ends is given back.
func (b *Backend) Acquire(ctx context.Context, req sema.Request) (sema.Grant, error) {
	if err := b.check(&req); err != nil {
		return sema.Grant{}, err
	}
	if err := ctx.Err(); err != nil {
		return sema.Grant{}, fmt.Errorf("%w: %w", sema.ErrNotAcquired, context.Cause(ctx))
	}
	b.waiting.Add(1)
	defer b.waiting.Done()
	if b.closed.Load() { // Close may have begun waiting before Add
		return sema.Grant{}, sema.ErrClosed
	}
	// Before this backend listens on its channel, a grant could not be
	// announced: try first, and queue only once subscribed.
	mode := "w"
	if !b.wake.subscribed() {
		mode = "t"
	}
	o, err := b.acquireOnce(ctx, &req, mode)
	if err == nil && o.kind == held && mode == "t" {
		if err = b.subscribe(ctx); err == nil {
			o, err = b.acquireOnce(ctx, &req, "w")
		}
	}
	if err != nil || ctxEnded(ctx) {
		return sema.Grant{}, b.failed(ctx, &req, err)
	}
	switch o.kind {
	case granted:
		b.holding()
		return o.grant, nil
	case queued:
	default:
		return sema.Grant{}, refusal(&req, o)
	}
	wake := b.wake.register(req.ID)
	defer b.wake.unregister(req.ID)
	return b.await(ctx, &req, wake, o)
}

// await waits for the grant of a queued request; o is its last outcome.
// since is Redis's time of the first answer, to date the wait.
func (b *Backend) await(ctx context.Context, req *sema.Request, wake chan string, o outcome) (sema.Grant, error) {
	since := o.now
	t := time.NewTimer(b.nextCheck(o))
	defer t.Stop()
	fails := 0
	for {
		select {
		case msg := <-wake:
			if g, ok := parseGrant(req, msg); ok {
				return b.confirm(ctx, req, g, since)
			}
		case <-t.C:
		case <-ctx.Done():
			b.dequeue(ctx, req)
			return sema.Grant{}, fmt.Errorf("%w: %w", sema.ErrNotAcquired, context.Cause(ctx))
		case <-b.done:
			b.dequeue(ctx, req)
			return sema.Grant{}, fmt.Errorf("redis: acquire %q: %w", req.Name, sema.ErrClosed)
		}
		o2, err := b.acquireOnce(ctx, req, "w")
		switch {
		case ctxEnded(ctx):
			return sema.Grant{}, b.failed(ctx, req, err)
		case err == nil && o2.kind == granted:
			o2.grant.Waited = waited(since, o2.grant)
			return o2.grant, nil
		case err == nil && o2.kind == queued:
			o, fails = o2, 0
			t.Reset(b.nextCheck(o))
		case err == nil:
			b.dequeue(ctx, req)
			return sema.Grant{}, refusal(req, o2)
		case !errors.Is(err, sema.ErrUnavailable) || errors.Is(err, ErrCorrupt):
			return sema.Grant{}, b.failed(ctx, req, err)
		default: // Redis unreachable for now: keep the place, try again
			fails++
			t.Reset(min(time.Duration(fails)*b.cfg.Recheck/4, b.cfg.Recheck))
		}
	}
}

// nextCheck is when a queued waiter looks again by itself: after Recheck,
// or, at the head of the queue, just after the earliest holder's lease
// ends.
func (b *Backend) nextCheck(o outcome) time.Duration {
	d := b.cfg.Recheck
	if o.pos == 0 && o.next < noneExpires {
		d = min(d, time.Duration(max(o.next-o.now+1, 1))*time.Millisecond)
	}
	return d
}

// failed ends a wait that failed or whose ctx ended: it takes the request
// out of the queue (or gives back a grant made meanwhile) and returns err,
// or ErrNotAcquired if ctx ended.
func (b *Backend) failed(ctx context.Context, req *sema.Request, err error) error {
	b.dequeue(ctx, req)
	if ctxEnded(ctx) {
		return fmt.Errorf("%w: %w", sema.ErrNotAcquired, context.Cause(ctx))
	}
	return err
}

// ctxEnded reports whether ctx is done or past its deadline (a network
// deadline taken from ctx may pass just before ctx's own timer fires).
func ctxEnded(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// dequeue takes the request out of the queue, or gives back the grant it
// got meanwhile, on a context of its own. If that fails, the waiter's
// lease in the queue ends it within 3×Recheck.
func (b *Backend) dequeue(ctx context.Context, req *sema.Request) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if _, err := scripts().dequeue.Run(dctx, b.rdb, b.ks.keys(req.Name), req.ID, b.live).Result(); err != nil {
		b.cfg.Logger.Debug("sema: redis: leaving the queue failed", "name", req.Name, "lease", req.ID, "err", err)
	}
}

// confirm returns a grant announced by a message. With WaitReplicas, the
// waiter's own renewal, waited for, proves the grant reached the replicas
// (it was written before the renewal).
func (b *Backend) confirm(ctx context.Context, req *sema.Request, g sema.Grant, since int64) (sema.Grant, error) {
	g.Waited = waited(since, g)
	if b.cfg.WaitReplicas == 0 {
		return g, nil
	}
	r, err := b.Renew(ctx, req.Name, req.ID, req.TTL)
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.WaitTimeout+time.Second)
		defer cancel()
		_ = b.release(rctx, req.Name, req.ID)
		return sema.Grant{}, b.failed(ctx, req, err)
	}
	g.ExpiresAt = r.ExpiresAt
	return g, nil
}

// waited is how long the request waited, by Redis's clock, from the first
// answer (since, ms) to the grant, rounded down: the grant was made at
// least that long after the request was sent.
func waited(since int64, g sema.Grant) time.Duration {
	return time.Duration(max(g.AcquiredAt.UnixMilli()-since-1, 0)) * time.Millisecond
}

// parseGrant reads a grant message: "<lease ID> <token> <acquired ms>
// <expires ms>". It reports false for anything else (a bare wake-up).
func parseGrant(req *sema.Request, msg string) (sema.Grant, bool) {
	f := strings.Split(msg, " ")
	if len(f) != 4 || f[0] != req.ID {
		return sema.Grant{}, false
	}
	var n [3]int64
	for i := range n {
		v, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil || v < 0 {
			return sema.Grant{}, false
		}
		n[i] = v
	}
	if checkGrant(n[0], n[1], n[2]) != nil {
		return sema.Grant{}, false
	}
	return grantOf(req, n[0], n[1], n[2]), true
}

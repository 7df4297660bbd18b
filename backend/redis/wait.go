package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

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

// wakeups is a backend's subscription to its own channel and the waits it
// serves.
type wakeups struct {
	ready atomic.Bool // ps is subscribed
	mu    sync.Mutex
	ps    *goredis.PubSub        // nil until the first wait
	sub   *subAttempt            // the subscription being made, if any
	ws    map[string]chan string // lease ID → its wake-ups: a grant message, or "" (look again)
	early map[string]earlyGrant  // grant messages that came before their wait registered
}

// subAttempt is one attempt to subscribe; done is closed when it ends,
// with err set if it failed.
type subAttempt struct {
	done chan struct{}
	err  error
}

// earlyGrant is a grant message kept for a wait that registers after it
// came (the grant can be made as soon as the request is queued).
type earlyGrant struct {
	msg string
	at  time.Time
}

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

// subscribe makes this backend listen on its channel, once; it returns
// when Redis has confirmed the subscription, when ctx ends or when the
// backend is closed. The subscription serves every later wait, so it is
// made by a goroutine of its own, bounded by a timeout of its own: neither
// a caller whose ctx ends nor Close waits for a server that does not
// answer.
func (b *Backend) subscribe(ctx context.Context) error {
	if b.wake.subscribed() {
		return nil
	}
	a := b.wake.attempt(b)
	select {
	case <-a.done:
		return a.err
	case <-ctx.Done():
		return wrap("subscribe to wake-ups", "", context.Cause(ctx))
	case <-b.done:
		return fmt.Errorf("redis: subscribe to wake-ups: %w", sema.ErrClosed)
	}
}

// attempt returns the attempt to subscribe in progress, starting one if
// none is.
func (w *wakeups) attempt(b *Backend) *subAttempt {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sub == nil {
		w.sub = &subAttempt{done: make(chan struct{})}
		go b.trySubscribe(w.sub)
	}
	return w.sub
}

// subscribeTimeout bounds one attempt to subscribe.
const subscribeTimeout = 10 * time.Second

// trySubscribe is attempt a: it subscribes, and listens if Redis confirms
// before the backend is closed.
func (b *Backend) trySubscribe(a *subAttempt) {
	defer close(a.done)
	ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
	defer cancel()
	ps := b.rdb.Subscribe(ctx, b.channel, b.forced)
	_, err := ps.Receive(ctx)
	w := &b.wake
	w.mu.Lock()
	w.sub = nil
	if err == nil && b.closed.Load() {
		err = goredis.ErrClosed // Close found no subscription to close: this one
	}
	if err == nil {
		w.ps = ps
		w.ready.Store(true)
	}
	w.mu.Unlock()
	if err != nil {
		_ = ps.Close()
		a.err = wrap("subscribe to wake-ups", "", err)
		return
	}
	go b.listen(ps)
}

// listenIdle is how long the subscription may stay silent before it is
// pinged; three silent periods in a row and the connection is replaced.
const listenIdle = 3 * time.Second

// listen reads the subscription and wakes the waits its messages name
// (and tells of force-releases, see NotifyForced), until the subscription
// is closed. A message names a lease ID: the wait
// gets it, and the grant it carries. go-redis reconnects a broken
// connection and subscribes again; it then reports the subscription, and
// every wait looks again, as messages may have been lost meanwhile. A
// connection that answers nothing, not even two pings, is replaced.
func (b *Backend) listen(ps *goredis.PubSub) {
	w := &b.wake
	ctx := context.Background()
	silent := 0
	for {
		m, err := ps.ReceiveTimeout(ctx, listenIdle)
		switch m := m.(type) {
		case *goredis.Message:
			if m.Channel == b.forced {
				b.notices.Heard(m.Payload)
			} else {
				id, _, _ := strings.Cut(m.Payload, " ")
				w.send(id, m.Payload)
			}
		case *goredis.Subscription:
			w.kick()
		}
		var nerr net.Error
		switch {
		case err == nil:
			silent = 0
		case errors.Is(err, goredis.ErrClosed):
			return
		case errors.As(err, &nerr) && nerr.Timeout():
			if silent++; silent >= 3 {
				b.relisten(ps)
				return
			}
			_ = ps.Ping(ctx)
		default:
			time.Sleep(100 * time.Millisecond) // go-redis reconnects on the next receive
		}
	}
}

// relisten replaces a subscription that stopped answering, retrying until
// it succeeds or the backend is closed, and makes every wait look again.
func (b *Backend) relisten(old *goredis.PubSub) {
	w := &b.wake
	w.mu.Lock()
	if w.ps == old {
		w.ps = nil
		w.ready.Store(false)
	}
	w.mu.Unlock()
	_ = old.Close()
	for !b.closed.Load() {
		if err := b.subscribe(context.Background()); err == nil {
			w.kick()
			return
		}
		select {
		case <-b.done:
		case <-time.After(b.cfg.Recheck):
		}
	}
}

// kick makes every wait look again.
func (w *wakeups) kick() {
	w.mu.Lock()
	for id := range w.ws {
		w.sendLocked(id, "")
	}
	w.mu.Unlock()
}

func (w *wakeups) send(id, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.ws[id]; ok || msg == "" {
		w.sendLocked(id, msg)
		return
	}
	// Kept for a wait about to register; old ones are swept, and a flood
	// (messages for waits that ended) is dropped.
	now := time.Now()
	if len(w.early) >= 64 {
		for k, e := range w.early {
			if now.Sub(e.at) > 10*time.Second || len(w.early) >= 4096 {
				delete(w.early, k)
			}
		}
	}
	w.early[id] = earlyGrant{msg, now}
}

// sendLocked wakes the wait of id without blocking: a pending wake-up
// already makes it look again.
func (w *wakeups) sendLocked(id, msg string) {
	if c, ok := w.ws[id]; ok {
		select {
		case c <- msg:
		default:
		}
	}
}

func (w *wakeups) subscribed() bool { return w.ready.Load() }

// register returns the wake-ups of the wait of id, with a grant message
// that came before.
func (w *wakeups) register(id string) chan string {
	c := make(chan string, 1)
	w.mu.Lock()
	w.ws[id] = c
	if e, ok := w.early[id]; ok {
		c <- e.msg
		delete(w.early, id)
	}
	w.mu.Unlock()
	return c
}

func (w *wakeups) unregister(id string) {
	w.mu.Lock()
	delete(w.ws, id)
	delete(w.early, id)
	w.mu.Unlock()
}

// close closes the subscription. An attempt still in progress closes its
// own when it ends (it sees the backend closed).
func (w *wakeups) close() {
	w.mu.Lock()
	ps := w.ps
	w.ps = nil
	w.ready.Store(false)
	w.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
	}
}

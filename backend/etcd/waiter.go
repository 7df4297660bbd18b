package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sema-dev/sema"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// waiter is one queued request.
type waiter struct {
	b       *Backend
	req     *sema.Request
	ld      string // the limit directory of the name
	key     string // its entry
	val     value  // its entry's value
	rev     int64  // its entry's create revision
	lease   idleLease
	want    int64 // TTL its lease was asked for, s
	owned   bool  // the lease is this backend's alone (it may be reused)
	adopted bool  // the entry was put by an earlier call with the same ID
	start   time.Duration
	life    atomic.Int64  // b.now() of the last confirmed start of the lease's life
	lost    chan struct{} // closed by keepAlive when etcd no longer has the lease
}

// wait waits for the grant, starting from q, the name's entries up to the
// waiter's own as of revision at.
func (w *waiter) wait(ctx context.Context, q queue, at int64) (sema.Grant, error) {
	if ahead, load, ok := w.ahead(&q); ok && load+w.req.Weight <= w.req.Limit {
		return w.granted(ctx, false, ahead) // at once
	}
	kctx, stop := context.WithCancel(context.Background())
	kdone := make(chan struct{})
	go w.keepAlive(kctx, kdone)
	defer func() { stop(); <-kdone }()
	for {
		ahead, load, ok := w.ahead(&q)
		if !ok {
			w.b.gone(w.key, w.rev)
			return sema.Grant{}, errRequeue
		}
		if load+w.req.Weight <= w.req.Limit {
			return w.granted(ctx, true, ahead)
		}
		var model []entry
		var local bool
		var err error
		q, at, model, local, err = w.waitLocal(ctx, ahead, q.older == 0, at)
		if !local {
			q, at, model, err = w.watch(ctx, ahead, load, at)
		}
		switch {
		case err != nil:
			if !errors.Is(err, errRequeue) {
				w.leave()
			} else {
				_, _ = w.b.deleteEntry(w.key, w.rev)
				w.b.gone(w.key, w.rev)
			}
			return sema.Grant{}, err
		case model != nil:
			return w.granted(ctx, true, model)
		}
	}
}

// waitLocal waits in-process for what may grant the waiter, when what it
// must watch is this backend's own entries: every entry ahead, if it knows
// them all (exact), else the entry just ahead. When that one is granted it
// passes on the entries still ahead of it, so the waiter then knows all
// its own; when a lock's holder just ahead leaves, nothing is ahead. It
// returns the entries still ahead (all holding) when the waiter is
// granted; else a fresh read of the queue; local is false if an entry to
// watch is not this backend's (then nothing was waited for).
func (w *waiter) waitLocal(ctx context.Context, ahead []entry, exact bool, at int64) (
	q queue, qat int64, granted []entry, local bool, err error) {
	var model []entry // every entry still ahead, when known
	if exact {
		model = slices.Clone(ahead)
	}
	pred := ahead[len(ahead)-1]
	var subs []entry
	var ch chan localEvent
	unsubscribe := func() {
		for _, e := range subs {
			w.b.local.unsubscribe(e.key, ch)
		}
	}
	defer func() { unsubscribe() }()
	reread := func() (queue, int64, []entry, bool, error) {
		q, at, err := w.read(ctx)
		return q, at, nil, true, err
	}
	recheck := time.NewTimer(w.b.cfg.Recheck)
	defer recheck.Stop()
	for {
		if model != nil && sum(model)+w.req.Weight <= w.req.Limit {
			return q, at, model, true, nil
		}
		// Subscribe to what is to be watched now.
		unsubscribe()
		subs = model
		if model == nil {
			subs = []entry{pred}
		}
		ch = make(chan localEvent, 2*len(subs))
		for i, e := range subs {
			held, pahead, ok := w.b.local.subscribe(e.key, e.rev, ch, e.key == pred.key && e.rev == pred.rev)
			if !ok {
				subs = subs[:i]
				if !local {
					return q, at, nil, false, nil // not this backend's: watch etcd
				}
				return reread()
			}
			if model == nil && held {
				ch <- localEvent{key: e.key, rev: e.rev, held: true, ahead: pahead}
			}
		}
		local = true
	wait:
		for {
			select {
			case ev := <-ch:
				switch {
				case model != nil && ev.gone:
					model = slices.DeleteFunc(model, func(e entry) bool { return e.key == ev.key && e.rev == ev.rev })
					break wait
				case model != nil:
				case ev.held:
					// The entry just ahead holds: every entry ahead of this
					// waiter is known now.
					model = append(slices.Clone(ev.ahead), pred)
					break wait
				case ev.gone && ev.held && w.req.Limit == 1:
					// A lock's holder left: nothing was ahead of it, nothing can
					// come ahead, and nothing is between it and this waiter.
					return q, at, []entry{}, true, nil
				default: // the entry ahead left without holding
					return reread()
				}
			case <-recheck.C:
				return reread()
			case <-w.lost:
				return q, at, nil, true, errRequeue
			case <-ctx.Done():
				return q, at, nil, true, notAcquired(ctx)
			case <-w.b.closed:
				return q, at, nil, true, sema.ErrClosed
			}
		}
	}
}

// ahead returns the entries ahead of the waiter in q and their weight (at
// least, counting one for each entry not read); ok is false if its own
// entry is not there.
func (w *waiter) ahead(q *queue) (ahead []entry, load int64, ok bool) {
	for i := range q.entries {
		if q.entries[i].rev == w.rev {
			return q.entries[:i], sum(q.entries[:i]) + q.older, q.entries[i].id == w.req.ID
		}
	}
	return nil, 0, false
}

func sum(es []entry) int64 {
	var s int64
	for _, e := range es {
		s += e.val.Weight
	}
	return s
}

// read returns the entries of the waiter's limit up to its own, retrying
// transient errors (etcd unreachable or without a leader) until ctx ends.
func (w *waiter) read(ctx context.Context) (queue, int64, error) {
	delay := 50 * time.Millisecond
	for {
		cctx, cancel := w.b.call(ctx)
		resp, err := w.b.cli.Do(cctx, newest(w.ld, w.req.Limit, w.rev))
		cancel()
		if err == nil {
			rr := (*etcdserverpb.RangeResponse)(resp.Get())
			return w.b.queueOfNewest(w.req.Name, rr), rr.Header.Revision, nil
		}
		if errors.Is(classify(err), sema.ErrPermission) {
			return queue{}, 0, w.b.fail(fmt.Sprintf("acquire %q", w.req.Name), err)
		}
		select {
		case <-time.After(delay):
			delay = min(2*delay, time.Second)
		case <-w.lost:
			return queue{}, 0, errRequeue
		case <-ctx.Done():
			return queue{}, 0, notAcquired(ctx)
		case <-w.b.closed:
			return queue{}, 0, sema.ErrClosed
		}
	}
}

// keepAlive keeps the waiter's etcd lease alive until ctx ends, every
// third of its TTL, recording when each confirmed keepalive was sent. It
// closes w.lost if etcd no longer has the lease.
func (w *waiter) keepAlive(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	// A quarter of the TTL: a grant then rarely needs a keepalive of its own.
	t := time.NewTicker(max(min(w.req.TTL, w.b.cfg.WaiterTTL)/4, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sent, _, err := w.b.refresh(ctx, w.lease.id)
		switch {
		case err == nil:
			w.life.Store(int64(sent))
		case errors.Is(err, errLeaseGone):
			close(w.lost)
			return
		}
	}
}

// granted finishes a grant: a request whose TTL is longer than the waiter
// TTL moves its entry to a lease of its own TTL; else a grant after a wait
// marks the entry (see mark): a lock's if it holds a while, a semaphore's
// unless the waiter behind it is of this backend. Then the grant is
// recorded.
func (w *waiter) granted(ctx context.Context, waited bool, ahead []entry) (sema.Grant, error) {
	b, req := w.b, w.req
	val := w.val
	val.Granted = time.Now().UnixNano()
	life := time.Duration(w.life.Load())
	if b.now()-life > req.TTL/4 {
		// The lease's last confirmed keepalive is old: the grant's deadline
		// counts from it, so confirm it again.
		sent, ttl, err := b.refresh(ctx, w.lease.id)
		switch {
		case errors.Is(err, errLeaseGone):
			b.gone(w.key, w.rev)
			return sema.Grant{}, errRequeue
		case err != nil:
			w.leave()
			return sema.Grant{}, b.acquireFail(ctx, fmt.Sprintf("acquire %q", req.Name), err)
		}
		life, w.lease.granted = sent, ttl
		w.life.Store(int64(life))
	}
	l := w.lease
	moved := false
	if hold := ttlSeconds(req.TTL); w.want < hold {
		// Move the entry to a lease of the request's TTL (same key: same
		// place, same token); the waiter lease, keyless now, is reused.
		cmps := []clientv3.Cmp{
			clientv3.Compare(clientv3.CreateRevision(w.key), "=", w.rev),
			clientv3.Compare(clientv3.LeaseValue(w.key), "=", w.lease.id),
		}
		resp, nl, nlife, err := b.putEntry(ctx, idleLease{}, hold, func(lid clientv3.LeaseID) placement {
			then := append([]clientv3.Op{put(w.key, val, lid)}, b.stateOps(req.Limit, w.key, lid)...)
			return placement{key: w.key, cmps: cmps, then: then}
		})
		if err != nil {
			w.leave()
			return sema.Grant{}, b.acquireFail(ctx, fmt.Sprintf("acquire %q", req.Name), err)
		}
		if !resp.Succeeded {
			b.keepIdle(hold, nl)
			b.gone(w.key, w.rev)
			return sema.Grant{}, errRequeue
		}
		if w.owned {
			b.keepIdle(w.want, w.lease) // it has no key now
		}
		l, life = nl, nlife
		w.owned, moved = true, true
	}
	switch next := b.local.hold(w.key, w.rev, ahead); {
	case !waited || moved:
	case req.Limit == 1:
		b.markLater(req.ID, w.key, w.rev, val)
	case !next && req.Weight < req.Limit:
		b.mark(w.key, w.rev, val)
	}
	return b.granted(req, w.key, w.rev, l, w.owned, val, life, life-w.start), nil
}

// markDelay is how long a lock's holder granted after a wait holds before
// its entry is marked.
const markDelay = 100 * time.Millisecond

// mark rewrites a granted entry (same lease, its value's Granted set) in
// the background. The put is the event that tells the waiter just behind
// it, in another process, that the entry holds: behind a semaphore's
// holder that leaves room, that waiter may hold now too. A lock needs no
// mark for its hand-off (its holder's release says that it held, see
// watchLock): a lock's holder is marked by markLater, so that Describe in
// other processes shows when it was granted rather than when it queued,
// which costs a write only to holds that last.
func (b *Backend) mark(key string, rev int64, val value) {
	b.background(func(ctx context.Context) {
		_, _ = b.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, encodeValue(val), clientv3.WithIgnoreLease())).Commit()
	})
}

// markLater marks the entry of lease id (see mark) after markDelay, if it
// still holds.
func (b *Backend) markLater(id, key string, rev int64, val value) {
	time.AfterFunc(markDelay, func() {
		b.mu.Lock()
		r := b.recs[id]
		b.mu.Unlock()
		if r != nil && r.rev == rev {
			b.mark(key, rev, val)
		}
	})
}

// leave deletes the waiter's entry (giving back a grant that raced with
// the cancellation) and keeps its lease for reuse if it is the backend's.
func (w *waiter) leave() {
	deleted, err := w.b.deleteEntry(w.key, w.rev)
	if err == nil {
		w.b.gone(w.key, w.rev)
	}
	if err == nil && deleted && w.owned {
		l := w.lease
		l.expires = time.Duration(w.life.Load()) + time.Duration(l.granted)*time.Second
		w.b.keepIdle(w.want, l)
	}
}

package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sema-dev/sema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// waiter is one queued request.
type waiter struct {
	b     *Backend
	req   *sema.Request
	ld    string // the limit directory of the name
	key   string // its entry
	val   value  // its entry's value
	rev   int64  // its entry's create revision
	lease idleLease
	want  int64 // TTL its lease was asked for, s
	owned bool  // the lease is this backend's (false for an adopted entry)
	start time.Duration
	life  atomic.Int64  // b.now() of the last confirmed start of the lease's life
	lost  chan struct{} // closed by keepAlive when etcd no longer has the lease
}

// wait waits for the grant, starting from q, the name's entries up to the
// waiter's own as of revision at.
func (w *waiter) wait(ctx context.Context, q queue, at int64) (sema.Grant, error) {
	if ahead, ok := w.ahead(&q); ok && sum(ahead)+w.req.Weight <= w.req.Limit {
		return w.granted(ctx) // at once
	}
	kctx, stop := context.WithCancel(context.Background())
	kdone := make(chan struct{})
	go w.keepAlive(kctx, kdone)
	defer func() { stop(); <-kdone }()
	for {
		ahead, ok := w.ahead(&q)
		if !ok {
			return sema.Grant{}, errRequeue
		}
		if sum(ahead)+w.req.Weight <= w.req.Limit {
			return w.granted(ctx)
		}
		var granted bool
		var err error
		q, at, granted, err = w.watch(ctx, ahead, at)
		switch {
		case err != nil:
			if !errors.Is(err, errRequeue) {
				w.leave()
			} else {
				_, _ = w.b.deleteEntry(w.key, w.rev)
			}
			return sema.Grant{}, err
		case granted:
			return w.granted(ctx)
		}
	}
}

// ahead returns the entries ahead of the waiter in q; ok is false if its
// own entry is not there.
func (w *waiter) ahead(q *queue) (ahead []entry, ok bool) {
	for i := range q.entries {
		if q.entries[i].rev == w.rev {
			return q.entries[:i], q.entries[i].id == w.req.ID
		}
	}
	return nil, false
}

func sum(es []entry) int64 {
	var s int64
	for _, e := range es {
		s += e.val.Weight
	}
	return s
}

// watch waits for a change that may grant the waiter. While an entry ahead
// waits too, it watches only the entry just ahead (its deletion, or a put:
// a grant mark or a move to a longer lease) and then re-reads. Once every
// entry ahead holds, it watches the deletions of the queue and counts them
// against the entries ahead: the grant needs no read. A watch starts at the
// current revision, so etcd treats it as synced at once; if the queue may
// have changed since it was read, one read after the watch exists closes
// the gap.
func (w *waiter) watch(ctx context.Context, ahead []entry, at int64) (q queue, qat int64, granted bool, err error) {
	head := sum(ahead) <= w.req.Limit
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	var wch clientv3.WatchChan
	if head {
		wch = w.b.cli.Watch(wctx, w.ld, clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
	} else {
		wch = w.b.cli.Watch(wctx, ahead[len(ahead)-1].key, clientv3.WithCreatedNotify())
	}
	recheck := time.NewTimer(w.b.cfg.Recheck)
	defer recheck.Stop()
	model := make(map[string]int64, len(ahead))
	for _, e := range ahead {
		model[e.key] = e.val.Weight
	}
	left := sum(ahead)
	created := false
	for {
		select {
		case resp, ok := <-wch:
			if !ok || resp.Err() != nil || resp.Canceled {
				// Cancelled by etcd (leader lost, compacted, …): read again.
				return w.reread(ctx)
			}
			if resp.Created {
				created = true
				if resp.Header.Revision <= at {
					continue
				}
				// The queue may have changed between the read and the watch.
				if q, at, err = w.read(ctx); err != nil {
					return q, at, false, err
				}
				fresh, ok := w.ahead(&q)
				if !ok {
					return q, at, false, nil
				}
				if head {
					clear(model)
					for _, e := range fresh {
						model[e.key] = e.val.Weight
					}
					if left = sum(fresh); left+w.req.Weight <= w.req.Limit {
						return q, at, true, nil
					}
					continue
				}
				pred := ahead[len(ahead)-1]
				if len(fresh) == 0 || fresh[len(fresh)-1].key != pred.key || fresh[len(fresh)-1].mod != pred.mod {
					return q, at, false, nil // it changed: evaluate again
				}
				continue
			}
			if !created {
				continue
			}
			for _, ev := range resp.Events {
				if ev.Kv.ModRevision <= at {
					continue // already in the state read
				}
				if !head {
					return w.reread(ctx)
				}
				k := string(ev.Kv.Key)
				if k == w.key {
					return q, at, false, errRequeue
				}
				if wt, ok := model[k]; ok {
					delete(model, k)
					left -= wt
				}
			}
			if head && left+w.req.Weight <= w.req.Limit {
				return q, at, true, nil
			}
		case <-recheck.C:
			return w.reread(ctx)
		case <-w.lost:
			return q, at, false, errRequeue
		case <-ctx.Done():
			return q, at, false, notAcquired(ctx)
		case <-w.b.closed:
			return q, at, false, sema.ErrClosed
		}
	}
}

// reread reads the queue again, retrying transient errors with a backoff
// until ctx ends.
func (w *waiter) reread(ctx context.Context) (queue, int64, bool, error) {
	q, at, err := w.read(ctx)
	return q, at, false, err
}

// read returns the entries of the waiter's limit up to its own, retrying
// transient errors (etcd unreachable or without a leader) until ctx ends.
func (w *waiter) read(ctx context.Context) (queue, int64, error) {
	delay := 50 * time.Millisecond
	for {
		cctx, cancel := w.b.call(ctx)
		resp, err := w.b.cli.Get(cctx, w.ld, clientv3.WithPrefix(), clientv3.WithMaxCreateRev(w.rev))
		cancel()
		if err == nil {
			return w.b.queueOf(w.req.Name, resp.Kvs), resp.Header.Revision, nil
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
// TTL moves its entry to a lease of its own TTL; a grant that leaves room
// for the next waiter marks the entry, which wakes that waiter (it watches
// this entry); then the grant is recorded.
func (w *waiter) granted(ctx context.Context) (sema.Grant, error) {
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
			return sema.Grant{}, errRequeue
		case err != nil:
			w.leave()
			return sema.Grant{}, b.acquireFail(ctx, fmt.Sprintf("acquire %q", req.Name), err)
		}
		life, w.lease.granted = sent, ttl
		w.life.Store(int64(life))
	}
	l := w.lease
	if hold := ttlSeconds(req.TTL); w.want < hold {
		cmps := []clientv3.Cmp{
			clientv3.Compare(clientv3.CreateRevision(w.key), "=", w.rev),
			clientv3.Compare(clientv3.LeaseValue(w.key), "=", w.lease.id),
		}
		resp, nl, nlife, err := b.putEntry(ctx, idleLease{}, hold, cmps, w.key, val, nil, clientv3.OpGet(w.key))
		if err != nil {
			w.leave()
			return sema.Grant{}, b.acquireFail(ctx, fmt.Sprintf("acquire %q", req.Name), err)
		}
		if !resp.Succeeded {
			b.keepIdle(hold, nl)
			return sema.Grant{}, errRequeue
		}
		if w.owned {
			b.keepIdle(w.want, w.lease)
		}
		l, life = nl, nlife
		w.owned = true
	} else if req.Limit > 1 && req.Weight < req.Limit {
		b.mark(w.key, w.rev, val)
	}
	return b.granted(req, w.key, w.rev, l, w.owned, val, life, life-w.start), nil
}

// mark rewrites a granted entry (same lease) in the background: the put is
// the event that wakes the waiter behind it.
func (b *Backend) mark(key string, rev int64, val value) {
	if !b.enter() {
		return
	}
	go func() {
		defer b.bg.Done()
		ctx, cancel := b.call(context.Background())
		defer cancel()
		_, _ = b.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, encodeValue(val), clientv3.WithIgnoreLease())).Commit()
	}()
}

// leave deletes the waiter's entry (giving back a grant that raced with
// the cancellation) and keeps its lease for reuse if it is the backend's.
func (w *waiter) leave() {
	deleted, err := w.b.deleteEntry(w.key, w.rev)
	if err == nil && deleted && w.owned {
		l := w.lease
		l.expires = time.Duration(w.life.Load()) + time.Duration(l.granted)*time.Second
		w.b.keepIdle(w.want, l)
	}
}

package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sema-dev/sema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// errRequeue: the waiter's entry vanished (its etcd lease expired while
// etcd or this process stalled): it must queue again.
var errRequeue = errors.New("etcd: the waiting entry's lease was lost")

// Acquire queues the request and waits until it is granted or ctx is
// done. The entry goes in with one Txn (granted at once if the permits
// are free and nobody waits); a waiter then watches only what is ahead of
// it: the entry just before it while that one waits too, or, once every
// entry ahead holds, the deletions of the name's entries — so a release
// wakes the one waiter it can serve, no herd. Waiters are served in the
// order of their entries' create revisions, and a later, smaller request
// never overtakes an earlier one. A cancelled or closed wait deletes its
// entry, which gives back a grant that raced with it.
func (b *Backend) Acquire(ctx context.Context, req sema.Request) (sema.Grant, error) {
	if err := req.Validate(); err != nil {
		return sema.Grant{}, err
	}
	if ctx.Err() != nil {
		return sema.Grant{}, notAcquired(ctx)
	}
	if !b.enter() {
		return sema.Grant{}, sema.ErrClosed
	}
	defer b.bg.Done()
	if !b.startWait(&req) {
		return sema.Grant{}, fmt.Errorf("etcd: acquire %q: %w: an acquire with lease ID %q is already waiting",
			req.Name, sema.ErrInvalidArgument, req.ID)
	}
	defer b.endWait(&req)
	start := b.now()
	for {
		g, err := b.enqueue(ctx, &req, start)
		if !errors.Is(err, errRequeue) {
			return g, err
		}
		// Its entry may have ended by a force-release, as it was granted:
		// the lease ID stays force-released, never granted a second time.
		if errors.Is(b.lossReason(ctx, req.ID), sema.ErrForceReleased) {
			return sema.Grant{}, forcedRetry(req.Name, req.ID)
		}
		b.log.Warn("etcd: a waiter lost its place (its etcd lease ended) and queues again", "name", req.Name)
	}
}

// waitKey names an Acquire in flight.
type waitKey struct{ name, id string }

// startWait records an Acquire of req in flight, unless one with its name
// and ID is: a retry of a queued request must not queue a second time.
// (Another client repeating the ID of a queued request is not detected: it
// queues an entry of its own.)
func (b *Backend) startWait(req *sema.Request) bool {
	k := waitKey{req.Name, req.ID}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waits[k] {
		return false
	}
	b.waits[k] = true
	return true
}

func (b *Backend) endWait(req *sema.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.waits, waitKey{req.Name, req.ID})
}

// notAcquired is the error of an acquire whose context ended.
func notAcquired(ctx context.Context) error {
	cause := context.Cause(ctx)
	if cause == nil {
		cause = context.DeadlineExceeded // past the deadline, before its timer fired
	}
	return fmt.Errorf("%w: %w", sema.ErrNotAcquired, cause)
}

// acquireFail is the error of an acquire that failed on err: ErrNotAcquired
// if its context ended, else err as fail wraps it.
func (b *Backend) acquireFail(ctx context.Context, op string, err error) error {
	if ended(ctx) {
		return notAcquired(ctx)
	}
	return b.fail(op, err)
}

// ended reports whether ctx is done or past its deadline (an etcd call can
// fail on the deadline before the context's own timer fires).
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// enqueue puts the request's entry at the end of the name's queue (on an
// etcd lease of the waiter TTL) and waits for its grant.
func (b *Backend) enqueue(ctx context.Context, req *sema.Request, start time.Duration) (sema.Grant, error) {
	op := fmt.Sprintf("acquire %q", req.Name)
	nd := b.k.nameDir(req.Name)
	ld := limitDir(nd, req.Limit)
	want := min(ttlSeconds(req.TTL), ttlSeconds(b.cfg.WaiterTTL))
	val := b.valueOf(req)
	// No entry of another limit: below or above this limit's range.
	below := clientv3.Compare(clientv3.CreateRevision(nd).WithRange(ld), "=", 0)
	above := clientv3.Compare(clientv3.CreateRevision(prefixEnd(ld)).WithRange(prefixEnd(nd)), "=", 0)
	slot := b.slots.take()
	key := b.slots.key(ld, slot)
	tail := b.k.tailKey(req.Name, req.Limit)
	forced := b.k.forcedKey(req.ID)
	for {
		b.local.pend(key, req.Weight)
		resp, l, life, err := b.putEntry(ctx, idleLease{}, want, func(lid clientv3.LeaseID) placement {
			then := []clientv3.Op{put(key, val, lid)}
			// The tail says which entry is just ahead.
			then = append(then, clientv3.OpGet(tail), clientv3.OpPut(tail, key, clientv3.WithLease(lid)))
			then = append(then, b.stateOps(req.Limit, key, lid)...)
			return placement{key: key, cmps: []clientv3.Cmp{absent(key), below, above, absent(forced)},
				then:   append(then, clientv3.OpGet(ld, clientv3.WithPrefix(), clientv3.WithCountOnly())),
				orElse: []clientv3.Op{isForced(forced), clientv3.OpGet(nd, clientv3.WithPrefix())}}
		})
		if err != nil {
			// The Txn may have been applied, or be applied yet: take the
			// entry back with this call's lease.
			b.dropLease(l.id)
			b.local.unpend(key)
			return sema.Grant{}, b.acquireFail(ctx, op, err)
		}
		rr := resp.Responses[len(resp.Responses)-1].GetResponseRange() // after the put, if any
		w := &waiter{b: b, req: req, ld: ld, key: key, val: val, lease: l, want: want, owned: true,
			start: start, lost: make(chan struct{})}
		var q queue
		at := resp.Header.Revision
		if resp.Succeeded {
			w.rev = resp.Header.Revision
			b.local.add(key, w.rev, req.Weight, nil)
			me := entry{key: key, id: req.ID, limit: req.Limit, rev: w.rev, lease: l.id, val: val}
			if tr := resp.Responses[1].GetResponseRange(); rr.Count > 1 && len(tr.Kvs) == 1 {
				// The entry last queued before this one (it may have left
				// since: the first look at it finds so, as at < its rev).
				// A lock needs no more; a semaphore needs the weights ahead,
				// which an entry of this backend's hands on when it is
				// granted, else a read.
				t := tr.Kvs[0]
				pred := entry{key: string(t.Value), limit: req.Limit, rev: t.ModRevision, mod: t.ModRevision, val: value{Weight: 1}}
				weight, local := b.local.weight(pred.key, pred.rev)
				if local {
					pred.val.Weight = weight
				}
				if req.Limit == 1 || local {
					q = queue{name: req.Name, entries: []entry{pred, me}}
					if req.Limit > 1 {
						q.older = req.Limit // unknown: at least enough not to fit
					} else {
						q.older = rr.Count - 2 // a lock's entries ahead of pred, as counted
					}
					at = t.ModRevision
				}
			}
			switch {
			case q.entries != nil:
			case rr.Count <= 1:
				// Alone: granted. (A Txn that writes runs in etcd's apply
				// loop, one at a time: it only counts; reading what is ahead
				// is a read of its own, served beside the writes.)
				q = queue{name: req.Name, entries: []entry{me}}
			default:
				if q, at, err = w.read(ctx); err != nil {
					w.life.Store(int64(life))
					w.leave()
					return sema.Grant{}, err
				}
			}
		} else {
			b.local.unpend(key)
			b.slots.put(slot)
			if wasForced(resp, 0) {
				b.keepIdle(want, l)
				return sema.Grant{}, forcedRetry(req.Name, req.ID)
			}
			q = b.queueOf(req.Name, rr.Kvs)
			g, own, done, err := b.settle(ctx, req, &q, l)
			if done {
				return g, err
			}
			b.keepIdle(want, l)
			if own < 0 {
				slot = b.slots.take()
				key = b.slots.key(ld, slot)
				continue // another limit's entries left between the compare and the read
			}
			// Queued already by an earlier call with this ID: wait on that
			// entry, once its lease is confirmed alive.
			e := &q.entries[own]
			sent, ttl, err := b.refresh(ctx, e.lease)
			if errors.Is(err, errLeaseGone) {
				continue
			} else if err != nil {
				return sema.Grant{}, b.acquireFail(ctx, op, err)
			}
			w.key, w.lease, w.owned, w.adopted, w.rev, w.val, life = e.key, idleLease{id: e.lease, granted: ttl}, false, true, e.rev, e.val, sent
			q.entries = q.entries[:own+1]
		}
		w.life.Store(int64(life))
		return w.wait(ctx, q, at)
	}
}

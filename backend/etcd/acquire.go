package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sema-dev/sema"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxTries bounds the optimistic retries of TryAcquire when the name
// changes under it.
const maxTries = 8

// TryAcquire grants the request if its permits are free and nobody waits,
// in one Txn that puts the lease's entry only if no entry exists for the
// name (the common case), or else only if no entry was added or changed
// since the name was read and the request fits. It never queues. (The name
// is read by a read of its own: a Txn that writes runs in etcd's apply
// loop, one at a time, and should not read a whole queue there.)
func (b *Backend) TryAcquire(ctx context.Context, req sema.Request) (sema.Grant, error) {
	if err := req.Validate(); err != nil {
		return sema.Grant{}, err
	}
	if b.isClosed() {
		return sema.Grant{}, sema.ErrClosed
	}
	op := fmt.Sprintf("acquire %q", req.Name)
	nd := b.k.nameDir(req.Name)
	ld := limitDir(nd, req.Limit)
	want := ttlSeconds(req.TTL)
	val := b.valueOf(&req)
	guard := clientv3.Compare(clientv3.CreateRevision(nd).WithPrefix(), "=", 0) // no entry at all
	forced := b.k.forcedKey(req.ID)
	slot := b.slots.take()
	key := b.slots.key(ld, slot)
	tail := b.k.tailKey(req.Name, req.Limit)
	b.local.pend(key, req.Weight)
	placed := false
	defer func() {
		if !placed {
			b.local.unpend(key)
		}
	}()
	var l idleLease
	var q queue // the name as last read
	for try := 0; ; try++ {
		resp, lease, life, err := b.putEntry(ctx, l, want, func(lid clientv3.LeaseID) placement {
			// The entry is the newest of its queue: the tail names it.
			return placement{key: key, cmps: []clientv3.Cmp{absent(key), guard, absent(forced)},
				then: append([]clientv3.Op{put(key, val, lid), clientv3.OpPut(tail, key, clientv3.WithLease(lid))},
					b.stateOps(req.Limit, key, lid)...),
				orElse: []clientv3.Op{isForced(forced)}}
		})
		if err != nil {
			b.dropLease(lease.id) // in case the Txn was applied all the same
			return sema.Grant{}, b.acquireFail(ctx, op, err)
		}
		l = lease
		if !resp.Succeeded && wasForced(resp, 0) {
			b.keepIdle(want, l)
			b.slots.put(slot)
			return sema.Grant{}, forcedRetry(req.Name, req.ID)
		}
		if resp.Succeeded {
			ahead := known(q.entries) // all holding as read (some may have left since); none at the first try
			b.local.add(key, resp.Header.Revision, req.Weight, ahead)
			placed = true
			return b.granted(&req, key, resp.Header.Revision, l, true, val, life, 0), nil
		}
		cctx, cancel := b.call(ctx)
		rresp, err := b.cli.Get(cctx, nd, clientv3.WithPrefix())
		cancel()
		if err != nil {
			b.keepIdle(want, l)
			b.slots.put(slot)
			return sema.Grant{}, b.acquireFail(ctx, op, err)
		}
		q = b.queueOf(req.Name, rresp.Kvs)
		g, own, done, err := b.settle(ctx, &req, &q, l)
		if done || own >= 0 {
			b.slots.put(slot)
		}
		if done {
			return g, err
		}
		if own >= 0 {
			b.keepIdle(want, l)
			return sema.Grant{}, q.heldError() // queued by a waiting Acquire
		}
		if q.fits(req.Limit, req.Weight) && try < maxTries {
			// Free permits and nobody waits: put the entry unless the name
			// changed since this read (a deletion can only free more).
			guard = clientv3.Compare(clientv3.ModRevision(nd).WithPrefix(), "<", rresp.Header.Revision+1)
			continue
		}
		b.keepIdle(want, l)
		b.slots.put(slot)
		return sema.Grant{}, q.heldError()
	}
}

// isForced is the read of a Txn's else branch that tells whether the
// request's lease ID was force-released (its mark, the key forced, exists).
func isForced(forced string) clientv3.Op { return clientv3.OpGet(forced, clientv3.WithCountOnly()) }

// wasForced reports whether response i of a failed Txn, an isForced read,
// found the mark.
func wasForced(resp *clientv3.TxnResponse, i int) bool {
	return i < len(resp.Responses) && resp.Responses[i].GetResponseRange().GetCount() > 0
}

// forcedRetry is the answer to an acquire repeating the ID of a lease an
// admin force-released: never that lease again, nor a new one under its
// ID while the mark lasts.
func forcedRetry(name, id string) error {
	return fmt.Errorf("etcd: acquire %q: lease %s: %w", name, id, sema.ErrForceReleased)
}

// absent compares that key does not exist.
func absent(key string) clientv3.Cmp { return clientv3.Compare(clientv3.CreateRevision(key), "=", 0) }

// put writes an entry on etcd lease lid.
func put(key string, val value, lid clientv3.LeaseID) clientv3.Op {
	return clientv3.OpPut(key, encodeValue(val), clientv3.WithLease(lid))
}

// mismatch returns an error wrapping sema.ErrLimitMismatch if the name's
// entries use another limit than req.
func mismatch(req *sema.Request, q *queue) error {
	if lim := q.limit(); lim != 0 && lim != req.Limit {
		return fmt.Errorf("etcd: acquire %q with limit %d: %w: holders or waiters use limit %d",
			req.Name, req.Limit, sema.ErrLimitMismatch, lim)
	}
	return nil
}

// settle handles what a read of the name says before a grant: a limit
// mismatch, or the request's own entry holding (a repeated acquire by a
// live ID) or queued (own >= 0 then). done reports that the acquire ends
// with (g, err); the unused lease l is kept for reuse then.
func (b *Backend) settle(ctx context.Context, req *sema.Request, q *queue, l idleLease) (g sema.Grant, own int, done bool, err error) {
	own = q.index(req.ID)
	err = mismatch(req, q)
	switch {
	case err == nil && own < 0:
		return sema.Grant{}, own, false, nil
	case err == nil && own >= q.holders():
		return sema.Grant{}, own, false, nil
	case err == nil:
		g, err = b.regrant(ctx, req, &q.entries[own])
	}
	b.keepIdle(ttlSeconds(req.TTL), l)
	return g, own, true, err
}

// regrant answers a repeated acquire of a lease that holds: the same
// grant, its etcd lease refreshed first (its life must cover the TTL from
// now on).
func (b *Backend) regrant(ctx context.Context, req *sema.Request, e *entry) (sema.Grant, error) {
	sent, ttl, err := b.refresh(ctx, e.lease)
	if err != nil {
		return sema.Grant{}, b.acquireFail(ctx, fmt.Sprintf("acquire %q again", req.Name), err)
	}
	b.mu.Lock()
	r := b.recs[req.ID]
	b.mu.Unlock()
	if r == nil || r.rev != e.rev {
		// Granted through another backend: renewals go through etcd.
		r = &rec{name: req.Name, key: e.key, rev: e.rev, lease: e.lease, limit: e.limit, val: e.val,
			ttl: ttl, want: ttlSeconds(req.TTL)}
		b.remember(req.ID, r)
	}
	expires := sent + time.Duration(ttl)*time.Second
	b.mu.Lock()
	r.expires = max(r.expires, expires)
	b.mu.Unlock()
	now := time.Now()
	return sema.Grant{Name: req.Name, ID: req.ID, Token: uint64(r.rev), Owner: r.val.Owner, Weight: r.val.Weight,
		Limit: r.limit, AcquiredAt: now, ExpiresAt: now.Add(expires - b.now())}, nil
}

// placement is the Txn that places an entry on an etcd lease: if cmps
// hold, then (which puts the entry key), else orElse.
type placement struct {
	key    string // the entry
	cmps   []clientv3.Cmp
	then   []clientv3.Op
	orElse []clientv3.Op
}

// putEntry runs the Txn that place builds for an etcd lease: l if it is
// set, else an idle or a new one. An idle one that could expire before
// the entry's TTL is refreshed by a keepalive sent beside the Txn. It
// returns the lease used and when its life was last confirmed to start
// (by b.now()).
func (b *Backend) putEntry(ctx context.Context, l idleLease, want int64, place func(clientv3.LeaseID) placement) (
	resp *clientv3.TxnResponse, _ idleLease, life time.Duration, err error) {
	for attempt := 0; ; attempt++ {
		stale := false
		if l.id == 0 {
			if l, stale, err = b.newLease(ctx, want); err != nil {
				return nil, l, 0, err
			}
		}
		life = l.expires - time.Duration(l.granted)*time.Second
		var ka keeping
		var kaSent time.Duration
		if stale {
			kaSent, ka = b.now(), b.keep.send(l.id)
		}
		p := place(l.id)
		cctx, cancel := b.call(ctx)
		resp, err = b.cli.Txn(cctx).If(p.cmps...).Then(p.then...).Else(p.orElse...).Commit()
		cancel()
		gone := errors.Is(err, rpctypes.ErrLeaseNotFound)
		if err != nil && !gone {
			return nil, l, 0, err // outcome unknown: the caller drops the entry by its lease
		}
		if ka != nil {
			kctx, cancel := b.call(ctx)
			ttl, kerr := ka.wait(kctx)
			cancel()
			switch {
			case kerr == nil && ttl > 0:
				l.granted, l.expires, life = ttl, kaSent+time.Duration(ttl)*time.Second, kaSent
			case kerr != nil && !resp.Succeeded:
				// Nothing was put: the lease may still be fine.
			default:
				// Gone, or its life since this call began is unconfirmed: an
				// entry on it would not be safe to grant.
				gone = true
			}
		}
		if !gone {
			return resp, l, life, nil
		}
		if err == nil && resp.Succeeded {
			b.dropEntry(p.key, l.id)
		}
		l = idleLease{}
		if attempt == 2 || ctx.Err() != nil {
			return nil, l, 0, errors.New("no etcd lease could be confirmed for the entry")
		}
	}
}

// refreshed is the outcome of a keepalive.
type refreshed struct {
	sent time.Duration
	ttl  int64
	err  error
}

// deleteEntry deletes the entry key created at rev, if it is still that
// one, on a context of its own.
func (b *Backend) deleteEntry(key string, rev int64) (bool, error) {
	ctx, cancel := b.call(context.Background())
	defer cancel()
	resp, err := b.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
		Then(clientv3.OpDelete(key), clientv3.OpDelete(b.k.stateKey(key))).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// dropLease revokes etcd lease id, which a call whose outcome is unknown
// put its entry on: the entry goes with the lease if etcd applied the
// call, and cannot be put if etcd applies the call later (a put on a
// revoked lease fails). A delete of the entry by its key would miss a call
// that etcd applies after the delete, and leak its permits until the lease
// expired. Best effort, on a context of its own.
func (b *Backend) dropLease(id clientv3.LeaseID) {
	if id == 0 {
		return
	}
	ctx, cancel := b.call(context.Background())
	defer cancel()
	_, _ = b.cli.Revoke(ctx, id)
}

// dropEntry deletes the entry key if it is on etcd lease id: an entry put,
// on a lease that cannot be confirmed. Best effort, on a context of its
// own.
func (b *Backend) dropEntry(key string, id clientv3.LeaseID) {
	if id == 0 || key == "" {
		return
	}
	ctx, cancel := b.call(context.Background())
	defer cancel()
	_, _ = b.cli.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(key), "=", id)).Then(clientv3.OpDelete(key), clientv3.OpDelete(b.k.stateKey(key))).Commit()
}

// keepIdle returns an unused lease of the caller's to the pool.
func (b *Backend) keepIdle(want int64, l idleLease) {
	if l.id != 0 && !b.pool.put(want, l) {
		b.revokeLater(l.id)
	}
}

// granted records a new grant and returns it.
func (b *Backend) granted(req *sema.Request, key string, rev int64, l idleLease, owned bool, val value,
	life, waited time.Duration) sema.Grant {
	r := &rec{name: req.Name, key: key, rev: rev, lease: l.id, ttl: l.granted, want: ttlSeconds(req.TTL),
		limit: req.Limit, val: val, owned: owned, expires: life + time.Duration(l.granted)*time.Second}
	b.remember(req.ID, r)
	now := time.Now()
	return sema.Grant{Name: req.Name, ID: req.ID, Token: uint64(rev), Owner: req.Owner, Weight: req.Weight,
		Limit: req.Limit, AcquiredAt: now, ExpiresAt: now.Add(r.expires - b.now()), Waited: waited}
}

// remember keeps r under id, and forgets leases long expired that were
// never released (no keepalive, no Release).
func (b *Backend) remember(id string, r *rec) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.recs[id] = r
	if len(b.recs) >= 1024 && len(b.recs)&1023 == 0 {
		now := b.now()
		for id, r := range b.recs {
			if r.expires < now-time.Minute {
				delete(b.recs, id)
			}
		}
	}
}

// forget drops the record of lease id and returns it (nil if none).
func (b *Backend) forget(id string) *rec {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.recs[id]
	delete(b.recs, id)
	return r
}

// valueOf is the entry value of a request.
func (b *Backend) valueOf(req *sema.Request) value {
	return value{ID: req.ID, Owner: req.Owner, Weight: req.Weight, Host: req.Host, PID: req.PID,
		TTL: req.TTL.Milliseconds(), Since: time.Now().UnixNano()}
}

// queueOf reads the entries of name from a range, in queue order. Keys
// that are not entries are skipped.
func (b *Backend) queueOf(name string, kvs []*mvccpb.KeyValue) queue {
	q := queue{name: name, entries: make([]entry, 0, len(kvs))}
	for _, kv := range kvs {
		if _, e, ok := b.k.decodeEntry(kv); ok {
			q.entries = append(q.entries, e)
		}
	}
	sortQueue(q.entries)
	return q
}

// newest reads at most limit+1 entries of a limit directory, the newest
// first, up to create revision maxRev (0: all). That is all a request of
// that limit needs to decide: an entry with more than limit entries ahead
// cannot hold, nor can all of those entries hold.
func newest(ld string, limit, maxRev int64) clientv3.Op {
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend),
		clientv3.WithLimit(limit + 1)}
	if maxRev > 0 {
		opts = append(opts, clientv3.WithMaxCreateRev(maxRev))
	}
	return clientv3.OpGet(ld, opts...)
}

// queueOfNewest reads the answer of newest. Its Count may include entries
// newer than maxRev; More says whether older entries were left out.
func (b *Backend) queueOfNewest(name string, rr *etcdserverpb.RangeResponse) queue {
	q := b.queueOf(name, rr.Kvs)
	if rr.More {
		q.older = 1 // at least
	}
	return q
}

package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sema-dev/sema"
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
// since the name was read and the request fits. It never queues.
func (b *Backend) TryAcquire(ctx context.Context, req sema.Request) (sema.Grant, error) {
	if err := req.Validate(); err != nil {
		return sema.Grant{}, err
	}
	if b.isClosed() {
		return sema.Grant{}, sema.ErrClosed
	}
	op := fmt.Sprintf("acquire %q", req.Name)
	nd := b.k.nameDir(req.Name)
	key := entryKey(limitDir(nd, req.Limit), req.ID)
	want := ttlSeconds(req.TTL)
	val := b.valueOf(&req)
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(nd).WithPrefix(), "=", 0), // no entry at all
	}
	var l idleLease
	for try := 0; ; try++ {
		resp, lease, life, err := b.putEntry(ctx, l, want, cmps, key, val, nil, clientv3.OpGet(nd, clientv3.WithPrefix()))
		if err != nil {
			b.dropEntry(key, lease.id) // in case the Txn was applied all the same
			return sema.Grant{}, b.acquireFail(ctx, op, err)
		}
		l = lease
		if resp.Succeeded {
			return b.granted(&req, key, resp.Header.Revision, l, true, val, life, 0), nil
		}
		q := b.queueOf(req.Name, resp.Responses[0].GetResponseRange().Kvs)
		g, own, done, err := b.settle(ctx, &req, &q, l)
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
			cmps[1] = clientv3.Compare(clientv3.ModRevision(nd).WithPrefix(), "<", resp.Header.Revision+1)
			continue
		}
		b.keepIdle(want, l)
		return sema.Grant{}, q.heldError()
	}
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

// putEntry runs a Txn that, if cmps hold, puts the entry key (attached to
// an etcd lease) and runs then, else runs orElse. The lease is l if it is
// set, else an idle or a new one; an idle one is refreshed by a keepalive
// sent beside the Txn. It returns the lease used and when its life was
// last confirmed to start (by b.now()).
func (b *Backend) putEntry(ctx context.Context, l idleLease, want int64, cmps []clientv3.Cmp, key string, val value,
	then []clientv3.Op, orElse clientv3.Op) (*clientv3.TxnResponse, idleLease, time.Duration, error) {
	ops := append([]clientv3.Op{{}}, then...)
	for attempt := 0; ; attempt++ {
		reused := false
		if l.id == 0 {
			var err error
			if l, reused, err = b.newLease(ctx, want); err != nil {
				return nil, l, 0, err
			}
		}
		life := l.expires - time.Duration(l.granted)*time.Second
		var kac chan refreshed
		if reused {
			kac = make(chan refreshed, 1)
			go func() {
				sent, ttl, err := b.refresh(ctx, l.id)
				kac <- refreshed{sent, ttl, err}
			}()
		}
		ops[0] = clientv3.OpPut(key, encodeValue(val), clientv3.WithLease(l.id))
		cctx, cancel := b.call(ctx)
		resp, err := b.cli.Txn(cctx).If(cmps...).Then(ops...).Else(orElse).Commit()
		cancel()
		gone := errors.Is(err, rpctypes.ErrLeaseNotFound)
		if kac != nil {
			if r := <-kac; r.err == nil {
				l.granted, l.expires, life = r.ttl, r.sent+time.Duration(r.ttl)*time.Second, r.sent
			} else if errors.Is(r.err, errLeaseGone) || err == nil && resp.Succeeded {
				// Gone, or its life since this call began is unconfirmed:
				// an entry on it would not be safe to grant.
				gone = true
			}
		}
		if !gone {
			return resp, l, life, err
		}
		if err == nil && resp.Succeeded {
			_, _ = b.deleteEntry(key, resp.Header.Revision)
		}
		l = idleLease{}
		if attempt == 2 {
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
		Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// dropEntry deletes the entry key if it is on etcd lease id (the entry of
// a call whose outcome is unknown), on a context of its own, best effort.
func (b *Backend) dropEntry(key string, id clientv3.LeaseID) {
	if id == 0 {
		return
	}
	ctx, cancel := b.call(context.Background())
	defer cancel()
	_, _ = b.cli.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(key), "=", id)).Then(clientv3.OpDelete(key)).Commit()
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
	return value{Owner: req.Owner, Weight: req.Weight, Host: req.Host, PID: req.PID,
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

package etcd

import (
	"context"
	"errors"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Every sema lease has an etcd lease of its own: its TTL, its expiry on
// etcd's clock and its keepalive belong to it alone, so leases of one
// process with different TTLs, MaxHold or no keepalive expire each on its
// own. An etcd lease carries one entry key at a time. After a release this
// backend confirmed (its Txn deleted the key), the etcd lease has no key
// and stays alive for the rest of its TTL: the backend keeps it in a pool
// and puts the next entry on it, refreshing it with a keepalive sent beside
// that entry's Txn, instead of granting a new lease (a raft write) first.
// Leases are never reused by anyone else: a key deleted by someone else
// (a force-release, another process's release) leaves its lease to die.
//
// An etcd lease is granted for the sema TTL rounded up to whole seconds,
// plus leaseHeadroom: a lease released and taken again within that second
// still outlives the new holder's whole TTL, and needs no keepalive at
// all. A lock taken and released in a loop costs two Txns a turn, and a
// keepalive only about once a second.

// ttlSeconds is the etcd lease TTL for a sema TTL: whole seconds, rounded
// up, so that etcd never expires a lease before the core's deadline.
func ttlSeconds(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }

// reuseMargin is how much life a pooled lease must have left to be reused:
// its keepalive must reach etcd before it expires.
const reuseMargin = 500 * time.Millisecond

// leaseHeadroom is added to every etcd lease's TTL, s (see above). A
// holder that dies leaves its permits taken up to that much longer than
// its TTL.
const leaseHeadroom = 1

// poolMax bounds the idle leases kept per TTL.
const poolMax = 16

// leasePool holds idle etcd leases of this backend, by requested TTL.
type leasePool struct {
	mu   sync.Mutex
	free map[int64][]idleLease
}

type idleLease struct {
	id      clientv3.LeaseID
	granted int64         // TTL etcd granted, s (at least the requested one)
	expires time.Duration // b.now() before which etcd cannot expire it
}

func newLeasePool() leasePool { return leasePool{free: make(map[int64][]idleLease)} }

// take returns an idle lease of ttl with enough life left, dropping the
// stale ones.
func (p *leasePool) take(ttl int64, now time.Duration) (idleLease, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls := p.free[ttl]
	for len(ls) > 0 {
		l := ls[len(ls)-1]
		ls = ls[:len(ls)-1]
		if l.expires-now >= reuseMargin {
			p.free[ttl] = ls
			return l, true
		}
	}
	delete(p.free, ttl)
	return idleLease{}, false
}

// put keeps an idle lease; false if the pool for its TTL is full.
func (p *leasePool) put(ttl int64, l idleLease) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free[ttl]) >= poolMax {
		return false
	}
	p.free[ttl] = append(p.free[ttl], l)
	return true
}

// drain empties the pool and returns its leases.
func (p *leasePool) drain() []clientv3.LeaseID {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []clientv3.LeaseID
	for _, ls := range p.free {
		for _, l := range ls {
			ids = append(ids, l.id)
		}
	}
	clear(p.free)
	return ids
}

// newLease returns an etcd lease for a new entry of ttl seconds: an idle
// one or a fresh one. stale says that the idle one may expire before the
// entry's TTL: the caller must keep it alive beside its Txn.
func (b *Backend) newLease(ctx context.Context, ttl int64) (l idleLease, stale bool, err error) {
	now := b.now()
	if l, ok := b.pool.take(ttl, now); ok {
		return l, l.expires-now < time.Duration(ttl)*time.Second, nil
	}
	cctx, cancel := b.call(ctx)
	defer cancel()
	sent := b.now()
	resp, err := b.cli.Grant(cctx, ttl+leaseHeadroom)
	if err != nil {
		return idleLease{}, false, err
	}
	return idleLease{id: resp.ID, granted: resp.TTL, expires: sent + time.Duration(resp.TTL)*time.Second}, false, nil
}

// refresh sends one keepalive for lease id and reports when it was sent
// and the TTL etcd reset it to. errLeaseGone means etcd no longer has it.
func (b *Backend) refresh(ctx context.Context, id clientv3.LeaseID) (sent time.Duration, ttl int64, err error) {
	cctx, cancel := b.call(ctx)
	defer cancel()
	sent = b.now()
	ttl, err = b.keep.keepAlive(cctx, id)
	switch {
	case err != nil:
		return sent, 0, err
	case ttl <= 0:
		return sent, 0, errLeaseGone
	}
	return sent, ttl, nil
}

var errLeaseGone = errors.New("etcd lease not found (expired or revoked)")

// retire gives back the etcd lease of an entry this backend deleted
// itself: to the pool if it is the backend's own and not too old, else it
// is revoked in the background (or left to expire).
func (b *Backend) retire(r *rec) {
	b.mu.Lock()
	expires := r.expires
	b.mu.Unlock()
	if r.owned && b.pool.put(r.want, idleLease{id: r.lease, granted: r.ttl, expires: expires}) {
		return
	}
	b.revokeLater(r.lease)
}

// revokeLater revokes an etcd lease in the background, best effort.
func (b *Backend) revokeLater(id clientv3.LeaseID) {
	b.background(func(ctx context.Context) { _, _ = b.cli.Revoke(ctx, id) })
}

// background runs step in a goroutine that Close waits for, with a
// context bounded by RequestTimeout; not once Close has begun.
func (b *Backend) background(step func(context.Context)) {
	if !b.enter() {
		return
	}
	go func() {
		defer b.bg.Done()
		ctx, cancel := b.call(context.Background())
		defer cancel()
		step(ctx)
	}()
}

package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sema-dev/sema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Renew extends a live lease: a read of its entry, which must still be the
// one granted (same create revision, same etcd lease) and not marked
// force-released, then a keepalive of its etcd lease. A force-release
// between the two lets the keepalive extend the lease once more (its
// permits free one TTL later, never earlier). It never re-creates anything: a lease whose
// entry or etcd lease is gone is lost (sema.ErrForceReleased if an admin
// ended it, else sema.ErrExpired). etcd renews a lease by the TTL it was
// granted with: a ttl longer than that is refused.
func (b *Backend) Renew(ctx context.Context, name, id string, ttl time.Duration) (sema.Grant, error) {
	if err := checkNameID(name, id); err != nil {
		return sema.Grant{}, err
	}
	if err := sema.ValidateTTL(ttl); err != nil {
		return sema.Grant{}, err
	}
	if b.isClosed() {
		return sema.Grant{}, sema.ErrClosed
	}
	op := fmt.Sprintf("renew %q", name)
	r, err := b.lookup(ctx, name, id)
	if err != nil {
		return sema.Grant{}, b.fail(op, err)
	}
	if r == nil {
		return sema.Grant{}, fmt.Errorf("etcd: %s: %w", op, b.lossReason(ctx, id))
	}
	tooLong := func(granted int64) error {
		return fmt.Errorf("etcd: %s: %w: ttl %v is longer than the %ds the lease was granted with",
			op, sema.ErrInvalidArgument, ttl, granted)
	}
	if r.ttl > 0 && ttlSeconds(ttl) > r.ttl {
		return sema.Grant{}, tooLong(r.ttl)
	}
	// The entry and the force-release mark first: a lease force-released
	// but still holding its permits is not kept alive.
	cctx, cancel := b.call(ctx)
	tr, gerr := b.cli.Txn(cctx).Then(clientv3.OpGet(r.key), clientv3.OpGet(b.k.forcedKey(id), clientv3.WithCountOnly())).Commit()
	cancel()
	if gerr != nil {
		return sema.Grant{}, b.fail(op, gerr)
	}
	if tr.Responses[1].GetResponseRange().Count > 0 {
		return sema.Grant{}, fmt.Errorf("etcd: %s: %w", op, sema.ErrForceReleased)
	}
	sent, kttl, kerr := b.refresh(ctx, r.lease)
	ka := refreshed{sent, kttl, kerr}
	switch {
	case errors.Is(ka.err, errLeaseGone) || !isEntry((*clientv3.GetResponse)(tr.Responses[0].GetResponseRange()), r):
		b.forget(id)
		b.gone(r.key, r.rev)
		return sema.Grant{}, fmt.Errorf("etcd: %s: %w", op, b.lossReason(ctx, id))
	case ka.err != nil:
		return sema.Grant{}, b.fail(op, ka.err)
	case ttlSeconds(ttl) > ka.ttl:
		return sema.Grant{}, tooLong(ka.ttl) // found in etcd: its TTL was unknown
	}
	expires := ka.sent + time.Duration(ka.ttl)*time.Second
	b.mu.Lock()
	r.expires = max(r.expires, expires)
	b.mu.Unlock()
	now := time.Now()
	return sema.Grant{Name: name, ID: id, Token: uint64(r.rev), Owner: r.val.Owner, Weight: r.val.Weight,
		Limit: r.limit, AcquiredAt: time.Unix(0, r.val.Since), ExpiresAt: now.Add(expires - b.now())}, nil
}

// isEntry reports whether a read of r's key shows r's entry.
func isEntry(resp *clientv3.GetResponse, r *rec) bool {
	return len(resp.Kvs) == 1 && resp.Kvs[0].CreateRevision == r.rev && clientv3.LeaseID(resp.Kvs[0].Lease) == r.lease
}

// Release deletes the lease's entry in one Txn that compares its create
// revision, so a late or repeated release never touches a newer lease. An
// unknown or expired lease is sema.ErrNotHeld; a force-released one still
// holding its permits frees them and reports sema.ErrForceReleased.
func (b *Backend) Release(ctx context.Context, name, id string) error {
	if err := checkNameID(name, id); err != nil {
		return err
	}
	if b.isClosed() {
		return sema.ErrClosed
	}
	op := fmt.Sprintf("release %q", name)
	r, err := b.lookup(ctx, name, id)
	if err != nil {
		return b.fail(op, err)
	}
	if r == nil {
		return fmt.Errorf("etcd: %s: %w", op, sema.ErrNotHeld)
	}
	then := []clientv3.Op{clientv3.OpDelete(r.key), clientv3.OpGet(b.k.forcedKey(id), clientv3.WithCountOnly())}
	if r.limit == 1 {
		// Tells the waiter just behind that a holder left (see watchLock).
		then = append(then, clientv3.OpPut(b.k.stateKey(r.key), stateReleased, clientv3.WithLease(r.lease)))
	}
	cctx, cancel := b.call(ctx)
	// The create revision names one entry: its key is reused only later.
	resp, err := b.cli.Txn(cctx).If(clientv3.Compare(clientv3.CreateRevision(r.key), "=", r.rev)).Then(then...).Commit()
	cancel()
	if err != nil {
		return b.fail(op, err)
	}
	b.forget(id)
	b.gone(r.key, r.rev)
	if !resp.Succeeded {
		return fmt.Errorf("etcd: %s: %w", op, sema.ErrNotHeld)
	}
	b.retire(r)
	if resp.Responses[1].GetResponseRange().Count > 0 {
		return fmt.Errorf("etcd: %s: %w", op, sema.ErrForceReleased)
	}
	return nil
}

// lookup returns the record of lease id: the one kept when this backend
// granted it, else one read from its entry in etcd (owned false), else nil.
func (b *Backend) lookup(ctx context.Context, name, id string) (*rec, error) {
	b.mu.Lock()
	r := b.recs[id]
	b.mu.Unlock()
	if r != nil && r.name == name {
		return r, nil
	}
	cctx, cancel := b.call(ctx)
	defer cancel()
	resp, err := b.cli.Get(cctx, b.k.nameDir(name), clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	for _, kv := range resp.Kvs {
		if _, e, ok := b.k.decodeEntry(kv); ok && e.id == id {
			return &rec{name: name, key: e.key, rev: e.rev, lease: e.lease, limit: e.limit, val: e.val}, nil
		}
	}
	return nil, nil
}

// lossReason tells why lease id is gone: force-released (its mark exists)
// or expired.
func (b *Backend) lossReason(ctx context.Context, id string) error {
	cctx, cancel := b.call(ctx)
	defer cancel()
	resp, err := b.cli.Get(cctx, b.k.forcedKey(id), clientv3.WithCountOnly())
	if err == nil && resp.Count > 0 {
		return sema.ErrForceReleased
	}
	return sema.ErrExpired
}

// checkNameID validates what renew and release are given.
func checkNameID(name, id string) error {
	if err := sema.ValidateName(name); err != nil {
		return err
	}
	return sema.ValidateID(id)
}

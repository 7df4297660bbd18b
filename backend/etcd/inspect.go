package etcd

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/forced"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
)

// Describe returns the holders and waiters of name: one range read of its
// entries, holders being the longest prefix of the queue that fits in the
// limit, and their expiry (see expiries).
func (b *Backend) Describe(ctx context.Context, name string) (sema.Status, error) {
	if err := sema.ValidateName(name); err != nil {
		return sema.Status{}, err
	}
	sts, err := b.statuses(ctx, fmt.Sprintf("describe %q", name), b.k.nameDir(name), name)
	if err != nil {
		return sema.Status{}, err
	}
	if len(sts) == 0 {
		return sema.Status{Name: name, Holders: []sema.Holder{}, Waiters: []sema.WaiterInfo{}}, nil
	}
	return sts[0], nil
}

// List returns the names starting with prefix that have holders or
// waiters, sorted by name.
func (b *Backend) List(ctx context.Context, prefix string) ([]sema.Status, error) {
	if len(prefix) > sema.MaxNameLen {
		return nil, fmt.Errorf("etcd: %w: prefix longer than %d bytes", sema.ErrInvalidName, sema.MaxNameLen)
	}
	return b.statuses(ctx, fmt.Sprintf("list %q", prefix), b.k.queues+escapeName(prefix), "")
}

// statuses reads every entry under the key prefix kp (of name only, if
// name is set) and returns the statuses of their names, sorted by name.
func (b *Backend) statuses(ctx context.Context, op, kp, name string) ([]sema.Status, error) {
	if b.isClosed() {
		return nil, sema.ErrClosed
	}
	cctx, cancel := b.call(ctx)
	defer cancel()
	resp, err := b.cli.Get(cctx, kp, clientv3.WithPrefix())
	if err != nil {
		return nil, b.fail(op, err)
	}
	byName := map[string]*queue{}
	for _, kv := range resp.Kvs {
		n, e, ok := b.k.decodeEntry(kv)
		if !ok || name != "" && n != name {
			continue
		}
		q := byName[n]
		if q == nil {
			q = &queue{name: n}
			byName[n] = q
		}
		q.entries = append(q.entries, e)
	}
	sts := make([]sema.Status, 0, len(byName))
	var leases []*sema.Holder
	var es []*entry
	for _, q := range byName {
		sortQueue(q.entries)
		sts = append(sts, q.status())
	}
	slices.SortFunc(sts, func(a, b sema.Status) int { return strings.Compare(a.Name, b.Name) })
	for i := range sts {
		q := byName[sts[i].Name]
		for j := range sts[i].Holders {
			leases = append(leases, &sts[i].Holders[j])
			es = append(es, &q.entries[j])
		}
	}
	if err := b.expiries(ctx, leases, es); err != nil {
		return nil, b.fail(op, err)
	}
	if err := b.markForced(ctx, leases); err != nil {
		return nil, b.fail(op, err)
	}
	return sts, nil
}

// markForced sets ForceReleased on the holders whose force-release mark
// exists, asking etcd about a hundred at a time.
func (b *Backend) markForced(ctx context.Context, hs []*sema.Holder) error {
	for len(hs) > 0 {
		n := min(len(hs), 100)
		ops := make([]clientv3.Op, n)
		for i, h := range hs[:n] {
			ops[i] = clientv3.OpGet(b.k.forcedKey(h.ID), clientv3.WithCountOnly())
		}
		cctx, cancel := b.call(ctx)
		resp, err := b.cli.Txn(cctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			return err
		}
		for i, h := range hs[:n] {
			h.ForceReleased = h.ID != "" && resp.Responses[i].GetResponseRange().Count > 0
		}
		hs = hs[n:]
	}
	return nil
}

// expiries fills in the expiry of holders: for a lease this backend
// holds, its own record (when etcd cannot expire it before); for another
// client's, its etcd lease's time to live, which etcd reports in whole
// seconds rounded down, rounded up here: the lease ends no later. etcd is
// asked about a few leases at a time.
func (b *Backend) expiries(ctx context.Context, hs []*sema.Holder, es []*entry) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, h := range hs {
		if b.localExpiry(h, es[i]) {
			continue
		}
		g.Go(func() error {
			cctx, cancel := b.call(gctx)
			defer cancel()
			now := time.Now()
			resp, err := b.cli.TimeToLive(cctx, es[i].lease)
			if err != nil {
				return err
			}
			left := min(max(resp.TTL+1, 0), resp.GrantedTTL) // -1: expired just now
			h.ExpiresAt = now.Add(time.Duration(left) * time.Second)
			setRenewed(h, resp.GrantedTTL)
			return nil
		})
	}
	return g.Wait()
}

// localExpiry fills in h's expiry from this backend's record of e's lease,
// if it holds it.
func (b *Backend) localExpiry(h *sema.Holder, e *entry) bool {
	b.mu.Lock()
	r := b.recs[e.id]
	ok := r != nil && r.key == e.key && r.rev == e.rev
	var expires time.Duration
	var ttl int64
	if ok {
		expires, ttl = r.expires, r.ttl
	}
	b.mu.Unlock()
	if !ok {
		return false
	}
	h.ExpiresAt = time.Now().Add(expires - b.now())
	setRenewed(h, ttl)
	return true
}

// setRenewed derives when h was last renewed from its expiry and the TTL
// (s) its etcd lease was granted with.
func setRenewed(h *sema.Holder, ttl int64) {
	h.RenewedAt = h.ExpiresAt.Add(-time.Duration(ttl) * time.Second)
	if h.RenewedAt.Before(h.AcquiredAt) {
		h.RenewedAt = h.AcquiredAt
	}
}

// ForceRelease ends the holders of name (all, or the one with lease ID
// id) whatever their owners: one Txn marks each lease force-released (a
// key kept a while on an etcd lease of its own), if their entries are
// still the ones read, so that the holder's next renewal reports
// sema.ErrForceReleased. Unless opts.Now, the entries stay until their
// etcd leases expire (or their holders release them); with opts.Now the
// same Txn deletes them and their etcd leases are then revoked. Waiters
// are not touched: the freed permits go to them in order.
func (b *Backend) ForceRelease(ctx context.Context, name, id string, opts sema.ForceOptions) ([]sema.Holder, error) {
	if err := sema.ValidateName(name); err != nil {
		return nil, err
	}
	if id != "" {
		if err := sema.ValidateID(id); err != nil {
			return nil, err
		}
	}
	if b.isClosed() {
		return nil, sema.ErrClosed
	}
	op := fmt.Sprintf("force-release %q", name)
	for range maxTries {
		st, q, err := b.holdersOf(ctx, op, name)
		if err != nil {
			return nil, err
		}
		var cmps []clientv3.Cmp
		var ops []clientv3.Op
		var hs []sema.Holder
		var ls []clientv3.LeaseID
		var es []*entry
		for i, h := range st.Holders {
			e := &q.entries[i]
			if id != "" && e.id != id {
				continue
			}
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(e.key), "=", e.rev))
			if opts.Now {
				ops = append(ops, clientv3.OpDelete(e.key))
				if e.limit == 1 { // a holder left (see watchLock)
					ops = append(ops, clientv3.OpPut(b.k.stateKey(e.key), stateReleased, clientv3.WithLease(e.lease)))
				}
			}
			h.ForceReleased = true
			hs, ls, es = append(hs, h), append(ls, e.lease), append(es, e)
		}
		if len(hs) == 0 {
			return nil, fmt.Errorf("etcd: %s: %w", op, sema.ErrNotHeld)
		}
		// The marks outlive the longest TTL of the released leases, so that
		// a holder still renewing learns why.
		var ttl int64 = 60
		for _, e := range q.entries[:len(st.Holders)] {
			ttl = max(ttl, 2*ttlSeconds(time.Duration(e.val.TTL)*time.Millisecond))
		}
		cctx, cancel := b.call(ctx)
		ml, err := b.cli.Grant(cctx, ttl)
		cancel()
		if err != nil {
			return nil, b.fail(op, err)
		}
		for _, h := range hs {
			if h.ID != "" { // an unreadable entry names no lease
				// The mark's value tells the watching holders (see
				// NotifyForced) which lease of which name, and who.
				mark := forced.Encode(name, h.ID, opts.By)
				ops = append(ops, clientv3.OpPut(b.k.forcedKey(h.ID), mark, clientv3.WithLease(ml.ID)))
			}
		}
		cctx, cancel = b.call(ctx)
		resp, err := b.cli.Txn(cctx).If(cmps...).Then(ops...).Commit()
		cancel()
		if err != nil {
			return nil, b.fail(op, err)
		}
		if !resp.Succeeded {
			b.revokeLater(ml.ID)
			continue // a holder left meanwhile: read again
		}
		if !opts.Now {
			ptrs := make([]*sema.Holder, len(hs))
			for i := range hs {
				ptrs[i] = &hs[i]
			}
			if err := b.expiries(ctx, ptrs, es); err != nil {
				b.log.Debug("etcd: force-release: reading the expiries", "name", name, "err", err)
			}
			return hs, nil
		}
		for _, l := range ls {
			b.revokeLater(l)
		}
		return hs, nil
	}
	return nil, fmt.Errorf("etcd: %s: %w: the holders kept changing", op, sema.ErrUnavailable)
}

// holdersOf reads the state of name for a force-release.
func (b *Backend) holdersOf(ctx context.Context, op, name string) (sema.Status, queue, error) {
	cctx, cancel := b.call(ctx)
	defer cancel()
	resp, err := b.cli.Get(cctx, b.k.nameDir(name), clientv3.WithPrefix())
	if err != nil {
		return sema.Status{}, queue{}, b.fail(op, err)
	}
	q := b.queueOf(name, resp.Kvs)
	return q.status(), q, nil
}

package etcd

import (
	"context"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A lock's entry has a state key (see keys), on the entry's etcd lease,
// which says all a waiter behind the entry needs, in one key:
//
//	put with the entry, value stateQueued    the entry is there
//	put again, value stateReleased           its holder released it (in the
//	                                         release's Txn): nothing is ahead
//	                                         of the waiter just behind
//	deleted                                  the entry left as a waiter, or
//	                                         its etcd lease ended: read the
//	                                         queue
//
// A move of the entry to a longer lease moves its state key too.
const (
	stateQueued   = "q"
	stateReleased = "r"
)

// stateOps are the ops that put the state key of a lock's entry key on
// etcd lease lid, beside the entry's own put (none for a semaphore's).
func (b *Backend) stateOps(limit int64, key string, lid clientv3.LeaseID) []clientv3.Op {
	if limit != 1 {
		return nil
	}
	return []clientv3.Op{clientv3.OpPut(b.k.stateKey(key), stateQueued, clientv3.WithLease(lid))}
}

// watchLock waits for a lock's entry just ahead, pred, which waits too, by
// watching its state key: the release of pred grants the waiter with no
// read of the queue. It returns the entries still ahead (none) when the
// waiter is granted, else a fresh read of the queue. legacy says that pred
// has no state key (it was queued by an older client): nothing was waited
// for, the caller watches pred itself.
func (w *waiter) watchLock(ctx context.Context, pred entry, at int64) (
	q queue, qat int64, granted []entry, legacy bool, err error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	p := w.watchTwice(wctx, w.b.k.stateKey(pred.key))
	reread := func() (queue, int64, []entry, bool, error) {
		q, at, err := w.read(ctx)
		return q, at, nil, false, err
	}
	recheck := time.NewTimer(w.b.cfg.Recheck)
	defer recheck.Stop()
	for {
		resp, opened, err := w.next(ctx, p, recheck.C)
		switch {
		case err == errRecheck:
			return reread()
		case err != nil:
			return q, at, nil, false, err
		case opened:
			// Whether pred has a state key, and what happened between the
			// read and the watches: always read once.
			released, legacy, rev, err := w.stateOf(ctx, pred, p.startAt)
			switch {
			case err != nil:
				return reread()
			case legacy:
				return q, at, nil, true, nil
			case released:
				return q, at, []entry{}, false, nil
			case rev < 0:
				return reread() // pred is gone, not released by its holder
			}
			at = rev
			continue
		}
		for _, ev := range resp.Events {
			if ev.Kv.ModRevision <= at {
				continue // already in the state read
			}
			switch {
			case ev.Type == clientv3.EventTypeDelete:
				return reread()
			case string(ev.Kv.Value) == stateReleased:
				return q, at, []entry{}, false, nil // a lock's holder just ahead left
			}
			// Put again as the entry moved to a lease of its own: it holds.
		}
	}
}

// stateOf reads pred's entry and state key at revision since or later
// (served by the member itself unless it is behind): released if its
// holder released it, legacy if the entry is there with no state key of
// its own, rev the revision read, or -1 if the entry is gone otherwise.
func (w *waiter) stateOf(ctx context.Context, pred entry, since int64) (released, legacy bool, rev int64, err error) {
	kvs, rev, ok, err := w.readSince(ctx, since, pred.key, w.b.k.stateKey(pred.key))
	switch {
	case err != nil:
		return false, false, 0, err
	case !ok:
		return false, false, 0, errBehind
	}
	e, st := kvs[0], kvs[1]
	here := e != nil && e.CreateRevision == pred.rev
	ours := st != nil && st.ModRevision >= pred.rev // put with pred or after it
	switch {
	case ours && string(st.Value) == stateReleased:
		return true, false, rev, nil
	case here && ours:
		return false, false, rev, nil
	case here:
		return false, true, rev, nil
	}
	return false, false, -1, nil
}

var errBehind = errors.New("etcd: the member is behind the watch")

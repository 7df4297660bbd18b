package etcd

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/sema-dev/sema"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// watch waits, through an etcd watch, for a change that may grant the
// waiter. While an entry ahead waits too, it watches only the entry just
// ahead: a lock's state key (see watchLock), else the entry itself (its
// deletion, or a put: a grant mark or a move to a longer lease), and then
// reads the queue again, except behind a lock's entry known granted (see
// holds), whose deletion grants the waiter with no read. Once every entry
// ahead holds, it watches
// the deletions of the queue and counts them against the entries ahead: the
// grant needs no read. A watch starts at the current revision, so etcd
// treats it as synced at once (a watch from an older revision is served by
// a catch-up loop that runs every 100ms); if the queue may have changed
// since it was read, one read after the watch exists closes the gap. It
// returns the entries still ahead (all holding) when the waiter is
// granted, else a fresh read of the queue.
//
// etcd reads the current revision just before it registers a new watch: a
// write applied in between leaves the watch behind, to that catch-up loop.
// With eight clients taking turns on a lock, about one watch in fifty fell
// behind so, and each time every waiter behind it waited up to 100ms more:
// a queue moves no faster than its slowest watch. So a waiter opens its
// watch twice, one after the other, and takes each event from whichever
// delivers it first; both rarely fall behind.
func (w *waiter) watch(ctx context.Context, ahead []entry, load, at int64) (q queue, qat int64, granted []entry, err error) {
	head := load <= w.req.Limit // then every entry ahead was read
	pred := ahead[len(ahead)-1]
	if !head && w.req.Limit == 1 {
		q, qat, granted, legacy, err := w.watchLock(ctx, pred, at)
		if !legacy {
			return q, qat, granted, err
		}
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	var p *watchPair
	if head {
		p = w.watchTwice(wctx, w.ld, clientv3.WithPrefix(), clientv3.WithFilterPut())
	} else {
		p = w.watchTwice(wctx, pred.key)
	}
	reread := func() (queue, int64, []entry, error) {
		q, at, err := w.read(ctx)
		return q, at, nil, err
	}
	recheck := time.NewTimer(w.b.cfg.Recheck)
	defer recheck.Stop()
	model := slices.Clone(ahead)
	predHolds := false // a lock's entry just ahead is known granted
	for {
		resp, opened, err := w.next(ctx, p, recheck.C)
		switch {
		case err == errRecheck:
			return reread()
		case err != nil:
			return q, at, nil, err
		case opened && p.startAt <= at:
			continue // nothing happened since the read
		case opened && !head:
			// The entry ahead may have changed between the read and the
			// watches: a read of that key.
			changed, holds, gat, err := w.changed(ctx, pred, p.startAt)
			if err != nil || changed && !holds {
				return reread()
			}
			predHolds = predHolds || holds
			at = gat
			continue
		case opened:
			// The queue may have changed between the read and the watches.
			if q, at, err = w.read(ctx); err != nil {
				return q, at, nil, err
			}
			fresh, _, ok := w.ahead(&q)
			if !ok {
				return q, at, nil, nil
			}
			if model = fresh; sum(model)+w.req.Weight <= w.req.Limit {
				return q, at, model, nil
			}
			continue
		}
		for _, ev := range resp.Events {
			if ev.Kv.ModRevision <= at {
				continue // already in the state read
			}
			if !head {
				switch {
				case ev.Type == clientv3.EventTypePut && w.holds(ev.Kv, pred):
					predHolds = true
					continue
				case ev.Type == clientv3.EventTypeDelete && predHolds:
					// A lock's holder just ahead left: nothing is ahead now.
					return q, at, []entry{}, nil
				}
				return reread()
			}
			k := string(ev.Kv.Key)
			if k == w.key {
				return q, at, nil, errRequeue
			}
			model = slices.DeleteFunc(model, func(e entry) bool { return e.key == k })
		}
		if head && sum(model)+w.req.Weight <= w.req.Limit {
			return q, at, model, nil
		}
	}
}

// errRecheck: the waiter's bounded re-check is due.
var errRecheck = errors.New("etcd: time to read the queue again")

// watchPair is the same watch opened twice (see watch).
type watchPair struct {
	chs     [2]clientv3.WatchChan
	created int   // how many are open
	startAt int64 // the newest revision one started after
}

// watchTwice opens the watch of key (with opts) twice, one after the other.
func (w *waiter) watchTwice(ctx context.Context, key string, opts ...clientv3.OpOption) *watchPair {
	p := &watchPair{}
	opts = append(opts, clientv3.WithCreatedNotify())
	for i := range p.chs {
		p.chs[i] = w.b.cli.Watch(ctx, key, opts...)
	}
	return p
}

// next waits for the pair's next response that matters: opened once both
// watches are open (p.startAt then says from where they watch; events
// before that are dropped, as the caller reads what they say then), then
// each response with events, from whichever watch delivers it. err is
// errRecheck when the re-check is due or etcd cancelled a watch (leader
// lost, compacted, …): read the queue again; errRequeue when the waiter's
// etcd lease is lost; else why the wait ends.
func (w *waiter) next(ctx context.Context, p *watchPair, recheck <-chan time.Time) (
	resp clientv3.WatchResponse, opened bool, err error) {
	for {
		var ok bool
		select {
		case resp, ok = <-p.chs[0]:
		case resp, ok = <-p.chs[1]:
		case <-recheck:
			return resp, false, errRecheck
		case <-w.lost:
			return resp, false, errRequeue
		case <-ctx.Done():
			return resp, false, notAcquired(ctx)
		case <-w.b.closed:
			return resp, false, sema.ErrClosed
		}
		switch {
		case !ok || resp.Err() != nil || resp.Canceled:
			return resp, false, errRecheck
		case resp.Created:
			p.created++
			p.startAt = max(p.startAt, resp.Header.Revision)
			if p.created == len(p.chs) {
				return resp, true, nil
			}
		case p.created == len(p.chs):
			return resp, false, nil
		}
	}
}

// changed reads entry e's key and reports whether it is no longer the
// entry read (gone, or rewritten: a grant mark, a move to a longer lease);
// holds, if e is a lock's entry rewritten as granted (see holds); and the
// revision of the read. The read is served by the member itself (no round
// of the cluster's leader) unless that member is behind revision since (a
// watch of the waiter's started there): any revision from since on tells
// what the watch may have missed, and an entry once granted stays so.
func (w *waiter) changed(ctx context.Context, e entry, since int64) (changed, holds bool, rev int64, err error) {
	kvs, rev, ok, err := w.readSince(ctx, since, e.key)
	switch {
	case err != nil:
		return false, false, 0, err
	case !ok:
		return true, false, 0, nil // behind even so: read the queue
	case kvs[0] == nil:
		return true, false, rev, nil
	}
	kv := kvs[0]
	return kv.CreateRevision != e.rev || kv.ModRevision != e.mod, w.holds(kv, e), rev, nil
}

// readSince reads keys, in one read, at revision since or later: served by
// the member itself unless it is behind since, then through the leader.
// kvs[i] is keys[i]'s (nil if absent); ok is false if even that read was
// behind.
func (w *waiter) readSince(ctx context.Context, since int64, keys ...string) (
	kvs []*mvccpb.KeyValue, rev int64, ok bool, err error) {
	for _, opts := range [][]clientv3.OpOption{{clientv3.WithSerializable()}, nil} {
		ops := make([]clientv3.Op, len(keys))
		for i, k := range keys {
			ops[i] = clientv3.OpGet(k, opts...)
		}
		cctx, cancel := w.b.call(ctx)
		resp, err := w.b.cli.Txn(cctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			return nil, 0, false, err
		}
		if resp.Header.Revision < since {
			continue
		}
		kvs = make([]*mvccpb.KeyValue, len(keys))
		for i, r := range resp.Responses {
			if got := r.GetResponseRange().Kvs; len(got) == 1 {
				kvs[i] = got[0]
			}
		}
		return kvs, resp.Header.Revision, true, nil
	}
	return nil, 0, false, nil
}

// holds reports whether kv is the entry pred of a lock rewritten as
// granted (see mark): pred then holds, so nothing else is ahead of the
// waiter just behind it, and never will be. Only a grant rewrites an
// entry after its put.
func (w *waiter) holds(kv *mvccpb.KeyValue, pred entry) bool {
	if w.req.Limit != 1 {
		return false
	}
	_, e, ok := w.b.k.decodeEntry(kv)
	return ok && !e.broken && e.rev == pred.rev && e.val.Granted != 0
}

// anchor keeps one watch open for as long as the backend is open: clientv3
// closes a watch stream with its last watch, and a waiter's watch would
// then open a new stream (an HTTP/2 stream and a goroutine or two on each
// side) instead of sending one request. It watches the force-release
// marks, which are rarely written, and tells the holders of this backend
// of each (see NotifyForced); a mark put while the watch is made again
// (after a leader change, say) is learned at the holder's next renewal.
func (b *Backend) anchor() {
	defer b.bg.Done()
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	defer cancel()
	go func() {
		<-b.closed
		cancel()
	}()
	for ctx.Err() == nil {
		for resp := range b.cli.Watch(ctx, b.k.forced, clientv3.WithPrefix(), clientv3.WithFilterDelete()) {
			b.heardForced(resp.Events)
		}
		select { // cancelled by etcd (no leader): open it again
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

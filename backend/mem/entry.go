package mem

import (
	"cmp"
	"container/list"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sema-dev/sema"
)

// entry is the state of one name while it has holders or waiters.
type entry struct {
	limit   int64
	used    int64
	holders holderSet
	waiters list.List       // of *waiter, FIFO
	queued  map[string]bool // lease IDs of the waiters; nil until the first
	timer   *time.Timer
	idle    bool // no holders or waiters; counted in Backend.idle
	// nextExpiry is no later than the earliest holder expiry: expire has
	// nothing to do before it.
	nextExpiry time.Duration
}

type holder struct {
	id, owner, host string
	pid             int
	weight          int64
	token           uint64
	acquired        time.Duration // times by b.now()
	renewed         time.Duration
	expires         time.Duration
}

type waiter struct {
	req   sema.Request
	since time.Duration
	elem  *list.Element
	ready chan struct{} // closed when grant or err is set
	grant sema.Grant
	err   error
}

// entry returns the entry of name, or nil. The last one found is kept at
// hand, so a name taken and released again and again costs no map lookup.
func (b *Backend) entry(name string) *entry {
	if b.last != nil && name == b.lastName {
		return b.last
	}
	e := b.names[name]
	if e != nil {
		b.lastName, b.last = name, e
	}
	return e
}

// entryFor returns e, the entry of name from b.names, creating it if e is
// nil, after dropping expired holders. It fails if limit disagrees with
// current holders or waiters.
func (b *Backend) entryFor(e *entry, name string, limit int64, now time.Duration) (*entry, error) {
	if e == nil {
		if e = b.spare; e != nil {
			b.spare = nil
			e.limit = limit
		} else {
			e = &entry{limit: limit}
		}
		b.names[name] = e
		b.lastName, b.last = name, e
		return e, nil
	}
	if e.idle {
		e.idle = false
		b.idle--
	}
	b.expire(name, e, now)
	if e.limit != limit {
		if e.holders.len() > 0 || e.waiters.Len() > 0 {
			return nil, fmt.Errorf("mem: %q has limit %d, asked %d: %w", name, e.limit, limit, sema.ErrLimitMismatch)
		}
		e.limit = limit
	}
	return e, nil
}

func (b *Backend) grant(e *entry, req *sema.Request, now time.Duration) *holder {
	b.token++
	var h *holder
	if n := len(b.spareHolders); n > 0 {
		h = b.spareHolders[n-1]
		b.spareHolders = b.spareHolders[:n-1]
	} else {
		h = new(holder)
	}
	*h = holder{
		id: req.ID, owner: req.Owner, host: req.Host, pid: req.PID, weight: req.Weight,
		token: b.token, acquired: now, renewed: now, expires: now + req.TTL,
	}
	if e.holders.len() == 0 || h.expires < e.nextExpiry {
		e.nextExpiry = h.expires
	}
	e.holders.add(h)
	e.used += req.Weight
	return h
}

// grantOf is the grant of holder h. Its AcquiredAt is the epoch plus the
// time of the grant (see sema.MonotonicGranter).
func (b *Backend) grantOf(e *entry, name string, h *holder) sema.Grant {
	return sema.Grant{
		Name: name, ID: h.id, Token: h.token, Owner: h.owner,
		Weight: h.weight, Limit: e.limit, AcquiredAt: b.epoch.Add(h.acquired), ExpiresAt: b.wall(h.expires),
	}
}

// grantWaiters grants queued requests in order while the head fits. It
// stops at the first that does not: no barging.
func (b *Backend) grantWaiters(name string, e *entry, now time.Duration) {
	for el := e.waiters.Front(); el != nil; el = e.waiters.Front() {
		w := el.Value.(*waiter)
		if e.used+w.req.Weight > e.limit {
			break
		}
		e.waiters.Remove(el)
		delete(e.queued, w.req.ID)
		w.grant = b.grantOf(e, name, b.grant(e, &w.req, now))
		w.grant.Waited = now - w.since
		close(w.ready)
	}
	b.armExpiry(name, e, now)
}

// expire drops holders whose time is up and hands their permits on.
func (b *Backend) expire(name string, e *entry, now time.Duration) {
	if e.holders.len() == 0 || now < e.nextExpiry {
		return
	}
	freed := false
	next := time.Duration(math.MaxInt64)
	e.holders.filter(func(h *holder) bool {
		if now >= h.expires {
			e.used -= h.weight
			freed = true
			return false
		}
		next = min(next, h.expires)
		return true
	})
	e.nextExpiry = next
	if freed {
		b.grantWaiters(name, e, now)
	}
}

// armExpiry sets a timer for the earliest holder expiry while requests wait,
// so expired permits reach waiters without polling.
func (b *Backend) armExpiry(name string, e *entry, now time.Duration) {
	if e.waiters.Len() == 0 || e.holders.len() == 0 {
		if e.timer != nil {
			e.timer.Stop()
		}
		return
	}
	first := time.Duration(math.MaxInt64)
	for _, h := range e.holders.list {
		first = min(first, h.expires)
	}
	d := first - now
	if e.timer == nil {
		e.timer = time.AfterFunc(d, func() { b.onExpiry(name, e) })
	} else {
		e.timer.Reset(d)
	}
}

func (b *Backend) onExpiry(name string, e *entry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.names[name] != e {
		return
	}
	now := b.now()
	b.expire(name, e, now)
	b.armExpiry(name, e, now)
	b.dropIfIdle(name, e)
}

func (b *Backend) releaseLocked(name, id string, now time.Duration) bool {
	e := b.entry(name)
	if e == nil {
		return false
	}
	b.expire(name, e, now)
	h := e.holders.remove(id)
	if h == nil {
		b.dropIfIdle(name, e)
		return false
	}
	e.used -= h.weight
	b.recycle(h)
	b.grantWaiters(name, e, now)
	b.dropIfIdle(name, e)
	return true
}

// dropIfIdle marks a name nobody holds or waits for as idle. Idle entries
// stay in the map, so a name taken and released over and over costs no map
// insertion and deletion, until they outnumber the others (and 1024): then
// they are all forgotten. Tokens come from one counter for the whole
// backend, so nothing about an idle name needs keeping.
func (b *Backend) dropIfIdle(name string, e *entry) {
	if e.idle || e.holders.len() > 0 || e.waiters.Len() > 0 {
		return
	}
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	e.idle = true
	b.idle++
	if b.idle > max(maxIdle, len(b.names)/2) {
		b.sweepIdle()
	}
}

// maxIdle is the number of idle entries kept at least.
const maxIdle = 1024

// sweepIdle forgets every idle entry, keeping one for reuse by a new name.
func (b *Backend) sweepIdle() {
	for name, e := range b.names {
		if e.idle {
			delete(b.names, name)
			e.idle = false
			b.spare = e
		}
	}
	b.idle, b.last = 0, nil
}

// recycle keeps a released holder for the next grant, which overwrites
// every field (its strings stay reachable until then: a few bytes).
func (b *Backend) recycle(h *holder) {
	if len(b.spareHolders) < 64 {
		b.spareHolders = append(b.spareHolders, h)
	}
}

func (b *Backend) holderList(e *entry) []sema.Holder {
	hs := make([]sema.Holder, 0, e.holders.len())
	for _, h := range e.holders.list {
		hs = append(hs, sema.Holder{
			ID: h.id, Owner: h.owner, Token: h.token, Weight: h.weight,
			AcquiredAt: b.wall(h.acquired), RenewedAt: b.wall(h.renewed), ExpiresAt: b.wall(h.expires),
			Host: h.host, PID: h.pid, ForceReleased: b.forced(h.id),
		})
	}
	slices.SortFunc(hs, func(a, b sema.Holder) int { return cmp.Compare(a.Token, b.Token) })
	return hs
}

func (b *Backend) status(e *entry, name string) sema.Status {
	st := sema.Status{Name: name, Limit: e.limit, Used: e.used, Holders: b.holderList(e), Waiters: []sema.WaiterInfo{}}
	for el := e.waiters.Front(); el != nil; el = el.Next() {
		w := el.Value.(*waiter)
		st.Waiters = append(st.Waiters, sema.WaiterInfo{
			Owner: w.req.Owner, Weight: w.req.Weight, Since: b.wall(w.since), Host: w.req.Host, PID: w.req.PID,
		})
	}
	return st
}

func (b *Backend) heldError(e *entry, name string) error {
	return &sema.HeldError{Name: name, Limit: e.limit, Holders: b.holderList(e), Waiters: e.waiters.Len()}
}

// Describe returns the holders and waiters of name.
func (b *Backend) Describe(_ context.Context, name string) (sema.Status, error) {
	if err := sema.ValidateName(name); err != nil {
		return sema.Status{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return sema.Status{}, sema.ErrClosed
	}
	e := b.entry(name)
	if e == nil {
		return sema.Status{Name: name, Holders: []sema.Holder{}, Waiters: []sema.WaiterInfo{}}, nil
	}
	b.expire(name, e, b.now())
	st := b.status(e, name)
	b.dropIfIdle(name, e)
	return st, nil
}

// List returns every name with the prefix that has holders or waiters.
func (b *Backend) List(_ context.Context, prefix string) ([]sema.Status, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, sema.ErrClosed
	}
	now := b.now()
	out := []sema.Status{}
	for name, e := range b.names {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		b.expire(name, e, now)
		if e.holders.len() == 0 && e.waiters.Len() == 0 {
			b.dropIfIdle(name, e)
			continue
		}
		out = append(out, b.status(e, name))
	}
	slices.SortFunc(out, func(a, b sema.Status) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ForceRelease ends the lease id of name, or every lease of name if id is "".
// Unless opts.Now, the leases keep their permits until they expire or
// their holders release them.
func (b *Backend) ForceRelease(_ context.Context, name, id string, opts sema.ForceOptions) ([]sema.Holder, error) {
	if err := sema.ValidateName(name); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, sema.ErrClosed
	}
	now := b.now()
	e := b.entry(name)
	if e == nil {
		return nil, fmt.Errorf("mem: force-release %q: %w", name, sema.ErrNotHeld)
	}
	b.expire(name, e, now)
	for rid, until := range b.revoked {
		if now > until {
			delete(b.revoked, rid)
		}
	}
	var out []sema.Holder
	var ids []string
	for _, h := range b.holderList(e) {
		if id != "" && h.ID != id {
			continue
		}
		b.revoked[h.ID] = h.ExpiresAt.Sub(b.epochWall)
		h.ForceReleased = true
		out = append(out, h)
		ids = append(ids, h.ID)
		if opts.Now {
			e.holders.remove(h.ID)
			e.used -= h.Weight
		}
	}
	b.grantWaiters(name, e, now)
	b.dropIfIdle(name, e)
	if len(out) == 0 {
		return nil, fmt.Errorf("mem: force-release %q: %w", name, sema.ErrNotHeld)
	}
	b.notices.Tell(name, ids, opts.By)
	return out, nil
}

// NotifyForced makes the backend call f for each lease it force-releases,
// so that its holder learns at once (sema.ForceNotifier).
func (b *Backend) NotifyForced(f func(sema.ForceNotice)) (stop func()) { return b.notices.Add(f) }

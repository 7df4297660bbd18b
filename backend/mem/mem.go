// Package mem is the in-process reference backend (URL mem://).
//
// # Guarantees
//
// Exclusion among the goroutines of one process; linearizable (one mutex);
// waiters are served strictly FIFO with no barging: a later, smaller request
// never overtakes an earlier one (as golang.org/x/sync/semaphore). A release
// hands the permits to the next waiters directly, under the same mutex, and
// wakes them by a channel. An acquire repeating the lease ID of a live
// lease returns that lease; one repeating the ID of a queued request is
// refused (sema.ErrInvalidArgument), never queued twice. Expiry runs on the
// process clock: a timer frees expired permits for waiters, without
// polling. Tokens come from one counter for the whole backend, so they are
// strictly increasing per name even after an idle name's state is dropped;
// they restart with the process.
package mem

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/forced"
)

// Backend is the in-process backend. The zero value is not usable; call New.
type Backend struct {
	mu      sync.Mutex
	names   map[string]*entry
	revoked map[string]time.Duration // force-released lease IDs → when to forget (b.now())
	token   uint64
	closed  bool

	epoch        time.Time // base of now(), with a monotonic reading
	epochWall    time.Time // the same instant without it, for wall times
	idle         int       // entries in names with no holders or waiters
	spare        *entry    // a forgotten entry kept for reuse
	spareHolders []*holder // released holders kept for reuse

	notices forced.Notices // told of leases force-released

	goodOwner, goodHost string // the labels of the last request found valid
	lastName            string // the name of last, the entry last looked up
	last                *entry // nil if none, or forgotten
}

// Interface guards.
var (
	_ sema.Backend       = (*Backend)(nil)
	_ sema.Blocker       = (*Backend)(nil)
	_ sema.Inspector     = (*Backend)(nil)
	_ sema.ForceReleaser = (*Backend)(nil)
	_ sema.ForceNotifier = (*Backend)(nil)
	_ sema.Declarer      = (*Backend)(nil)

	_ sema.MonotonicGranter = (*Backend)(nil)
)

// GrantEpoch returns the base of the backend's clock: a grant's AcquiredAt
// is GrantEpoch plus the time of the grant (see [sema.MonotonicGranter]).
func (b *Backend) GrantEpoch() time.Time { return b.epoch }

// New returns an empty backend.
func New() *Backend {
	epoch := time.Now()
	return &Backend{names: make(map[string]*entry), revoked: make(map[string]time.Duration), epoch: epoch, epochWall: epoch.Round(0)}
}

// now is the backend's clock: monotonic, the time since New, read more
// cheaply than time.Now.
func (b *Backend) now() time.Duration { return time.Since(b.epoch) }

// wall converts a time of b.now() to a wall time. It drifts from the system
// clock only if that is stepped.
func (b *Backend) wall(t time.Duration) time.Time { return b.epochWall.Add(t) }

// Guarantees declares what the memory backend promises.
func (b *Backend) Guarantees() sema.Guarantees {
	return sema.Guarantees{
		Scope: sema.ScopeProcess, FIFO: true, Linearizable: true, DurableFencing: false,
		Wakeup: "in-process channel",
		Notes:  "state lives in this process only; tokens restart when the process does",
	}
}

// TryAcquire grants the request if the permits are free and nobody waits.
func (b *Backend) TryAcquire(_ context.Context, req sema.Request) (sema.Grant, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.lookup(&req)
	if err != nil {
		return sema.Grant{}, err
	}
	if b.closed {
		return sema.Grant{}, sema.ErrClosed
	}
	now := b.now()
	e, err = b.entryFor(e, req.Name, req.Limit, now)
	if err != nil {
		return sema.Grant{}, err
	}
	if b.forced(req.ID) {
		return sema.Grant{}, b.forcedRetry(req.Name, e)
	}
	if h := e.holders.get(req.ID); h != nil { // idempotent retry
		return b.grantOf(e, req.Name, h), nil
	}
	if e.waiters.Len() > 0 || e.used+req.Weight > e.limit {
		err := b.heldError(e, req.Name)
		b.dropIfIdle(req.Name, e)
		return sema.Grant{}, err
	}
	return b.grantOf(e, req.Name, b.grant(e, &req, now)), nil
}

// Acquire waits in the name's FIFO queue until granted or ctx is done.
func (b *Backend) Acquire(ctx context.Context, req sema.Request) (sema.Grant, error) {
	b.mu.Lock()
	e, err := b.lookup(&req)
	if err != nil {
		b.mu.Unlock()
		return sema.Grant{}, err
	}
	if b.closed {
		b.mu.Unlock()
		return sema.Grant{}, sema.ErrClosed
	}
	now := b.now()
	e, err = b.entryFor(e, req.Name, req.Limit, now)
	if err != nil {
		b.mu.Unlock()
		return sema.Grant{}, err
	}
	if b.forced(req.ID) {
		err := b.forcedRetry(req.Name, e)
		b.mu.Unlock()
		return sema.Grant{}, err
	}
	if h := e.holders.get(req.ID); h != nil {
		b.mu.Unlock()
		return b.grantOf(e, req.Name, h), nil
	}
	if e.waiters.Len() == 0 && e.used+req.Weight <= e.limit {
		g := b.grantOf(e, req.Name, b.grant(e, &req, now))
		b.mu.Unlock()
		return g, nil
	}
	if e.queued[req.ID] {
		b.mu.Unlock()
		return sema.Grant{}, fmt.Errorf("mem: acquire %q: %w: lease id %q is already queued", req.Name, sema.ErrInvalidArgument, req.ID)
	}
	if e.queued == nil {
		e.queued = make(map[string]bool)
	}
	e.queued[req.ID] = true
	w := &waiter{req: req, since: now, ready: make(chan struct{})}
	w.elem = e.waiters.PushBack(w)
	b.armExpiry(req.Name, e, now)
	b.mu.Unlock()

	select {
	case <-w.ready:
		return w.grant, w.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready: // granted (or closed) just as ctx ended: give it back
		if w.err == nil {
			b.releaseLocked(req.Name, req.ID, b.now())
		}
	default:
		wasHead := e.waiters.Front() == w.elem
		e.waiters.Remove(w.elem)
		delete(e.queued, req.ID)
		if wasHead {
			// The head may have been blocking smaller requests behind it.
			b.grantWaiters(req.Name, e, b.now())
		}
		b.dropIfIdle(req.Name, e)
	}
	return sema.Grant{}, fmt.Errorf("%w: %w", sema.ErrNotAcquired, context.Cause(ctx))
}

// lookup checks req as req.Validate does and returns the entry of its name,
// nil if it has none. A name with an entry and labels equal to the last ones
// found valid need no second look at their bytes, so a name taken again and
// again costs only the check of its lease ID and numbers. b.mu must be held.
func (b *Backend) lookup(req *sema.Request) (*entry, error) {
	e := b.entry(req.Name)
	if e == nil || req.Owner != b.goodOwner || req.Host != b.goodHost {
		if err := req.Validate(); err != nil {
			return nil, err
		}
		b.goodOwner, b.goodHost = req.Owner, req.Host
		return e, nil
	}
	return e, req.ValidateTerms()
}

// Renew extends a live lease by ttl from now.
func (b *Backend) Renew(_ context.Context, name, id string, ttl time.Duration) (sema.Grant, error) {
	if err := sema.ValidateTTL(ttl); err != nil {
		return sema.Grant{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return sema.Grant{}, sema.ErrClosed
	}
	now := b.now()
	e := b.entry(name)
	if e != nil {
		b.expire(name, e, now)
	}
	if b.forced(id) {
		return sema.Grant{}, fmt.Errorf("mem: renew %q: %w", name, sema.ErrForceReleased)
	}
	var h *holder
	if e != nil {
		h = e.holders.get(id)
	}
	if h == nil {
		return sema.Grant{}, fmt.Errorf("mem: renew %q: %w", name, sema.ErrLeaseLost)
	}
	h.renewed = now
	h.expires = now + ttl
	b.armExpiry(name, e, now)
	return b.grantOf(e, name, h), nil
}

// Release frees a lease by ID. Unknown or expired IDs → ErrNotHeld; a lease
// force-released but still holding its permits frees them and reports
// ErrForceReleased.
func (b *Backend) Release(_ context.Context, name, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return sema.ErrClosed
	}
	if !b.releaseLocked(name, id, b.now()) {
		return fmt.Errorf("mem: release %q: %w", name, sema.ErrNotHeld)
	}
	if b.forced(id) {
		return fmt.Errorf("mem: release %q: %w", name, sema.ErrForceReleased)
	}
	return nil
}

// forcedRetry is the answer to an acquire repeating the ID of a lease an
// admin force-released: never that lease again. Called with b.mu held.
func (b *Backend) forcedRetry(name string, e *entry) error {
	b.dropIfIdle(name, e)
	return fmt.Errorf("mem: acquire %q: %w: lease id was force-released", name, sema.ErrForceReleased)
}

// forced reports whether lease id was force-released.
func (b *Backend) forced(id string) bool {
	if len(b.revoked) == 0 {
		return false
	}
	_, ok := b.revoked[id]
	return ok
}

// Close fails every waiter and later call with ErrClosed and drops all state.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	for _, e := range b.names {
		for el := e.waiters.Front(); el != nil; el = el.Next() {
			w := el.Value.(*waiter)
			w.err = sema.ErrClosed
			close(w.ready)
		}
		if e.timer != nil {
			e.timer.Stop()
		}
	}
	b.names, b.last = nil, nil
	return nil
}

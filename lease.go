package sema

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"
)

// Lease is a grant of permits. Ownership is the possession of this value:
// any goroutine may release it. A lease can be lost at any time (expiry,
// force-release, a backend that stops answering); [Lease.Done] closes and
// [Lease.Context] is cancelled before the backend could give the permits to
// anyone else, and [Lease.Err] tells why.
type Lease struct {
	// Set when granted, then read-only.
	sem      *Semaphore     // name, limit and client
	cfg      *acquireConfig // owner, weight, TTL, renew interval, safety margin: shared, never written
	id       string
	token    uint64
	acquired int64           // backend clock, Unix ns; 0 if unknown
	parent   context.Context // the acquire context, for its values only
	s        *sched          // wakes the lease for its renewals and deadline

	wake time.Duration // guarded by s.mu: when s wakes the lease
	hidx int32         // guarded by s.mu: index in s.heap, -1 if not in it

	mu         sync.Mutex // guards the fields below
	failures   int32      // keepalive renewals failed in a row
	ended      bool
	stopping   bool          // Release has begun
	renewing   bool          // a keepalive renewal is in flight
	recheckDue bool          // renew again once the renewal in flight is done (see recheck)
	relDone    bool          // Release has finished: its result is nil or x.relErr
	expires    int64         // backend clock, Unix ns, as of the last confirmed renewal; 0 if unknown
	deadline   time.Duration // local, by c.now(): sent + TTL − margin
	nextRenew  time.Duration // by c.now()
	reason     error         // why it ended
	x          *leaseExtra   // what few leases need, made on first use

	renewMu sync.Mutex  // held for the duration of each renewal
	idBytes [idLen]byte // the lease ID made by this client: written once, then only read through id
}

// leaseExtra holds the lease's state that most leases never need, so that
// the common lease stays small. Guarded by Lease.mu.
type leaseExtra struct {
	maxHoldT *time.Timer
	inflight context.CancelFunc // cancels the renewal in progress
	ctx      context.Context    // of Lease.Context
	cancel   context.CancelCauseFunc
	relWait  chan struct{} // closed when the first Release finishes, for the others
	relErr   error         // what Release returned, if not nil
	forcedBy string        // who force-released the lease, as a backend told (see recheck)
}

func (l *Lease) extra() *leaseExtra {
	if l.x == nil {
		l.x = new(leaseExtra)
	}
	return l.x
}

// newLeaseID allocates a lease and gives it a fresh random ID, which lives
// in the lease's own memory (one allocation for both): the string must
// never be written again, so a lease gets exactly one ID.
func newLeaseID() (*Lease, string) {
	l := new(Lease)
	hi, lo := randID()
	encodeIDTo(&l.idBytes, hi, lo)
	return l, unsafe.String(&l.idBytes[0], idLen)
}

// start makes l the lease of grant g and arms its renewals and deadline.
func (l *Lease) start(sem *Semaphore, g *Grant, cfg *acquireConfig, now, deadline time.Duration, parent context.Context) *Lease {
	l.sem, l.cfg, l.id, l.token = sem, cfg, g.ID, g.Token
	l.acquired, l.expires = unixNano(g.AcquiredAt), unixNano(g.ExpiresAt)
	l.parent = parent
	l.s, l.hidx = sem.c.schedFor(g.ID), -1
	l.deadline, l.nextRenew = deadline, now+cfg.interval
	if cfg.maxHold > 0 {
		l.extra().maxHoldT = time.AfterFunc(cfg.maxHold, func() { l.end(ErrMaxHold) })
	}
	// Not yet shared: no lock needed until the sched holds it.
	l.schedule(now)
	return l
}

// unixNano and fromUnixNano keep backend times in 8 bytes; 0 is the zero
// time (a backend that reports none).
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// schedule makes the lease wake at its next renewal with keepalive on (and
// none in flight), else at its deadline. l.mu must be held.
func (l *Lease) schedule(now time.Duration) {
	when := l.deadline
	if l.cfg.keepalive && !l.renewing && l.nextRenew < l.deadline {
		when = l.nextRenew
	}
	l.s.set(l, when, now)
}

// recheck renews the lease at once (with keepalive on): the backend said
// an admin (by, if known) may have force-released it. A renewal in flight
// may have been answered before that: then another follows it.
func (l *Lease) recheck(by string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended || l.stopping || !l.cfg.keepalive {
		return
	}
	if by != "" {
		l.extra().forcedBy = by
	}
	if l.renewing {
		l.recheckDue = true
		return
	}
	now := l.sem.c.now()
	l.nextRenew = now
	l.schedule(now)
}

// Name returns the semaphore's name.
func (l *Lease) Name() string { return l.sem.name }

// ID returns the lease ID: random, unique per acquisition.
func (l *Lease) ID() string { return l.id }

// Token returns the fencing token: strictly increasing per name over every
// grant. Pass it to the resource you guard so it can refuse stale holders.
func (l *Lease) Token() uint64 { return l.token }

// Owner returns the owner label.
func (l *Lease) Owner() string { return l.cfg.owner }

// Weight returns the number of permits held.
func (l *Lease) Weight() int64 { return l.cfg.weight }

// Limit returns the semaphore's limit.
func (l *Lease) Limit() int64 { return l.sem.limit }

// AcquiredAt returns when the backend granted the lease, by its clock.
func (l *Lease) AcquiredAt() time.Time { return fromUnixNano(l.acquired) }

// ExpiresAt returns when the backend will expire the lease unless renewed,
// by its clock, as of the last confirmed renewal.
func (l *Lease) ExpiresAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fromUnixNano(l.expires)
}

// Context returns a context cancelled when the lease ends, with the reason
// as its cause ([context.Cause]). It carries the values of the context the
// lease was acquired with, not its cancellation.
func (l *Lease) Context() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	x := l.extra()
	if x.ctx == nil {
		x.ctx, x.cancel = context.WithCancelCause(context.WithoutCancel(l.parent))
		if l.ended {
			x.cancel(l.reason)
		}
	}
	return x.ctx
}

// Done returns a channel closed when the lease ends.
func (l *Lease) Done() <-chan struct{} { return l.Context().Done() }

// Err returns nil while the lease is held, then why it ended: ErrReleased,
// ErrExpired, ErrForceReleased, ErrMaxHold (all but the first satisfy
// errors.Is(err, ErrLeaseLost)), or a backend error. Past the lease's local
// deadline it reports ErrExpired even if the lease's timer has not run yet
// (a starved process): a lease is never reported valid beyond it.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.ended && !l.stopping && l.sem.c.now() >= l.deadline {
		l.endLocked(ErrExpired)
	}
	return l.reason
}

// String describes the lease for logs.
func (l *Lease) String() string {
	return fmt.Sprintf("lease %s on %q token %d weight %d/%d owner %q",
		l.id, l.sem.name, l.token, l.cfg.weight, l.sem.limit, l.cfg.owner)
}

// end finishes the lease with reason unless it already ended.
func (l *Lease) end(reason error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endLocked(reason)
}

func (l *Lease) endLocked(reason error) {
	if l.ended {
		return
	}
	l.ended = true
	l.reason = reason
	if !l.stopping { // else Release took it out already
		l.s.remove(l)
	}
	if x := l.x; x != nil {
		if x.maxHoldT != nil {
			x.maxHoldT.Stop()
		}
		if x.cancel != nil {
			x.cancel(reason)
		}
	}
	if reason != ErrReleased {
		l.sem.c.log.Warn("sema: lease lost", "name", l.sem.name, "lease", l.id, "token", l.token, "reason", reason)
	}
}

// Release gives the permits back and stops keepalive before it returns. It
// runs on its own context, detached from ctx's cancellation and bounded by
// the client's release timeout, so a cancelled caller does not leave the
// permits held until the TTL. It is idempotent: later calls return the first
// result. It returns nil if the lease was held until released, or an error
// wrapping ErrLeaseLost if it had been lost before. Releasing a nil lease
// (one that was never acquired) returns an error wrapping ErrNotHeld.
func (l *Lease) Release(ctx context.Context) error {
	if l == nil {
		return fmt.Errorf("sema: release of a nil lease: %w", ErrNotHeld)
	}
	// No defers here: with them the compiler would not open-code any, and
	// this is the hot path of every lease.
	l.mu.Lock()
	if l.stopping {
		return l.releaseAgain()
	}
	l.stopping = true
	l.s.remove(l)
	renewing := l.x != nil && l.x.inflight != nil
	lost := l.reason
	c, name := l.sem.c, l.sem.name
	if c.local && !renewing {
		// An in-process backend answers at once: nothing to wait for,
		// bound or cancel, so the lease stays locked throughout.
		err := l.released(releaseResult(name, lost, c.b.Release(context.Background(), name, l.id)))
		l.mu.Unlock()
		return err
	}
	if renewing {
		l.x.inflight()
	}
	l.mu.Unlock()
	return l.releaseBounded(ctx, renewing, lost)
}

// releaseAgain is Release after the first call: another Release ran or
// runs, and its result is ours. l.mu is held, and released on return.
func (l *Lease) releaseAgain() error {
	defer l.mu.Unlock()
	if !l.relDone {
		x := l.extra()
		if x.relWait == nil {
			x.relWait = make(chan struct{})
		}
		wait := x.relWait
		l.mu.Unlock()
		<-wait
		l.mu.Lock()
	}
	if l.x == nil {
		return nil
	}
	return l.x.relErr
}

// releaseBounded gives the permits back on a context of its own, bounded by
// the client's release timeout, retrying transient errors.
func (l *Lease) releaseBounded(ctx context.Context, renewing bool, lost error) error {
	// A renewal that has not begun its call sees stopping and gives up; wait
	// for one in progress: none reaches the backend after this.
	if renewing {
		l.renewMu.Lock()
		l.renewMu.Unlock()
	}
	name := l.sem.name
	err := l.sem.c.release(ctx, name, l.id)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.released(releaseResult(name, lost, err))
}

// released ends the lease after Release and records err, Release's result,
// for later callers. l.mu must be held.
func (l *Lease) released(err error) error {
	l.endLocked(ErrReleased)
	l.relDone = true
	if err != nil {
		l.extra().relErr = err
	}
	if l.x != nil && l.x.relWait != nil {
		close(l.x.relWait)
	}
	return err
}

// releaseResult is what Release returns, given how the lease had ended
// before (lost) and what the backend said.
func releaseResult(name string, lost, err error) error {
	switch {
	case lost != nil:
		return fmt.Errorf("sema: release %q: lease had ended: %w", name, lost)
	case err == nil:
		return nil
	case errors.Is(err, ErrNotHeld):
		return fmt.Errorf("sema: release %q: backend no longer held it: %w", name, ErrExpired)
	}
	return fmt.Errorf("sema: release %q: %w", name, err)
}

// retryUntil calls op until it succeeds, fails with a sentinel other than
// ErrUnavailable, or deadline passes.
func retryUntil(deadline time.Time, op func() error) error {
	delay := 5 * time.Millisecond
	for {
		err := op()
		if err == nil || !transient(err) {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return err
		}
		time.Sleep(min(delay, left))
		delay = min(delay*2, 500*time.Millisecond)
	}
}

// transient reports whether err says nothing definite about the lease.
func transient(err error) bool {
	for _, s := range []error{ErrLeaseLost, ErrNotHeld, ErrClosed, ErrPermission, ErrInvalidArgument, ErrInvalidName, ErrLimitMismatch, ErrNotAcquired} {
		if errors.Is(err, s) {
			return false
		}
	}
	return true
}

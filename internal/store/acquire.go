package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/sema-dev/sema"
)

// TryAcquire grants req if its permits are free and nobody waits.
func (s *Store) TryAcquire(ctx context.Context, req sema.Request) (sema.Grant, error) {
	return s.AcquireAs(ctx, req, Caller{Admin: true}, false)
}

// Acquire waits in the name's FIFO queue until granted or ctx is done.
func (s *Store) Acquire(ctx context.Context, req sema.Request) (sema.Grant, error) {
	return s.AcquireAs(ctx, req, Caller{Admin: true}, true)
}

// AcquireAs grants req to who, waiting in the FIFO queue if wait is set. A
// grant is returned only once it is on disk. A request repeating the ID of
// a live lease of the same name returns that lease (if who may see it).
func (s *Store) AcquireAs(ctx context.Context, req sema.Request, who Caller, wait bool) (sema.Grant, error) {
	mode := modeTry
	if wait {
		mode = modeWait
	}
	g, _, err := s.acquire(ctx, req, who, mode)
	return g, err
}

// AcquireNow grants req to who if that needs no wait in the queue (or
// returns the live lease of a repeated ID), exactly as AcquireAs would.
// When req would have to wait, it reports granted == false with no error
// and queues nothing, so that the caller can set up its wait (a server's
// long-poll machinery) only when one is needed, then call AcquireAs.
func (s *Store) AcquireNow(ctx context.Context, req sema.Request, who Caller) (g sema.Grant, granted bool, err error) {
	return s.acquire(ctx, req, who, modeNow)
}

// Modes of acquire.
const (
	modeTry  = iota // fail with a *sema.HeldError if req must wait
	modeWait        // wait in the queue
	modeNow         // report granted == false if req must wait
)

func (s *Store) acquire(ctx context.Context, req sema.Request, who Caller, mode int) (sema.Grant, bool, error) {
	g, _, err := s.acquireMode(ctx, req, who, mode, nil)
	if err == errMustWait {
		return sema.Grant{}, false, nil
	}
	return g, err == nil, err
}

// errMustWait is acquireMode's answer in modeNow when req must wait.
var errMustWait = errors.New("store: must wait")

// acquireMode acquires in mode. With notify (modeWait only), a request
// that must wait is queued and returned as a *Wait at once (async.go).
func (s *Store) acquireMode(ctx context.Context, req sema.Request, who Caller, mode int, notify func(*Wait)) (sema.Grant, *Wait, error) {
	g, err := s.acquireWait(ctx, req, who, mode, notify, false)
	if qw, ok := err.(queuedError); ok {
		return sema.Grant{}, qw.w, nil
	}
	return g, nil, err
}

// queuedError carries the *Wait of a request queued by AcquireAsync.
type queuedError struct{ w *Wait }

func (queuedError) Error() string { return "store: queued" }

func (s *Store) acquireWait(ctx context.Context, req sema.Request, who Caller, mode int, notify func(*Wait), deferred bool) (sema.Grant, error) {
	wait := mode == modeWait
	if err := req.Validate(); err != nil {
		return sema.Grant{}, err
	}
	if len(who.Principal) > maxPrincLen {
		return sema.Grant{}, fmt.Errorf("store: %w: principal longer than %d bytes", sema.ErrInvalidArgument, maxPrincLen)
	}
	if ctx.Err() != nil {
		return sema.Grant{}, notAcquired(ctx)
	}
	s.mu.Lock()
	if s.closed {
		s.unlock()
		return sema.Grant{}, sema.ErrClosed
	}
	now := s.mono()
	e, err := s.entryFor(req.Name, req.Limit, now)
	if err != nil {
		s.unlock()
		return sema.Grant{}, err
	}
	if l := e.find(req.ID); l != nil { // idempotent retry
		if !who.may(l) {
			s.unlock()
			return sema.Grant{}, fmt.Errorf("store: acquire %q: %w", req.Name, ErrForbidden)
		}
		if deferred {
			return sema.Grant{}, s.deferGrant(ctx, l, notify, false)
		}
		g, seq := s.grantOf(l), l.seq
		s.unlock()
		if err := s.wal.wait(ctx, seq); err != nil {
			return sema.Grant{}, s.waitError(ctx, err)
		}
		return g, nil
	}
	if e.waiters.len == 0 && e.used+req.Weight <= e.limit && !s.fenced(e, now) {
		l, _ := s.grantLocked(e, &req, who.Principal, now, false)
		if deferred {
			return sema.Grant{}, s.deferGrant(ctx, l, notify, true)
		}
		g, seq := s.grantOf(l), l.seq
		s.unlock()
		return s.deliver(ctx, l, g, seq)
	}
	if mode == modeNow {
		s.dropIfIdle(e)
		s.unlock()
		return sema.Grant{}, errMustWait
	}
	if !wait {
		err := s.heldError(e)
		s.dropIfIdle(e)
		s.unlock()
		return sema.Grant{}, err
	}
	w := &waiter{req: req, principal: who.Principal, admin: who.Admin, since: now, ready: make(chan struct{})}
	if notify != nil {
		w.notify, w.async = notify, &Wait{s: s, w: w, e: e}
	}
	if err := s.enqueue(e, w); err != nil {
		s.unlock()
		return sema.Grant{}, err
	}
	s.unlock()
	if notify != nil {
		return sema.Grant{}, queuedError{w.async}
	}

	select {
	case <-w.ready:
		if w.err != nil {
			return sema.Grant{}, w.err
		}
		s.mu.Lock()
		g, seq := s.grantOf(w.lease), w.lease.seq
		s.unlock()
		g.Waited = w.waited
		if w.early {
			return g, nil // covered by the name's durable FAST record (fast.go)
		}
		return s.deliver(ctx, w.lease, g, seq)
	case <-ctx.Done():
	}
	s.mu.Lock()
	select {
	case <-w.ready: // granted (or closed) just as ctx ended: give it back
		if w.err == nil {
			s.giveBackLocked(w.lease)
		}
	default:
		wasHead := e.waiters.head == w
		s.dequeue(e, w)
		if wasHead { // the head may have been blocking smaller requests
			s.grantWaiters(e, s.mono())
		}
		s.dropIfIdle(e)
	}
	s.unlock()
	return sema.Grant{}, notAcquired(ctx)
}

// deliver returns g once its grant record is on disk. If ctx ends first or
// the log fails, the lease is given back.
func (s *Store) deliver(ctx context.Context, l *lease, g sema.Grant, seq uint64) (sema.Grant, error) {
	if err := s.wal.wait(ctx, seq); err != nil {
		s.mu.Lock()
		s.giveBackLocked(l)
		s.unlock()
		return sema.Grant{}, s.waitError(ctx, err)
	}
	return g, nil
}

func (s *Store) waitError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return notAcquired(ctx)
	}
	return err
}

// giveBackLocked ends a grant its requester will not use, unless it has
// ended already (its holder released it by id, it expired, an admin).
func (s *Store) giveBackLocked(l *lease) {
	if l.hidx < 0 || s.closed {
		return
	}
	now := s.mono()
	s.endLocked(l, endGiveBack, now)
	s.grantWaiters(l.e, now)
	s.dropIfIdle(l.e)
}

func notAcquired(ctx context.Context) error {
	return fmt.Errorf("%w: %w", sema.ErrNotAcquired, context.Cause(ctx))
}

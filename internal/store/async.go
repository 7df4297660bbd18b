package store

import (
	"context"

	"github.com/sema-dev/sema"
)

// Waiting without a goroutine.
//
// A server answering a long poll need not park a goroutine per waiter:
// AcquireAsync queues the request and returns; the goroutine that grants
// it (a release, an expiry, a give-back…) or closes the store then calls
// the request's notify function, after it has let go of the store's lock
// (Store.unlock), so the answer can be written at once from there.

// Wait is a request queued by AcquireAsync.
type Wait struct {
	s *Store
	w *waiter
	e *entry
}

// AcquireAsync is AcquireAs with wait, except that a request that must
// wait is queued and returned as a *Wait at once (g is then zero). notify
// is called exactly once for it, unless Cancel dequeues it first: when it
// is granted or fails (the store closed), on the goroutine that did that,
// without the store's lock. notify must not block for long: see Early and
// Durable.
func (s *Store) AcquireAsync(ctx context.Context, req sema.Request, who Caller, notify func(*Wait)) (sema.Grant, *Wait, error) {
	return s.acquireMode(ctx, req, who, modeWait, notify)
}

// AcquireDeferred is AcquireAsync for a caller that must never block,
// such as a server's connection goroutine serving many calls: a request
// granted at once, or repeating the ID of a live lease, is reported
// through notify as well, once its grant is on disk, on the goroutine that
// made it so (the log's committer: notify must not block); Early is then
// true. With wait false, a request that would have to wait fails at once
// (a *sema.HeldError) instead of being queued. A nil Wait comes with the
// error that refused req; notify is then never called.
func (s *Store) AcquireDeferred(ctx context.Context, req sema.Request, who Caller, wait bool, notify func(*Wait)) (*Wait, error) {
	mode := modeTry
	if wait {
		mode = modeWait
	}
	_, err := s.acquireWait(ctx, req, who, mode, notify, true)
	if qw, ok := err.(queuedError); ok {
		return qw.w, nil
	}
	return nil, err
}

// deferGrant reports lease l, granted now (fresh) or repeated, through
// notify once its record is on disk; a fresh grant the log fails to make
// durable is given back. Callers hold s.mu, which it unlocks.
func (s *Store) deferGrant(ctx context.Context, l *lease, notify func(*Wait), fresh bool) error {
	w := &waiter{lease: l, early: true, ready: closedChan, notify: notify}
	w.async = &Wait{s: s, w: w, e: l.e}
	seq := l.seq
	s.unlock()
	s.wal.whenDurable(seq, func(err error) {
		if err != nil {
			if fresh {
				s.mu.Lock()
				s.giveBackLocked(l)
				s.unlock()
			}
			w.err = s.waitError(ctx, err)
		}
		notify(w.async)
	})
	return queuedError{w.async}
}

// Immediate reports whether the request was granted (or refused) without
// waiting in the queue: its notify reports when the grant is on disk.
func (wt *Wait) Immediate() bool { return wt.w.ready == closedChan }

// closedChan is the ready channel of a waiter that never waited.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// queueNotify records that w's notify must run. Callers hold s.mu.
func (s *Store) queueNotify(w *waiter) {
	if w.notify != nil {
		s.notify = append(s.notify, w)
	}
}

// unlock unlocks s.mu, then runs the notify functions of the waiters
// granted or failed meanwhile.
func (s *Store) unlock() {
	if len(s.notify) == 0 {
		s.mu.Unlock()
		return
	}
	ws := s.notify
	s.notify = nil
	s.mu.Unlock()
	for _, w := range ws {
		w.notify(w.async)
	}
}

// Result returns the grant (with how long it waited) or why it failed.
// Valid once notify has been called.
func (wt *Wait) Result() (sema.Grant, error) {
	w := wt.w
	if w.err != nil {
		return sema.Grant{}, w.err
	}
	wt.s.mu.Lock()
	g := wt.s.grantOf(w.lease)
	wt.s.unlock()
	g.Waited = w.waited
	return g, nil
}

// Early reports whether the grant may be answered at once: a handoff
// behind the name's durable FAST record (fast.go). Otherwise call
// Durable first, off the notifying goroutine.
func (wt *Wait) Early() bool { return wt.w.early }

// Durable returns once the grant is on disk. If ctx ends first or the log
// fails, the lease is given back.
func (wt *Wait) Durable(ctx context.Context) error {
	s, l := wt.s, wt.w.lease
	if err := s.wal.wait(ctx, l.seq); err != nil {
		s.mu.Lock()
		s.giveBackLocked(l)
		s.unlock()
		return s.waitError(ctx, err)
	}
	return nil
}

// GiveBack ends a grant its requester will not receive.
func (wt *Wait) GiveBack() {
	s := wt.s
	s.mu.Lock()
	if wt.w.err == nil {
		s.giveBackLocked(wt.w.lease)
	}
	s.unlock()
}

// Cancel dequeues the request if it still waits and reports whether it
// did; then notify is never called. False: it was granted or failed, and
// notify has been or will be called.
func (wt *Wait) Cancel() bool {
	s, w, e := wt.s, wt.w, wt.e
	s.mu.Lock()
	defer s.unlock()
	if w.cancelled {
		return false
	}
	select {
	case <-w.ready:
		return false
	default:
	}
	w.cancelled = true
	wasHead := e.waiters.head == w
	s.dequeue(e, w)
	if wasHead { // the head may have been blocking smaller requests
		s.grantWaiters(e, s.mono())
	}
	s.dropIfIdle(e)
	return true
}

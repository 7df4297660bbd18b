package store

import (
	"context"
	"fmt"

	"github.com/sema-dev/sema"
)

// Acquiring.
//
// The store has one way to acquire: AcquireAsync, which never blocks its
// caller. Its answer — the grant, once its record is on disk, or the error
// that refused it — is delivered exactly once, through a function, by
// whichever goroutine decides it: the caller (a refusal), the goroutine
// whose release or expiry granted a queued request, or the log's committer
// once a grant is durable. A server can so keep thousands of waiters
// without a goroutine each. TryAcquire, Acquire and AcquireAs wait for
// that answer.

// Pending is an acquire the store has taken on and not answered yet: it
// waits in its name's queue, or its grant waits for the disk.
type Pending struct {
	s *Store
	w *waiter
}

// AcquireAsync acquires req for who and calls done exactly once with the
// outcome: the grant once its record is on disk (a handoff on a contended
// name behind the name's durable FAST record is answered at once, see
// fast.go), or the error that refused it (a *sema.HeldError when wait is
// false and req would have to wait; sema.ErrClosed when the store closes
// first). With wait, a request that must wait is queued in its name's FIFO
// queue. A request repeating the ID of a live lease of the same name gets
// that lease, if who may see it.
//
// done runs without the store's lock, on the calling goroutine (before
// AcquireAsync returns, for a refusal), on the goroutine that granted the
// request, or on the log's committer. It must not block; it may call the
// store's methods that do not wait for the disk (Release, ReleaseAs).
//
// The Pending it returns (nil after a refusal) withdraws a queued request.
func (s *Store) AcquireAsync(req sema.Request, who Caller, wait bool, done func(sema.Grant, error)) *Pending {
	w := &waiter{req: req, principal: who.Principal, admin: who.Admin, done: done}
	if err := s.start(w, wait); err != nil {
		done(sema.Grant{}, err)
		return nil
	}
	return &Pending{s: s, w: w}
}

// start grants w, or queues it (with wait), or says why not. A grant's
// answer is sent once s.mu is unlocked (answer).
func (s *Store) start(w *waiter, wait bool) error {
	req := &w.req
	if err := req.Validate(); err != nil {
		return err
	}
	if len(w.principal) > maxPrincLen {
		return fmt.Errorf("store: %w: principal longer than %d bytes", sema.ErrInvalidArgument, maxPrincLen)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return sema.ErrClosed
	}
	now := s.mono()
	e, err := s.entryFor(req.Name, req.Limit, now)
	if err != nil {
		s.unlock()
		return err
	}
	if s.forced(req.Name, req.ID) { // a retry of a lease an admin force-released: never that lease again
		s.dropIfIdle(e)
		s.unlock()
		return fmt.Errorf("store: acquire %q: %w: lease id was force-released", req.Name, sema.ErrForceReleased)
	}
	if l := e.find(req.ID); l != nil { // a retry: the lease it got
		if !(Caller{Principal: w.principal, Admin: w.admin}).may(l) {
			s.unlock()
			return fmt.Errorf("store: acquire %q: %w", req.Name, ErrForbidden)
		}
		l.repeated = true
		w.lease, w.grant = l, s.grantOf(l)
		s.answerLater(w)
		s.unlock()
		return nil
	}
	if e.waiters.len == 0 && e.used+req.Weight <= e.limit && !s.fenced(e, now) {
		w.lease, _ = s.grantLocked(e, req, w.principal, now, false)
		w.grant, w.fresh = s.grantOf(w.lease), true
		s.answerLater(w)
		s.unlock()
		return nil
	}
	if !wait {
		err := s.heldError(e)
		s.dropIfIdle(e)
		s.unlock()
		return err
	}
	w.since = now
	err = s.enqueue(e, w)
	s.unlock()
	return err
}

// Cancel withdraws the request if it still waits in its queue and reports
// whether it did: then done is never called. Otherwise done has been or
// will be called, maybe with a grant the caller must release if it no
// longer wants it. Cancel of a nil Pending reports false.
func (p *Pending) Cancel() bool {
	if p == nil {
		return false
	}
	s, w := p.s, p.w
	s.mu.Lock()
	defer s.unlock()
	if !w.queued {
		return false
	}
	e := w.e
	wasHead := e.waiters.head == w
	s.dequeue(e, w)
	if wasHead { // the head may have been blocking smaller requests
		s.grantWaiters(e, s.mono())
	}
	s.dropIfIdle(e)
	return true
}

// answerLater records that w's answer must be sent once s.mu is unlocked.
// Callers hold s.mu.
func (s *Store) answerLater(w *waiter) { s.answers = append(s.answers, w) }

// unlock unlocks s.mu, then sends the answers decided meanwhile.
func (s *Store) unlock() {
	if len(s.answers) == 0 {
		s.mu.Unlock()
		return
	}
	ws := s.answers
	s.answers = nil
	s.mu.Unlock()
	for _, w := range ws {
		s.answer(w)
	}
}

// answer calls w's done with its outcome: at once for an error or an
// early handoff, else once its grant is on disk. A fresh grant the log
// fails to make durable is given back.
func (s *Store) answer(w *waiter) {
	switch {
	case w.err != nil:
		w.done(sema.Grant{}, w.err)
	case w.early:
		w.done(w.grant, nil)
	default:
		s.wal.whenDurable(w.lease.seq, func(err error) {
			if err != nil {
				if w.fresh {
					s.mu.Lock()
					s.giveBackLocked(w.lease)
					s.unlock()
				}
				w.done(sema.Grant{}, err)
				return
			}
			w.done(w.grant, nil)
		})
	}
}

// TryAcquire grants req if its permits are free and nobody waits.
func (s *Store) TryAcquire(ctx context.Context, req sema.Request) (sema.Grant, error) {
	return s.AcquireAs(ctx, req, Caller{Admin: true}, false)
}

// Acquire waits in the name's FIFO queue until granted or ctx is done.
func (s *Store) Acquire(ctx context.Context, req sema.Request) (sema.Grant, error) {
	return s.AcquireAs(ctx, req, Caller{Admin: true}, true)
}

// AcquireAs is AcquireAsync for a caller that waits for the answer, or for
// ctx to end: a request still queued is then withdrawn, and a fresh grant
// that comes anyway is given back.
func (s *Store) AcquireAs(ctx context.Context, req sema.Request, who Caller, wait bool) (sema.Grant, error) {
	if ctx.Err() != nil {
		return sema.Grant{}, notAcquired(ctx)
	}
	type outcome struct {
		g   sema.Grant
		err error
	}
	res := make(chan outcome, 1)
	p := s.AcquireAsync(req, who, wait, func(g sema.Grant, err error) { res <- outcome{g, err} })
	select {
	case o := <-res:
		return o.g, o.err
	case <-ctx.Done():
	}
	if p.Cancel() {
		return sema.Grant{}, notAcquired(ctx)
	}
	if o := <-res; o.err == nil && p != nil && p.w.fresh {
		s.mu.Lock()
		s.giveBackLocked(p.w.lease)
		s.unlock()
	}
	return sema.Grant{}, notAcquired(ctx)
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

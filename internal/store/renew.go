package store

import (
	"context"
	"fmt"
	"time"

	"github.com/sema-dev/sema"
)

// Renew extends a live lease by ttl from now.
func (s *Store) Renew(ctx context.Context, name, id string, ttl time.Duration) (sema.Grant, error) {
	return s.RenewAs(ctx, name, id, ttl, Caller{Admin: true})
}

// RenewAs extends a live lease of who by ttl from now. A TTL longer than
// any journaled for the lease is on disk before RenewAs returns. A lease
// of another principal is reported as an unknown one (expired).
func (s *Store) RenewAs(ctx context.Context, name, id string, ttl time.Duration, who Caller) (sema.Grant, error) {
	if err := sema.ValidateTTL(ttl); err != nil {
		return sema.Grant{}, err
	}
	s.mu.Lock()
	if s.closed {
		s.unlock()
		return sema.Grant{}, sema.ErrClosed
	}
	now := s.mono()
	l := s.lookup(name, id, now)
	if l != nil && !who.may(l) {
		// Answered as an unknown ID: a guesser learns nothing.
		l = nil
	}
	if l == nil {
		_, forced := s.revoked[name+"\x00"+id]
		s.unlock()
		if forced {
			return sema.Grant{}, fmt.Errorf("store: renew %q: %w", name, sema.ErrForceReleased)
		}
		return sema.Grant{}, fmt.Errorf("store: renew %q: %w", name, sema.ErrExpired)
	}
	l.renewed, l.expires = now, now+int64(ttl)
	s.heap.fix(l)
	seq := l.seq
	if ttl > l.ttl {
		l.ttl = ttl
		seq = s.wal.append(&record{kind: kindTTL, name: name, id: id, ttl: ttl}, true)
	}
	g := s.grantOf(l)
	s.unlock()
	if err := s.wal.wait(ctx, seq); err != nil {
		return sema.Grant{}, err
	}
	return g, nil
}

// withdraw takes a request of who queued under the lease ID id out of the
// queue, answering it ErrNotAcquired. Callers hold s.mu.
func (s *Store) withdraw(name, id string, who Caller) {
	w := s.queued[name+"\x00"+id]
	if w == nil || !(who.Admin || who.Principal == w.principal) {
		return
	}
	e := w.e
	wasHead := e.waiters.head == w
	s.dequeue(e, w)
	w.err = fmt.Errorf("store: acquire %q: withdrawn by a release of its lease id: %w", name, sema.ErrNotAcquired)
	s.answerLater(w)
	if wasHead {
		s.grantWaiters(e, s.mono())
	}
	s.dropIfIdle(e)
}

// lookup returns the live lease id of name, after expiring overdue holders.
func (s *Store) lookup(name, id string, now int64) *lease {
	e := s.names[name]
	if e == nil {
		return nil
	}
	s.expireEntry(e, now)
	l := e.find(id)
	if l == nil {
		s.dropIfIdle(e)
	}
	return l
}

// Release frees a lease by ID. Unknown or expired IDs → ErrNotHeld.
func (s *Store) Release(ctx context.Context, name, id string) error {
	return s.ReleaseAs(ctx, name, id, Caller{Admin: true})
}

// ReleaseAs frees a lease of who. The release is journaled but not waited
// for: losing it in a crash only keeps the permits held for one more TTL.
// A lease of another principal is reported as an unknown one (ErrNotHeld).
func (s *Store) ReleaseAs(_ context.Context, name, id string, who Caller) error {
	s.mu.Lock()
	defer s.unlock()
	if s.closed {
		return sema.ErrClosed
	}
	now := s.mono()
	l := s.lookup(name, id, now)
	if l == nil {
		s.withdraw(name, id, who)
	}
	if l == nil || !who.may(l) { // another's lease is answered as an unknown ID
		return fmt.Errorf("store: release %q: %w", name, sema.ErrNotHeld)
	}
	s.endLocked(l, endRelease, now)
	s.grantWaiters(l.e, now)
	s.dropIfIdle(l.e)
	s.maybeSnapshot()
	return nil
}

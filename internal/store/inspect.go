package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sema-dev/sema"
)

func (s *Store) holderList(e *entry) []sema.Holder {
	hs := make([]sema.Holder, 0, len(e.holders))
	for _, l := range e.holders {
		hs = append(hs, sema.Holder{
			ID: l.id, Owner: l.owner, Token: l.token, Weight: l.weight,
			AcquiredAt: s.wall(l.acquired), RenewedAt: s.wall(l.renewed), ExpiresAt: s.wall(l.expires),
			Host: l.host, PID: int(l.pid), ForceReleased: s.forced(e.name, l.id),
		})
	}
	slices.SortFunc(hs, func(a, b sema.Holder) int { return cmp.Compare(a.Token, b.Token) })
	if f := e.fence; f != nil {
		// Not a lease: shown so that nobody wonders why nothing is granted.
		hs = append(hs, sema.Holder{Owner: f.owner, AcquiredAt: s.wall(f.acquired),
			RenewedAt: s.wall(f.renewed), ExpiresAt: s.wall(f.expires)})
	}
	return hs
}

func (s *Store) status(e *entry) sema.Status {
	st := sema.Status{Name: e.name, Limit: e.limit, Used: e.used, Holders: s.holderList(e),
		Waiters: make([]sema.WaiterInfo, 0, e.waiters.len)}
	for w := e.waiters.head; w != nil; w = w.next {
		st.Waiters = append(st.Waiters, sema.WaiterInfo{
			Owner: w.req.Owner, Weight: w.req.Weight, Since: s.wall(w.since), Host: w.req.Host, PID: w.req.PID,
		})
	}
	return st
}

// Describe returns the holders and waiters of name.
func (s *Store) Describe(_ context.Context, name string) (sema.Status, error) {
	if err := sema.ValidateName(name); err != nil {
		return sema.Status{}, err
	}
	s.mu.Lock()
	defer s.unlock()
	if s.closed {
		return sema.Status{}, sema.ErrClosed
	}
	e := s.names[name]
	if e == nil {
		return sema.Status{Name: name, Holders: []sema.Holder{}, Waiters: []sema.WaiterInfo{}}, nil
	}
	s.expireEntry(e, s.mono())
	st := s.status(e)
	s.dropIfIdle(e)
	return st, nil
}

// List returns every name starting with prefix that has holders or
// waiters, sorted by name. It holds the store's lock while it copies the
// matching names: listing a million names pauses the store for a moment.
func (s *Store) List(_ context.Context, prefix string) ([]sema.Status, error) {
	if len(prefix) > sema.MaxNameLen {
		return nil, fmt.Errorf("store: %w: prefix longer than %d bytes", sema.ErrInvalidName, sema.MaxNameLen)
	}
	s.mu.Lock()
	if s.closed {
		s.unlock()
		return nil, sema.ErrClosed
	}
	now := s.mono()
	out := []sema.Status{}
	for name, e := range s.names {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		s.expireEntry(e, now)
		if len(e.holders) == 0 && e.waiters.len == 0 {
			s.dropIfIdle(e)
			continue
		}
		out = append(out, s.status(e))
	}
	s.unlock()
	slices.SortFunc(out, func(a, b sema.Status) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ForceRelease ends the lease id of name, or every lease of name if id is
// "". Unless opts.Now, the leases keep their permits until they expire or
// their holders release them, and a renew of them wraps
// sema.ErrForceReleased, also after a restart: the force-release is
// journaled, and answered once it is on disk.
func (s *Store) ForceRelease(ctx context.Context, name, id string, opts sema.ForceOptions) ([]sema.Holder, error) {
	if err := sema.ValidateName(name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	out, seq, err := s.forceLocked(name, id, opts)
	s.unlock()
	if err != nil {
		return nil, err
	}
	if err := s.wal.wait(ctx, seq); err != nil {
		return nil, err
	}
	var ids []string
	for _, h := range out {
		if h.ForceReleased {
			ids = append(ids, h.ID)
		}
	}
	s.notices.Tell(name, ids, opts.By)
	return out, nil
}

// NotifyForced makes the store call f for each lease it force-releases
// (sema.ForceNotifier): sema serve tells the holders connected to it.
func (s *Store) NotifyForced(f func(sema.ForceNotice)) (stop func()) { return s.notices.Add(f) }

// forceLocked force-releases under s.mu; seq is the last record it
// journaled.
func (s *Store) forceLocked(name, id string, opts sema.ForceOptions) (out []sema.Holder, seq uint64, err error) {
	if s.closed {
		return nil, 0, sema.ErrClosed
	}
	now := s.mono()
	for k, until := range s.revoked {
		if now > until {
			delete(s.revoked, k)
		}
	}
	e := s.names[name]
	if e == nil {
		return nil, 0, fmt.Errorf("store: force-release %q: %w", name, sema.ErrNotHeld)
	}
	s.expireEntry(e, now)
	for _, h := range s.holderList(e) {
		l := e.find(h.ID)
		if l == nil { // the recovery fence: an admin may lift it
			if id == "" {
				out = append(out, h)
				s.liftFence(e)
			}
			continue
		}
		if id != "" && h.ID != id {
			continue
		}
		h.ForceReleased = true
		out = append(out, h)
		if opts.Now {
			s.endLocked(l, endForce, now)
		} else if !s.forced(name, h.ID) {
			s.wal.append(&record{kind: kindRevoke, name: name, id: h.ID}, true)
		}
		s.revoked[name+"\x00"+h.ID] = l.expires
	}
	s.grantWaiters(e, now)
	s.dropIfIdle(e)
	if len(out) == 0 {
		return nil, 0, fmt.Errorf("store: force-release %q: %w", name, sema.ErrNotHeld)
	}
	return out, s.wal.appended(), nil
}

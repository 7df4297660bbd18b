package store

import (
	"fmt"
	"time"

	"github.com/sema-dev/sema"
)

// entry is the state of one name while it has holders or waiters.
type entry struct {
	name    string
	limit   int64
	used    int64
	holders []*lease // few per name; searched linearly
	waiters queue
	fence   *lease // after a crash: no grants before fence.expires (fast.go)
	fastTTL time.Duration
	fastSeq uint64 // log sequence number of the FAST record
	fast    bool   // handoffs may be answered before their fsync (fast.go)
}

// lease is one live grant. Times are nanoseconds on the store's monotonic
// clock (see Store.mono), so expiry never depends on wall-clock jumps.
type lease struct {
	e         *entry
	id        string
	owner     string
	host      string
	principal string
	token     uint64
	weight    int64
	ttl       time.Duration // the largest TTL journaled for it
	acquired  int64
	renewed   int64
	expires   int64
	seq       uint64 // log sequence number of its grant record
	pid       int32
	hidx      int32 // index in the expiry heap
}

func (e *entry) find(id string) *lease {
	for _, l := range e.holders {
		if l.id == id {
			return l
		}
	}
	return nil
}

func (e *entry) remove(l *lease) {
	for i, h := range e.holders {
		if h == l {
			last := len(e.holders) - 1
			e.holders[i] = e.holders[last]
			e.holders[last] = nil
			e.holders = e.holders[:last]
			e.used -= l.weight
			if len(e.holders) == 0 {
				e.holders = nil
			}
			return
		}
	}
}

// entryFor returns the entry of name, creating it, after expiring its
// overdue holders. It fails if limit disagrees with current holders or
// waiters. Callers hold s.mu.
func (s *Store) entryFor(name string, limit int64, now int64) (*entry, error) {
	e := s.names[name]
	if e == nil {
		e = &entry{name: name, limit: limit}
		s.names[name] = e
		return e, nil
	}
	s.expireEntry(e, now)
	if e.limit != limit {
		if len(e.holders) > 0 || e.waiters.len > 0 {
			return nil, fmt.Errorf("store: %q has limit %d, asked %d: %w", name, e.limit, limit, sema.ErrLimitMismatch)
		}
		e.limit = limit
	}
	return e, nil
}

// grantLocked creates a lease for req in e and journals it. The record is
// urgent (its caller waits for it to be on disk before answering) unless
// it is a handoff that may be answered early (fast.go): then nobody waits
// for it and it goes out with the next batch. early reports which.
func (s *Store) grantLocked(e *entry, req *sema.Request, principal string, now int64, handoff bool) (l *lease, early bool) {
	s.token++
	if e.fast {
		s.reserveTokens()
	}
	early = handoff && s.early(e, req.TTL, s.token)
	l = &lease{
		e: e, id: req.ID, owner: req.Owner, host: req.Host, principal: s.intern(principal),
		token: s.token, weight: req.Weight, ttl: req.TTL,
		acquired: now, renewed: now, expires: now + int64(req.TTL), pid: int32(req.PID),
	}
	e.holders = append(e.holders, l)
	e.used += l.weight
	s.heap.push(l)
	s.armTimer(l.expires)
	s.holders.Add(1)
	s.grants.Add(1)
	l.seq = s.wal.append(&record{
		kind: kindGrant, name: e.name, id: l.id, owner: l.owner, host: l.host, principal: l.principal,
		pid: req.PID, weight: l.weight, limit: e.limit, token: l.token, ttl: l.ttl,
		acquired: s.wall(now).UnixNano(),
	}, !early)
	return l, early
}

// endLocked removes a lease and journals why. It does not grant waiters:
// the caller does, after all its removals (grantWaiters).
func (s *Store) endLocked(l *lease, reason byte, now int64) {
	e := l.e
	e.remove(l)
	s.heap.remove(l)
	s.holders.Add(-1)
	s.wal.append(&record{kind: kindEnd, name: e.name, id: l.id, reason: reason}, false)
	if s.onEnd != nil {
		s.onEnd(Reason(reason), time.Duration(now-l.acquired))
	}
	switch reason {
	case endExpire:
		s.expirations.Add(1)
	case endForce:
		s.forceRelease.Add(1)
	}
}

// expireEntry ends the holders of e whose time is up and hands their
// permits to waiters.
func (s *Store) expireEntry(e *entry, now int64) {
	freed := false
	for i := 0; i < len(e.holders); {
		l := e.holders[i]
		if now >= l.expires {
			s.endLocked(l, endExpire, now)
			freed = true
			continue // remove swapped another holder into i
		}
		i++
	}
	if freed {
		s.grantWaiters(e, now)
	}
}

// grantWaiters grants queued requests in order while the head fits. It
// stops at the first that does not: no barging.
func (s *Store) grantWaiters(e *entry, now int64) {
	if e.waiters.len == 0 || s.fenced(e, now) {
		return
	}
	for w := e.waiters.head; w != nil; w = e.waiters.head {
		if e.used+w.req.Weight > e.limit {
			return
		}
		if !e.fast || w.req.TTL > e.fastTTL {
			s.armFast(e)
		}
		s.dequeue(e, w)
		w.lease, w.early = s.grantLocked(e, &w.req, w.principal, now, true)
		w.grant, w.fresh = s.grantOf(w.lease), true
		w.grant.Waited = time.Duration(now - w.since)
		s.handoffs.Add(1)
		if w.early {
			s.earlyHandoffs.Add(1)
		}
		s.answerLater(w)
	}
}

// dropIfIdle forgets a name nobody holds or waits for, once its fence is
// gone. A name that had fast handoffs journals that it is idle again.
func (s *Store) dropIfIdle(e *entry) {
	if len(e.holders) == 0 && e.waiters.len == 0 && e.fence == nil && s.names[e.name] == e {
		if e.fast {
			s.wal.append(&record{kind: kindUnfast, name: e.name}, false)
		}
		delete(s.names, e.name)
	}
}

func (s *Store) grantOf(l *lease) sema.Grant {
	return sema.Grant{
		Name: l.e.name, ID: l.id, Token: l.token, Owner: l.owner, Weight: l.weight, Limit: l.e.limit,
		AcquiredAt: s.wall(l.acquired), ExpiresAt: s.wall(l.expires),
	}
}

func (s *Store) heldError(e *entry) error {
	return &sema.HeldError{Name: e.name, Limit: e.limit, Holders: s.holderList(e), Waiters: e.waiters.len}
}

// intern returns a shared copy of a principal: there are few of them and
// every lease keeps one.
func (s *Store) intern(p string) string {
	if p == "" {
		return ""
	}
	if q, ok := s.principals[p]; ok {
		return q
	}
	if len(s.principals) < 4096 {
		s.principals[p] = p
	}
	return p
}

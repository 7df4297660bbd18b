package store

import "time"

// Fast handoff.
//
// Under contention every handoff (a release granting the next waiter) is
// on the critical path, and waiting for an fsync there caps a hot name at
// one handoff per fsync. So the first handoff on a name journals a FAST
// record (name, limit, ttl) and waits for it like any grant; once it is on
// disk, later handoffs on that name are answered before their own grant
// record is on disk, provided their TTL is within the recorded one and
// their token within a durable token reservation (RESERVE records, made
// well ahead of the counter). When the name goes idle an UNFAST record
// follows its last grant.
//
// After a crash such a grant may be unknown to the restarted store. So
// recovery fences every name with a FAST record not followed by UNFAST:
// it grants nothing on it until a full recorded TTL after the restart,
// by which time any holder of a lost grant has seen its local deadline
// pass (it could not renew after the crash). Leases of the name found on
// disk are honoured as usual, and the token counter resumes above every
// reservation, so tokens never go back.
//
// Nobody waits for the grant record of an early handoff, so it is not
// urgent: it goes out with the next batch (at most FlushDelay later)
// instead of starting an fsync of its own.

// reserveChunk is how far ahead of the counter tokens are reserved.
const reserveChunk = 1 << 20

type reservation struct {
	token uint64
	seq   uint64
}

// reserveTokens journals a reservation when the counter nears the last
// one. Callers hold s.mu.
func (s *Store) reserveTokens() {
	if s.token+reserveChunk/2 <= s.reserved {
		return
	}
	s.reserved = s.token + reserveChunk
	token := s.reserved
	seq := s.wal.append(&record{kind: kindReserve, token: token}, true)
	s.pendingRes = append(s.pendingRes, reservation{token, seq})
	// Once the record is on disk, mark it outside the log too (reserve.go).
	s.wal.whenDurable(seq, func(err error) {
		if err == nil {
			s.mark.wg.Add(1)
			go func() {
				defer s.mark.wg.Done()
				if err := s.mark.record(token); err != nil {
					s.log.Error("sema store: a lost end of the log could go unnoticed", "err", err)
				}
			}()
		}
	})
}

// durableReserve returns the largest token covered by a reservation on
// disk. Callers hold s.mu.
func (s *Store) durableReserve() uint64 {
	d := s.wal.durable.Load()
	for len(s.pendingRes) > 0 && s.pendingRes[0].seq <= d {
		s.resDurable = s.pendingRes[0].token
		s.pendingRes = s.pendingRes[1:]
	}
	return s.resDurable
}

// armFast journals that handoffs on e may be answered early, with a TTL
// bound covering every queued request. Callers hold s.mu.
func (s *Store) armFast(e *entry) {
	ttl := e.fastTTL
	for w := e.waiters.head; w != nil; w = w.next {
		ttl = max(ttl, w.req.TTL)
	}
	e.fast, e.fastTTL = true, ttl
	e.fastSeq = s.wal.append(&record{kind: kindFast, name: e.name, limit: e.limit, ttl: ttl}, true)
	s.reserveTokens()
}

// early reports whether a handoff on e with this TTL and token may be
// answered before its grant record is on disk. Callers hold s.mu.
func (s *Store) early(e *entry, ttl time.Duration, token uint64) bool {
	return e.fast && ttl <= e.fastTTL && s.wal.durable.Load() >= e.fastSeq && token <= s.durableReserve()
}

// fence makes e refuse grants until now+ttl. The fence is a pseudo-lease
// (token 0, not a holder) in the expiry heap. Callers hold s.mu.
func (s *Store) fence(e *entry, ttl time.Duration, now int64) {
	e.fast, e.fastTTL = true, ttl
	e.fence = &lease{e: e, acquired: now, renewed: now, expires: now + int64(ttl), owner: "(recovery fence)"}
	s.heap.push(e.fence)
}

// fenced reports whether e refuses grants at now, lifting a fence whose
// time is up. Callers hold s.mu.
func (s *Store) fenced(e *entry, now int64) bool {
	if e.fence == nil {
		return false
	}
	if now < e.fence.expires {
		return true
	}
	s.liftFence(e)
	return false
}

func (s *Store) liftFence(e *entry) {
	if e.fence.hidx >= 0 {
		s.heap.remove(e.fence)
	}
	e.fence = nil
}

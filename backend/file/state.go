package file

import (
	"slices"
	"time"

	"github.com/sema-dev/sema"
)

// state is the content of one name's state file: the holders and the FIFO
// queue of the semaphore, its counters, and recent force-releases.
type state struct {
	Name    string
	Limit   int64    // agreed limit; 0 when unknown (after a repair)
	Token   uint64   // last fencing token issued
	Ticket  uint64   // last queue ticket issued
	Boot    [16]byte // boot ID of the host when the file was last written
	Holders []holderRec
	Waiters []waiterRec // in ticket (arrival) order
	Revoked []revokedRec
}

// holderRec is one lease. Times are Unix nanoseconds on the host's wall
// clock. Slot and Nonce identify the open file (of one process) whose
// liveness lock vouches for the lease.
type holderRec struct {
	ID       string
	Owner    string
	Host     string
	PID      uint32
	Token    uint64
	Weight   int64
	Acquired int64
	Renewed  int64
	Expires  int64
	Slot     uint32
	Nonce    uint64
	// Phantom marks "unknown leases of whoever holds Slot", written when a
	// damaged file is repaired. It blocks every grant until that process
	// re-registers its leases, dies, or Expires passes.
	Phantom bool
}

// waiterRec is one queued request.
type waiterRec struct {
	Ticket uint64
	ID     string
	Owner  string
	Host   string
	PID    uint32
	Weight int64
	TTL    int64 // nanoseconds
	Since  int64
	Slot   uint32
	Nonce  uint64
}

// revokedRec remembers a force-released lease ID until Until, so that its
// holder's next renewal reports sema.ErrForceReleased. A force-released
// lease whose permits stay taken until its expiry (the default) keeps its
// holderRec beside it; its holder can no longer renew it.
type revokedRec struct {
	ID    string
	Until int64
}

// maxRevoked bounds the remembered force-releases per name.
const maxRevoked = 256

// revokedFor is how long a force-release is remembered after the lease's
// expiry: a waiter whose grant was force-released before it saw it (its
// process stopped, say) learns so when it runs again within this time,
// rather than being granted the same lease ID anew.
const revokedFor = 10 * time.Minute

func (s *state) used() int64 {
	var n int64
	for i := range s.Holders {
		n += s.Holders[i].Weight
	}
	return n
}

func (s *state) hasPhantom() bool { return s.phantomCount() > 0 }

func (s *state) phantomCount() int {
	n := 0
	for i := range s.Holders {
		if s.Holders[i].Phantom {
			n++
		}
	}
	return n
}

func (s *state) holder(id string) int {
	for i := range s.Holders {
		if !s.Holders[i].Phantom && s.Holders[i].ID == id {
			return i
		}
	}
	return -1
}

func (s *state) waiter(id string) int {
	for i := range s.Waiters {
		if s.Waiters[i].ID == id {
			return i
		}
	}
	return -1
}

func (s *state) revoked(id string) bool {
	for _, r := range s.Revoked {
		if r.ID == id {
			return true
		}
	}
	return false
}

// idle reports whether nobody holds or waits.
func (s *state) idle() bool { return len(s.Holders) == 0 && len(s.Waiters) == 0 }

// fits reports whether weight more permits can be granted now, ignoring
// the queue.
func (s *state) fits(weight int64) bool {
	return !s.hasPhantom() && s.used()+weight <= s.Limit
}

// nextToken issues a fencing token.
func (s *state) nextToken() uint64 {
	s.Token++
	return s.Token
}

// reapExpired drops leases whose time is up and stale force-release
// records. It reports whether anything changed.
func (s *state) reapExpired(now int64) bool {
	n := len(s.Holders) + len(s.Revoked)
	s.Holders = slices.DeleteFunc(s.Holders, func(h holderRec) bool { return now >= h.Expires })
	s.Revoked = slices.DeleteFunc(s.Revoked, func(r revokedRec) bool { return now >= r.Until })
	return n != len(s.Holders)+len(s.Revoked)
}

// dropSlot removes every holder, phantom and waiter vouched for by slot.
func (s *state) dropSlot(slot uint32) bool {
	n := len(s.Holders) + len(s.Waiters)
	s.Holders = slices.DeleteFunc(s.Holders, func(h holderRec) bool { return h.Slot == slot })
	s.Waiters = slices.DeleteFunc(s.Waiters, func(w waiterRec) bool { return w.Slot == slot })
	return n != len(s.Holders)+len(s.Waiters)
}

// revoke remembers a force-released lease until it would have expired.
func (s *state) revoke(id string, until int64) {
	s.Revoked = append(s.Revoked, revokedRec{ID: id, Until: until})
	if len(s.Revoked) > maxRevoked {
		s.Revoked = slices.Delete(s.Revoked, 0, len(s.Revoked)-maxRevoked)
	}
}

// earliestExpiry returns the first holder expiry, or 0 if none.
func (s *state) earliestExpiry() int64 {
	var first int64
	for i := range s.Holders {
		if e := s.Holders[i].Expires; first == 0 || e < first {
			first = e
		}
	}
	return first
}

func unixTime(ns int64) time.Time { return time.Unix(0, ns) }

func (s *state) grantOf(h *holderRec) sema.Grant {
	return sema.Grant{
		Name: s.Name, ID: h.ID, Token: h.Token, Owner: h.Owner, Weight: h.Weight, Limit: s.Limit,
		AcquiredAt: unixTime(h.Acquired), ExpiresAt: unixTime(h.Expires),
	}
}

func (h *holderRec) info() sema.Holder {
	out := sema.Holder{
		ID: h.ID, Owner: h.Owner, Token: h.Token, Weight: h.Weight, Host: h.Host, PID: int(h.PID),
		AcquiredAt: unixTime(h.Acquired), RenewedAt: unixTime(h.Renewed), ExpiresAt: unixTime(h.Expires),
	}
	if h.Phantom {
		out.Owner = "(unknown leases of a live process, pending repair)"
	}
	return out
}

// holderInfos lists the holders by token.
func (s *state) holderInfos() []sema.Holder {
	hs := make([]sema.Holder, 0, len(s.Holders))
	for i := range s.Holders {
		h := s.Holders[i].info()
		h.ForceReleased = len(s.Revoked) > 0 && !s.Holders[i].Phantom && s.revoked(h.ID)
		hs = append(hs, h)
	}
	slices.SortStableFunc(hs, func(a, b sema.Holder) int {
		switch {
		case a.Token < b.Token:
			return -1
		case a.Token > b.Token:
			return 1
		}
		return 0
	})
	return hs
}

func (s *state) status() sema.Status {
	st := sema.Status{Name: s.Name, Used: s.used(), Holders: s.holderInfos(), Waiters: []sema.WaiterInfo{}}
	if !s.idle() {
		st.Limit = s.Limit
	}
	for _, w := range s.Waiters {
		st.Waiters = append(st.Waiters, sema.WaiterInfo{
			Owner: w.Owner, Weight: w.Weight, Since: unixTime(w.Since), Host: w.Host, PID: int(w.PID),
		})
	}
	return st
}

func (s *state) heldError() error {
	return &sema.HeldError{Name: s.Name, Limit: s.Limit, Holders: s.holderInfos(), Waiters: len(s.Waiters)}
}

// maxSlots bounds the liveness slots of a name: the processes that can hold
// or wait for it at once.
const maxSlots = 1 << 16

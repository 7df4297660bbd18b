package file

import (
	"github.com/sema-dev/sema"
)

// decodeState decodes and validates a payload. Anything a correct writer
// cannot produce is errCorrupt: the caller then repairs the file rather than
// trusting it. in (nil for none) spares the work on strings seen before.
func decodeState(p []byte, in *interner) (*state, error) {
	r := &reader{b: p, in: in}
	st := &state{}
	if b := r.take(int(r.u8())); in != nil && in.name != "" && string(b) == in.name {
		st.Name = in.name
	} else {
		st.Name = string(b)
		if r.err == nil && sema.ValidateName(st.Name) != nil {
			r.fail("bad name %q", st.Name)
		}
	}
	st.Limit = r.i64()
	st.Token = r.u64()
	st.Ticket = r.u64()
	copy(st.Boot[:], r.take(len(st.Boot)))
	if r.err == nil && (st.Limit < 0 || st.Limit > sema.MaxLimit) {
		r.fail("limit %d out of range", st.Limit)
	}
	var ids map[string]bool
	if in != nil {
		ids = in.seen
		defer in.done()
	} else {
		ids = make(map[string]bool)
	}
	if n := r.count(minHolder); n > 0 {
		st.Holders = make([]holderRec, 0, n)
		for range n {
			st.Holders = append(st.Holders, readHolder(r, st, ids))
		}
	}
	if n := r.count(minWaiter); n > 0 {
		st.Waiters = make([]waiterRec, 0, n)
		for range n {
			st.Waiters = append(st.Waiters, readWaiter(r, st, ids))
		}
	}
	n := r.count(minRevoked)
	if r.err == nil && n > maxRevoked {
		r.fail("%d revoked ids, at most %d", n, maxRevoked)
	}
	for range n {
		st.Revoked = append(st.Revoked, revokedRec{ID: r.id(), Until: r.i64()})
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	if r.err == nil && st.used() > st.Limit {
		r.fail("holders use %d permits of limit %d", st.used(), st.Limit)
	}
	if r.err != nil {
		return nil, r.err
	}
	return st, nil
}

func readHolder(r *reader, st *state, ids map[string]bool) holderRec {
	var h holderRec
	flags := r.u8()
	h.Phantom = flags == 1
	if r.err == nil && flags > 1 {
		r.fail("holder flags %#x", flags)
	}
	if h.Phantom {
		if n := r.u8(); r.err == nil && n != 0 {
			r.fail("phantom with an id")
		}
	} else {
		h.ID = r.id()
	}
	h.Owner = r.text("owner")
	h.Host = r.text("host")
	h.PID = r.u32()
	h.Token = r.u64()
	h.Weight = r.i64()
	h.Acquired = r.i64()
	h.Renewed = r.i64()
	h.Expires = r.i64()
	h.Slot = r.u32()
	h.Nonce = r.u64()
	if r.err != nil {
		return h
	}
	switch {
	case h.Phantom && h.Weight != 0:
		r.fail("phantom with weight %d", h.Weight)
	case !h.Phantom && (h.Weight < 1 || h.Weight > st.Limit):
		r.fail("holder weight %d out of range [1, %d]", h.Weight, st.Limit)
	case !h.Phantom && (h.Token == 0 || h.Token > st.Token):
		r.fail("holder token %d beyond the counter %d", h.Token, st.Token)
	case h.Slot >= maxSlots:
		r.fail("slot %d out of range", h.Slot)
	case !h.Phantom && ids[h.ID]:
		r.fail("duplicate lease id %q", h.ID)
	}
	ids[h.ID] = !h.Phantom
	return h
}

func readWaiter(r *reader, st *state, ids map[string]bool) waiterRec {
	var w waiterRec
	w.Ticket = r.u64()
	w.ID = r.id()
	w.Owner = r.text("owner")
	w.Host = r.text("host")
	w.PID = r.u32()
	w.Weight = r.i64()
	w.TTL = r.i64()
	w.Since = r.i64()
	w.Slot = r.u32()
	w.Nonce = r.u64()
	if r.err != nil {
		return w
	}
	var prev uint64
	if n := len(st.Waiters); n > 0 {
		prev = st.Waiters[n-1].Ticket
	}
	switch {
	case w.Ticket <= prev || w.Ticket > st.Ticket:
		r.fail("waiter ticket %d out of order", w.Ticket)
	case w.Weight < 1 || w.Weight > st.Limit:
		r.fail("waiter weight %d out of range [1, %d]", w.Weight, st.Limit)
	case w.TTL < int64(sema.MinTTL) || w.TTL > int64(sema.MaxTTL):
		r.fail("waiter ttl %d out of range", w.TTL)
	case w.Slot >= maxSlots:
		r.fail("slot %d out of range", w.Slot)
	case ids[w.ID]:
		r.fail("duplicate lease id %q", w.ID)
	}
	ids[w.ID] = true
	return w
}

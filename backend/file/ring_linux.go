package file

import (
	"context"
	"slices"
	"strings"
	"time"
)

// A ring is a datagram to a doorbell. 'W' only says "read the state". 'G'
// carries grants, as the granting step wrote them into the state, for the
// waiters of one open file; 'F' names leases of one open file that a
// force-release ended, and who ended them, so that their holders learn at
// once:
//
//	'G', nonce of the open file, limit,
//	then per grant: token, weight, acquired, expires, ID length, ID
//	'F', nonce of the open file, by's length, by,
//	then per lease: ID length, ID
//
// (integers 8 bytes, little endian, but the 1-byte lengths of the strings).
const (
	ringHead  = 1 + 2*8
	grantSize = 4*8 + 1
	maxRing   = 1 << 16
)

// readAgain is the ring that only says "read the state".
var readAgain = []byte{'W'}

// grantRings encodes the grants hs (holders of st, all vouched for by one
// open file) in as few rings as fit.
func grantRings(st *state, hs []*holderRec) [][]byte {
	var out [][]byte
	var b []byte
	for _, h := range hs {
		if b != nil && len(b)+grantSize+len(h.ID) > maxRing {
			out, b = append(out, b), nil
		}
		if b == nil {
			b = append(make([]byte, 0, 256), 'G')
			b = appendU64(b, h.Nonce)
			b = appendI64(b, st.Limit)
		}
		b = appendU64(b, h.Token)
		b = appendI64(b, h.Weight)
		b = appendI64(b, h.Acquired)
		b = appendI64(b, h.Expires)
		b = appendStr(b, h.ID)
	}
	if b != nil {
		out = append(out, b)
	}
	return out
}

// heard acts on ring msg and reports whether it could use it (see deliver).
func (nf *nameFile) heard(msg []byte) bool {
	if len(msg) > 0 && msg[0] == 'F' {
		nf.forced(msg)
		return true
	}
	return nf.deliver(msg)
}

// deliver hands the grants in ring msg to the waiters they name and reports
// whether it could use the ring. A grant for a waiter that is gone (served
// by a step of its own, or given up: its step gives the permits back)
// counts as delivered. A ring that cannot be used (not a grant, not for
// this open file, for a waiter whose entry was lost, or damaged) makes the
// pump read the state.
//
// A grant that arrives after a repair of the state it was written in, by
// another process and not seen here yet, is used: that repair left this
// backend a phantom that blocks every grant until its next step here
// registers the lease again, as any lease held at the time of the damage.
// Once a step here has seen the waiter's entry gone (a repair by this
// backend leaves it no phantom), its grant comes from the state only: a
// late ring may bring the lost one.
func (nf *nameFile) deliver(msg []byte) bool {
	if len(msg) < ringHead+grantSize || msg[0] != 'G' {
		return false
	}
	r := reader{b: msg[1:]}
	nonce, limit := r.u64(), r.i64()
	if nf.lockLocal(context.Background()) != nil {
		return true // closed
	}
	defer nf.unlockLocal()
	if nonce != nf.nonce {
		return false
	}
	nf.raceSync()
	ok := true
	for len(r.b) > 0 && r.err == nil {
		token, weight, acquired, expires := r.u64(), r.i64(), r.i64(), r.i64()
		id := string(r.take(int(r.u8())))
		if r.err != nil {
			return false
		}
		w := nf.waiting[id]
		switch {
		case w == nil:
		case w.lost || w.req.Weight != weight || w.req.Limit != limit || token == 0 || expires <= time.Now().UnixNano():
			// (an expired grant: this process was stopped; whether the
			// lease is still there, only the state can tell)
			ok = false
		default:
			h := holderRec{ID: id, Owner: w.req.Owner, Host: w.req.Host, PID: pid32(w.req.PID), Token: token, Weight: weight,
				Acquired: acquired, Renewed: acquired, Expires: expires, Slot: uint32(nf.slot), Nonce: nonce}
			nf.grantLocal(w, &h, nf.name, limit)
		}
	}
	return ok && r.err == nil
}

// ringGrants rings the processes whose waiters st granted (the lease IDs
// granted), with their grants, and reports whether it rang any. Called
// after the state is written, under the state lock: the woken do not need
// it.
func (nf *nameFile) ringGrants(st *state, granted []string) bool {
	var bySlot map[uint32][]*holderRec
	for _, id := range granted {
		h := &st.Holders[st.holder(id)]
		if nf.ours(h.Slot, h.Nonce) {
			continue
		}
		if bySlot == nil {
			bySlot = make(map[uint32][]*holderRec)
		}
		bySlot[h.Slot] = append(bySlot[h.Slot], h)
	}
	for slot, hs := range bySlot {
		addr, err := nf.bellAddr(slot)
		if err != nil {
			continue
		}
		for _, msg := range grantRings(st, hs) {
			nf.b.ring.ring(addr, msg)
		}
	}
	return len(bySlot) > 0
}

// tellForced tells the holders of hs, which this step force-released (on
// behalf of by), at once: this backend's clients directly, other processes
// by an 'F' ring. Called after the state is written.
func (nf *nameFile) tellForced(hs []holderRec, by string) {
	if len(by) > 255 { // a ring's strings have a 1-byte length
		by = strings.ToValidUTF8(by[:255], "")
	}
	var ours []string
	rings := make(map[uint32][]byte)
	for _, h := range hs {
		if nf.ours(h.Slot, h.Nonce) {
			ours = append(ours, h.ID)
			continue
		}
		b := rings[h.Slot]
		if b == nil {
			b = appendStr(appendU64([]byte{'F'}, h.Nonce), by)
		}
		rings[h.Slot] = appendStr(b, h.ID)
	}
	nf.b.notices.Tell(nf.name, ours, by)
	for slot, msg := range rings {
		if addr, err := nf.bellAddr(slot); err == nil {
			nf.b.ring.ring(addr, msg)
		}
	}
}

// forced reads an 'F' ring: it tells this backend's clients of the leases
// it names that this open file holds. Without the doorbell a holder learns
// at its next renewal.
func (nf *nameFile) forced(msg []byte) {
	r := reader{b: msg[1:]}
	nonce := r.u64()
	by := string(r.take(int(r.u8())))
	var ids []string
	for len(r.b) > 0 && r.err == nil {
		ids = append(ids, string(r.take(int(r.u8()))))
	}
	if r.err != nil || nf.lockLocal(context.Background()) != nil {
		return
	}
	if nonce != nf.nonce {
		ids = nil // for a previous owner of the slot
	}
	ids = slices.DeleteFunc(ids, func(id string) bool { _, ok := nf.leases[id]; return !ok })
	nf.unlockLocal()
	nf.b.notices.Tell(nf.name, ids, by)
}

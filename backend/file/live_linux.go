package file

import "slices"

// Entries of dead processes are dropped from the state as far as a step's
// decision depends on them, not all at every step: the liveness check is
// one fcntl(2) per process, and a name with many waiting processes would
// pay for all of them at every step. A step asks about the queue's head
// before granting it or queueing behind it, and about the holders before
// concluding that a request does not fit, and about a lease's holder before
// renewing it (a lease of a dead process is lost). Whoever is woken by a
// death (aheadAlive) drops every dead entry.

// slotLife is the liveness of one slot, as found by this step.
type slotLife struct {
	slot  uint32
	alive bool
}

// alive reports whether the open file holding slot is alive. An error
// counts as alive: a later step asks again. Answers are kept for the
// step (begin forgets them). Called under the state lock.
func (nf *nameFile) alive(slot uint32) bool {
	if int64(slot) == nf.slot {
		return true
	}
	for _, l := range nf.lives {
		if l.slot == slot {
			return l.alive
		}
	}
	a, err := slotAlive(nf.rc, slot)
	a = a || err != nil
	nf.lives = append(nf.lives, slotLife{slot, a})
	return a
}

// dropDead removes the entries of a dead slot.
func (nf *nameFile) dropDead(st *state, slot uint32) {
	if st.dropSlot(slot) {
		nf.dirty = true
	}
}

// liveHolder returns the index of the lease id among st's holders, or -1
// if it is not there or its process is dead (then its entries go).
func (nf *nameFile) liveHolder(st *state, id string) int {
	i := st.holder(id)
	if i >= 0 && !nf.alive(st.Holders[i].Slot) {
		nf.dropDead(st, st.Holders[i].Slot)
		return -1
	}
	return i
}

// reapDead drops the entries of every dead process.
func (nf *nameFile) reapDead(st *state) {
	var slots []uint32
	for i := range st.Holders {
		slots = append(slots, st.Holders[i].Slot)
	}
	for i := range st.Waiters {
		slots = append(slots, st.Waiters[i].Slot)
	}
	slices.Sort(slots)
	for _, s := range slices.Compact(slots) {
		if !nf.alive(s) {
			nf.dropDead(st, s)
		}
	}
}

// reapHolders drops the holders of dead processes and reports whether
// there were any.
func (nf *nameFile) reapHolders(st *state) bool {
	reaped := false
	for i := 0; i < len(st.Holders); i++ {
		if s := st.Holders[i].Slot; !nf.alive(s) {
			nf.dropDead(st, s)
			reaped, i = true, -1
		}
	}
	return reaped
}

// mustWait reports whether a new request of weight must queue: someone
// alive is queued, or the live holders leave too little.
func (nf *nameFile) mustWait(st *state, weight int64) bool {
	for {
		switch {
		case len(st.Waiters) > 0 && nf.alive(st.Waiters[0].Slot):
			return true
		case len(st.Waiters) > 0:
			nf.dropDead(st, st.Waiters[0].Slot)
		case st.fits(weight):
			return false
		case !nf.reapHolders(st):
			return true
		}
	}
}

// grantQueue grants queued requests in order while the head fits: a later,
// smaller request never overtakes an earlier one. A dead head is dropped,
// not granted. It returns the lease IDs granted.
func (nf *nameFile) grantQueue(st *state, now int64) []string {
	var granted []string
	for len(st.Waiters) > 0 {
		w := st.Waiters[0]
		switch {
		case !nf.alive(w.Slot):
			nf.dropDead(st, w.Slot)
			continue
		case !st.fits(w.Weight) && !(nf.reapHolders(st) && st.fits(w.Weight)):
			return granted
		}
		st.Waiters = st.Waiters[1:]
		st.Holders = append(st.Holders, holderRec{
			ID: w.ID, Owner: w.Owner, Host: w.Host, PID: w.PID, Token: st.nextToken(), Weight: w.Weight,
			Acquired: now, Renewed: now, Expires: now + w.TTL, Slot: w.Slot, Nonce: w.Nonce,
		})
		granted = append(granted, w.ID)
		nf.dirty = true
	}
	st.Waiters = nil
	return granted
}

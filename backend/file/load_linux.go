package file

import (
	"cmp"
	"slices"
	"time"

	"github.com/sema-dev/sema"
)

// load reads the state under the state lock and brings it up to date:
// repairs a damaged file, re-registers this backend's entries after a
// repair, and drops expired leases and entries of dead processes. Changes
// set nf.dirty; the caller's commit writes them. The returned state may be
// the cache itself: every change must set nf.dirty.
func (nf *nameFile) load(now time.Time) (*state, error) {
	if nf.slot < 0 {
		if err := nf.takeSlot(); err != nil {
			return nil, err
		}
		// Reclaim removes a file only while no slot is held: from now on
		// ours keeps it, but it may have gone before.
		gone, err := nf.unlinked()
		if err != nil {
			return nil, nf.ioErr("stat", err)
		}
		if gone {
			nf.b.mu.Lock()
			nf.gone = true
			nf.b.mu.Unlock()
		}
	}
	if nf.gone {
		return nil, errGone
	}
	first := nf.rbuf[:0] // firstRead
	switch {
	case nf.cache != nil && !nf.changed:
		first = nf.rbuf[:min(headerSize, cap(nf.rbuf))] // the header: it likely still holds
	case nf.cache != nil:
		first = nf.rbuf[:cap(nf.rbuf)] // the whole record, about as long as the last one
	}
	snap, buf, err := readState(nf.rd, nf.name, nf.cache, nf.cacheHdr, first, nf.strs)
	nf.rbuf = buf[:0]
	nf.changed = nf.cache != nil && snap.st != nf.cache
	if nf.changed && nf.strs == nil {
		// Another process writes this name too: the records to come will
		// mostly repeat the strings of the one after this.
		nf.strs = newInterner(nf.name)
	}
	if err != nil {
		return nil, nf.ioErr("read", err)
	}
	st := snap.st
	repaired := false
	if st == nil {
		st, err = nf.repair(snap, now)
		if err != nil {
			return nil, err
		}
		repaired = true
	} else {
		nf.gen = snap.hdr.gen
		nf.cache, nf.cacheHdr = st, snap.hdr
		nf.phantoms = st.phantomCount()
	}
	if st.Boot != nf.b.boot && nf.b.boot != ([16]byte{}) {
		// Written before this boot: a machine crash may have lost writes
		// that were never flushed, so the counter may lag behind tokens
		// already issued. Jump past them (see tokenFloor).
		st.Boot = nf.b.boot
		st.Token = max(st.Token, tokenFloor(now))
		nf.dirty = true
	}
	// Entries of our slot with another nonce were left by a dead previous
	// owner of the slot (or by a repair, as a phantom).
	reclaim := repaired
	for i := range st.Holders {
		h := &st.Holders[i]
		if int64(h.Slot) == nf.slot && h.Nonce != nf.nonce {
			reclaim = reclaim || h.Phantom
			nf.dirty = true
		}
	}
	for i := range st.Waiters {
		if w := &st.Waiters[i]; int64(w.Slot) == nf.slot && w.Nonce != nf.nonce {
			nf.dirty = true
		}
	}
	if nf.dirty {
		st.Holders = slices.DeleteFunc(st.Holders, func(h holderRec) bool {
			return int64(h.Slot) == nf.slot && h.Nonce != nf.nonce
		})
		nf.dropWaiters(st, func(w *waiterRec) bool { return int64(w.Slot) == nf.slot && w.Nonce != nf.nonce })
	}
	if reclaim {
		nf.reclaim(st, now)
	} else if nf.orphans {
		nf.dropOrphans(st)
	}
	if st.reapExpired(now.UnixNano()) {
		nf.dirty = true
	}
	return st, nil
}

// tokenFloor is where the token counter restarts when it may have been
// lost: the wall clock in microseconds. It exceeds every token issued
// before, as long as the clock did not go back and fewer than one grant
// per microsecond was made on the name on average. It stays below 2^53
// (exact in JSON numbers) until the year 2255.
func tokenFloor(now time.Time) uint64 { return uint64(now.UnixMicro()) }

// repair rebuilds a damaged state. What it cannot see may be held by any
// live process with the file open, so every live slot but ours gets a
// phantom holder that blocks all grants until that process re-registers
// its leases and waiters (at its next step on the name), closes the file,
// dies, or MaxTTL passes. The limit is unknown until a re-registered lease
// sets it. The token counter restarts above any token issued before.
func (nf *nameFile) repair(snap snapshot, now time.Time) (*state, error) {
	live, err := liveSlots(nf.rc)
	if err != nil {
		return nil, nf.ioErr("list live processes", err)
	}
	st := &state{Name: nf.name, Boot: nf.b.boot, Token: tokenFloor(now)}
	nowNs := now.UnixNano()
	for _, s := range live {
		st.Holders = append(st.Holders, holderRec{
			Phantom: true, Slot: s, Acquired: nowNs, Renewed: nowNs, Expires: nowNs + int64(sema.MaxTTL),
		})
	}
	nf.b.log.Warn("file: repaired a damaged state file", "name", nf.name, "file", nf.path,
		"live_processes", len(live), "token_floor", st.Token)
	// Generations never repeat, even across repairs, so a cached state
	// can only match the record it came from.
	nf.gen = max(snap.gen, uint64(now.UnixNano()))
	nf.cache = nil
	nf.dirty = true
	nf.ringAll = true // every live process must re-register what it holds and awaits
	return st, nil
}

// reclaim re-registers this backend's live leases and waiters in a state
// rebuilt by a repair (ours or another process's). Leases come first and
// set the limit; waiters are queued again once the limit is known.
func (nf *nameFile) reclaim(st *state, now time.Time) {
	st.dropSlot(uint32(nf.slot))
	ls := make([]lease, 0, len(nf.leases))
	for _, l := range nf.leases {
		ls = append(ls, l)
	}
	slices.SortFunc(ls, func(a, b lease) int { return cmp.Compare(a.rec.Token, b.rec.Token) })
	for _, l := range ls {
		if st.Limit == 0 {
			st.Limit = l.limit
		}
		if now.UnixNano() >= l.rec.Expires || l.limit != st.Limit || st.used()+l.rec.Weight > st.Limit {
			// Expired, or in conflict with leases re-registered first (only
			// possible for a lease force-released meanwhile).
			nf.b.log.Warn("file: lease not re-registered after repair", "name", nf.name, "lease", l.rec.ID)
			delete(nf.leases, l.rec.ID)
			continue
		}
		l.rec.Slot, l.rec.Nonce = uint32(nf.slot), nf.nonce
		st.Holders = append(st.Holders, l.rec)
	}
	nf.dirty = true
	nf.requeueLost(st)
}

// dropOrphans removes our entries that no Acquire call waits for and no
// lease of ours matches: left by a waiter that failed or gave up without
// reaching the file.
func (nf *nameFile) dropOrphans(st *state) {
	n := len(st.Holders) + len(st.Waiters)
	st.Holders = slices.DeleteFunc(st.Holders, func(h holderRec) bool {
		_, held := nf.leases[h.ID]
		return nf.ours(h.Slot, h.Nonce) && !held && nf.waiting[h.ID] == nil
	})
	nf.dropWaiters(st, func(w *waiterRec) bool { return nf.ours(w.Slot, w.Nonce) && nf.waiting[w.ID] == nil })
	if n != len(st.Holders)+len(st.Waiters) {
		nf.dirty = true
	}
	nf.orphans = false
}

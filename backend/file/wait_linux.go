package file

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sema-dev/sema"
)

// waiter is an Acquire call of this backend queued in a state file.
type waiter struct {
	req   sema.Request
	start time.Time // when Acquire was called (monotonic)
	since int64     // when it was queued (wall clock, Unix ns)
	ch    chan result
	// lost: a step found its entry neither queued nor granted; a ring's
	// grant may be the lost entry's, so it is not used (see deliver)
	lost bool
}

type result struct {
	g   sema.Grant
	err error
}

// cleanupTimeout bounds the removal of a cancelled waiter from the queue.
const cleanupTimeout = 5 * time.Second

// commit finishes a step: grants queued requests that now fit, writes the
// state if it changed, hands grants to this backend's waiters, queues the
// rings of other processes' granted waiters (end sends them), and keeps
// the event sources (doorbell, inotify watch, pump timer) in line with the
// queue.
func (nf *nameFile) commit(st *state, now time.Time) error {
	granted := nf.grantQueue(st, now.UnixNano())
	if len(nf.waiting) > 0 && nf.bell == nil {
		// Before our waiters are in the file: a grant rings the doorbell.
		// If it cannot be bound (its previous owner is still exiting),
		// waiters poll until a later step binds it.
		if err := nf.openBell(); err != nil && nf.noBell == nil {
			nf.b.log.Warn("file: no doorbell; waiters poll", "name", nf.name, "every", nf.b.cfg.Poll, "err", err)
		}
		nf.noBell = nil
		if nf.bell == nil {
			nf.noBell = errors.New("no doorbell")
		}
	}
	if nf.dirty {
		if err := nf.write(st); err != nil {
			return err
		}
		if len(granted) > 0 {
			nf.rang = nf.ringGrants(st, granted)
		}
	}
	nf.dispatch(st)
	nf.watchIfNeeded(st)
	nf.scheduleWake(st, now)
	return nil
}

// ringAllPending rings every other live process on the name after a step
// that repaired the state or removed a phantom holder: they must
// re-register what they hold and wait for, or may now be granted. Called
// under lk, after the state lock is let go: the woken read the state.
func (nf *nameFile) ringAllPending() {
	if !nf.ringAll {
		return
	}
	nf.ringAll = false
	live, _ := liveSlots(nf.rc) // on error, their Recheck covers them
	for _, s := range live {
		if addr, err := nf.bellAddr(s); err == nil && int64(s) != nf.slot {
			nf.b.ring.ring(addr, readAgain)
		}
	}
}

// dispatch delivers the grants of our waiters found among the holders,
// whether this step or another process granted them.
func (nf *nameFile) dispatch(st *state) {
	if len(nf.waiting) == 0 {
		return
	}
	for i := range st.Holders {
		h := &st.Holders[i]
		w := nf.waiting[h.ID]
		if w == nil || !nf.ours(h.Slot, h.Nonce) {
			continue
		}
		if st.revoked(h.ID) {
			nf.fail(w, nf.forcedBeforeSeen()) // its entry goes at the next step
			continue
		}
		nf.grantLocal(w, h, st.Name, st.Limit)
	}
}

// grantLocal hands waiter w its grant h (of name, with limit), found in
// the state or brought by a ring. Called under lk.
func (nf *nameFile) grantLocal(w *waiter, h *holderRec, name string, limit int64) {
	delete(nf.waiting, h.ID)
	nf.leases[h.ID] = lease{rec: *h, limit: limit}
	g := sema.Grant{
		Name: name, ID: h.ID, Token: h.Token, Owner: h.Owner, Weight: h.Weight, Limit: limit,
		AcquiredAt: unixTime(h.Acquired), ExpiresAt: unixTime(h.Expires),
	}
	// The grant happened no earlier than since+Waited: the core's local
	// deadline counts from there.
	g.Waited = min(max(time.Duration(h.Acquired-w.since), 0), time.Since(w.start))
	w.ch <- result{g: g}
}

// forcedBeforeSeen is the error of a waiter whose grant was force-released
// before it saw it.
func (nf *nameFile) forcedBeforeSeen() error {
	return fmt.Errorf("file: acquire %q: granted, then force-released before it was seen: %w", nf.name, sema.ErrForceReleased)
}

// fail ends a waiter with err; its entry goes at the next step.
func (nf *nameFile) fail(w *waiter, err error) {
	delete(nf.waiting, w.req.ID)
	nf.orphans = true
	w.ch <- result{err: err}
}

// scheduleWake sets when the pump next re-reads the state without an
// event: at the earliest lease expiry, or after Recheck (Poll without a
// doorbell or inotify) as a guard against a lost event.
func (nf *nameFile) scheduleWake(st *state, now time.Time) {
	if len(nf.waiting) == 0 {
		return
	}
	d := nf.b.cfg.Recheck
	if (nf.noWatch || nf.bell == nil) && nf.hasForeign(st) {
		d = nf.b.cfg.Poll
	}
	if e := st.earliestExpiry(); e != 0 {
		d = max(min(d, time.Duration(e-now.UnixNano())+time.Millisecond), 0)
	}
	next := now.Add(d)
	if !nf.pumping || nf.inPump || next.Before(nf.nextWake) {
		nf.nextWake = next
		if nf.pumping && !nf.inPump {
			nf.poke() // the pump re-arms its timer
		}
	}
}

// poke wakes the pump to read the state.
func (nf *nameFile) poke() {
	select {
	case nf.kick <- struct{}{}:
	default:
	}
}

// closed wakes the pump to check whether a process it waits behind died.
func (nf *nameFile) closed() {
	select {
	case nf.died <- struct{}{}:
	default:
	}
}

// startPump starts the goroutine that re-reads the state on events while
// this backend has waiters on the name.
func (nf *nameFile) startPump() {
	if nf.pumping || len(nf.waiting) == 0 {
		return
	}
	nf.pumping = true
	go nf.pump(time.Until(nf.nextWake))
}

func (nf *nameFile) pump(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-nf.kick:
		case <-t.C:
		case <-nf.died:
			if nf.aheadAlive() {
				continue
			}
			nf.b.looks.Add(1)
			if nf.lockLocal(context.Background()) == nil {
				nf.reapAll = true
				nf.unlockLocal()
			}
		case <-nf.b.done:
			return
		}
		next, ok := nf.process()
		if !ok {
			return
		}
		t.Reset(time.Until(next))
	}
}

// process is one pump step; false when the pump should stop.
func (nf *nameFile) process() (time.Time, bool) {
	if err := nf.begin(context.Background()); err != nil {
		return time.Time{}, false // closed
	}
	defer nf.end()
	if len(nf.waiting) == 0 {
		nf.pumping = false
		return time.Time{}, false
	}
	now := time.Now()
	st, err := nf.load(now)
	if err == nil {
		if nf.reapAll {
			nf.reapAll = false
			nf.reapDead(st)
		}
		nf.requeueLost(st)
		nf.inPump = true
		err = nf.commit(st, now)
		nf.inPump = false
	}
	if err != nil {
		// The waiters get the error (sema.ErrUnavailable, or the version of
		// a file from a newer sema) rather than a silent retry loop.
		for _, w := range nf.waiting {
			nf.fail(w, err)
		}
	}
	if len(nf.waiting) == 0 {
		nf.pumping = false
		return time.Time{}, false
	}
	return nf.nextWake, true
}

// requeueLost queues again our waiters that are neither queued nor granted
// in the state: after a repair, or a grant that expired before we saw it.
// In arrival order; not while the limit is unknown.
func (nf *nameFile) requeueLost(st *state) {
	ws := make([]*waiter, 0, len(nf.waiting))
	for _, w := range nf.waiting {
		if st.holder(w.req.ID) < 0 && st.waiter(w.req.ID) < 0 {
			// A ring may still bring the grant it lost (in a state a
			// repair replaced, or that expired unseen): from now on its
			// grant is taken from the state only.
			w.lost = true
			ws = append(ws, w)
		}
	}
	slices.SortFunc(ws, func(a, b *waiter) int { return a.start.Compare(b.start) })
	for _, w := range ws {
		if st.revoked(w.req.ID) { // granted, then force-released unseen
			nf.fail(w, nf.forcedBeforeSeen())
			continue
		}
		switch err := nf.checkLimit(st, w.req.Limit); {
		case errors.Is(err, errLimitUnknown):
			return
		case err != nil:
			nf.fail(w, err)
		default:
			nf.enqueue(st, w)
		}
	}
}

// cancelWait takes a waiter whose ctx ended out of the queue, or gives its
// permits back if it was granted meanwhile.
func (nf *nameFile) cancelWait(ctx context.Context, w *waiter) error {
	err := fmt.Errorf("file: acquire %q: %w: %w", nf.name, sema.ErrNotAcquired, context.Cause(ctx))
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if e := nf.begin(cctx); e != nil {
		if !nf.b.isClosed() {
			// The state lock is stuck (a process hung inside a step): leave
			// the queue whenever it comes free.
			go nf.leaveLater(w)
		}
		return err
	}
	defer nf.end()
	nf.leave(w)
	return err
}

// leaveLater removes a given-up waiter once the state lock comes free.
func (nf *nameFile) leaveLater(w *waiter) {
	if nf.begin(context.Background()) == nil {
		nf.leave(w)
		nf.end()
	}
}

// leave takes w out of the queue, or gives back the permits it was granted
// meanwhile.
func (nf *nameFile) leave(w *waiter) {
	delete(nf.waiting, w.req.ID)
	select {
	case <-w.ch: // granted (or failed) just now: the holder entry goes below
	default:
	}
	delete(nf.leases, w.req.ID)
	nf.orphans = true // if this step fails, the next one drops the entry
	now := time.Now()
	st, err := nf.load(now)
	if err != nil {
		return
	}
	if nf.dropWaiters(st, func(q *waiterRec) bool { return q.ID == w.req.ID && nf.ours(q.Slot, q.Nonce) }) {
		nf.dirty = true
	}
	if i := st.holder(w.req.ID); i >= 0 {
		st.Holders = append(st.Holders[:i:i], st.Holders[i+1:]...)
		nf.dirty = true
	}
	if err := nf.commit(st, now); err != nil {
		nf.b.log.Warn("file: could not leave the queue", "name", nf.name, "lease", w.req.ID, "err", err)
	}
}

// dropWaiters removes the entries of our slot that drop selects from the
// queue, without a grant. On a name of limit 1 it rings the process of
// each foreign waiter left just behind one of them: that waiter watches
// only the process ahead of it (see aheadAlive), which may live on, so it
// must read the state again. It reports whether it removed any. Called
// under the state lock: the woken read the state once this step is done.
func (nf *nameFile) dropWaiters(st *state, drop func(*waiterRec) bool) bool {
	n := len(st.Waiters)
	kept := st.Waiters[:0]
	gap := false
	for _, w := range st.Waiters {
		if drop(&w) {
			gap = st.Limit == 1
			continue
		}
		if gap && !nf.ours(w.Slot, w.Nonce) {
			if addr, err := nf.bellAddr(w.Slot); err == nil {
				nf.b.ring.ring(addr, readAgain)
			}
		}
		gap = false
		kept = append(kept, w)
	}
	clear(st.Waiters[len(kept):n])
	st.Waiters = kept
	return len(kept) != n
}

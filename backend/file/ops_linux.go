package file

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sema-dev/sema"
)

// TryAcquire grants the request if its permits are free and nobody is
// queued; otherwise it returns a *sema.HeldError. It never waits for
// permits (it may wait briefly for the state lock, bounded by ctx).
func (b *Backend) TryAcquire(ctx context.Context, req sema.Request) (sema.Grant, error) {
	if err := req.Validate(); err != nil {
		return sema.Grant{}, err
	}
	var g sema.Grant
	err := b.step(ctx, req.Name, true, func(nf *nameFile, st *state, now time.Time) error {
		if st.revoked(req.ID) {
			return errors.Join(forcedRetry(req.Name), nf.commit(st, now))
		}
		if i := st.holder(req.ID); i >= 0 { // a retry of a granted request
			g = st.grantOf(&st.Holders[i])
			return nf.commit(st, now)
		}
		var err error
		switch {
		case st.waiter(req.ID) >= 0:
			err = st.heldError()
		default:
			err = nf.checkLimit(st, req.Limit)
			if errors.Is(err, errLimitUnknown) || err == nil && nf.mustWait(st, req.Weight) {
				nf.reapDead(st) // the answer lists the holders: live ones only
				err = st.heldError()
			}
		}
		if err != nil {
			if cerr := nf.commit(st, now); cerr != nil {
				return cerr
			}
			return err
		}
		g, err = nf.grantNow(st, &req, now)
		return err
	})
	if err != nil {
		return sema.Grant{}, err
	}
	return g, nil
}

// step runs fn on the current state of name under its state lock: the
// shape of every operation that is one read-modify-write (Acquire differs:
// it waits between steps). A missing file is created if create is set,
// else step returns an error wrapping errNoFile.
func (b *Backend) step(ctx context.Context, name string, create bool, fn func(nf *nameFile, st *state, now time.Time) error) error {
	nf, st, now, err := b.beginStep(ctx, name, create)
	if err != nil {
		return err
	}
	defer b.unref(nf)
	defer nf.end()
	return fn(nf, st, now)
}

// beginStep opens name's file (see ref), begins a step on it and loads the
// state. The caller ends the step with nf.end, then b.unref(nf). A file
// reclaimed under this backend is opened again.
func (b *Backend) beginStep(ctx context.Context, name string, create bool) (*nameFile, *state, time.Time, error) {
	for {
		nf, err := b.ref(name, create)
		if err != nil {
			return nil, nil, time.Time{}, err
		}
		if err := nf.begin(ctx); err != nil {
			b.unref(nf)
			return nil, nil, time.Time{}, err
		}
		now := time.Now() // for Acquire, also the start of any wait: a later start is the safe side
		st, err := nf.load(now)
		if err == nil {
			return nf, st, now, nil
		}
		nf.end()
		if err == errGone {
			b.forget(nf)
		}
		b.unref(nf)
		if err != errGone {
			return nil, nil, time.Time{}, err
		}
	}
}

// Acquire waits in the name's FIFO queue, shared by all processes, until
// the request is granted or ctx is done.
func (b *Backend) Acquire(ctx context.Context, req sema.Request) (sema.Grant, error) {
	if err := req.Validate(); err != nil {
		return sema.Grant{}, err
	}
	nf, st, now, err := b.beginStep(ctx, req.Name, true)
	if err != nil {
		return sema.Grant{}, notAcquired(ctx, err)
	}
	defer b.unref(nf)
	if st.revoked(req.ID) {
		err := errors.Join(forcedRetry(req.Name), nf.commit(st, now))
		nf.end()
		return sema.Grant{}, err
	}
	if i := st.holder(req.ID); i >= 0 {
		g := st.grantOf(&st.Holders[i])
		err := nf.commit(st, now)
		nf.end()
		return g, err
	}
	if st.waiter(req.ID) >= 0 || nf.waiting[req.ID] != nil {
		nf.end()
		return sema.Grant{}, fmt.Errorf("file: acquire %q: %w: lease id %q is already queued", req.Name, sema.ErrInvalidArgument, req.ID)
	}
	lerr := nf.checkLimit(st, req.Limit)
	if lerr != nil && !errors.Is(lerr, errLimitUnknown) {
		cerr := nf.commit(st, now)
		nf.end()
		return sema.Grant{}, errors.Join(lerr, cerr)
	}
	if lerr == nil && !nf.mustWait(st, req.Weight) {
		g, err := nf.grantNow(st, &req, now)
		nf.end()
		return g, err
	}
	w := &waiter{req: req, start: now, since: now.UnixNano(), ch: make(chan result, 1)}
	nf.waiting[req.ID] = w
	if lerr == nil {
		nf.enqueue(st, w)
	} // else the pump queues it once a repair completes (requeueLost)
	if err := nf.commit(st, now); err != nil {
		delete(nf.waiting, req.ID)
		nf.orphans = true
		nf.end()
		return sema.Grant{}, err
	}
	nf.startPump()
	nf.end()
	select {
	case r := <-w.ch:
		return r.g, r.err
	case <-ctx.Done():
		return sema.Grant{}, nf.cancelWait(ctx, w)
	case <-b.done:
		return sema.Grant{}, fmt.Errorf("file: acquire %q: %w", req.Name, sema.ErrClosed)
	}
}

// forcedRetry is the answer to an acquire repeating the ID of a lease an
// admin force-released: never that lease again.
func forcedRetry(name string) error {
	return fmt.Errorf("file: acquire %q: %w: lease id was force-released", name, sema.ErrForceReleased)
}

func notAcquired(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", sema.ErrNotAcquired, context.Cause(ctx))
	}
	return err
}

// errLimitUnknown: a repair left phantoms and no lease has re-registered
// the limit yet. Requests wait outside the queue until one does.
var errLimitUnknown = errors.New("limit unknown until a repair completes")

// checkLimit adopts limit if nobody holds or waits, else insists on it.
func (nf *nameFile) checkLimit(st *state, limit int64) error {
	if st.Limit == limit {
		return nil
	}
	if st.Limit == 0 && st.hasPhantom() {
		return errLimitUnknown
	}
	if st.Limit != 0 && !st.idle() {
		nf.reapDead(st) // only the living make the limit
	}
	if st.Limit != 0 && !st.idle() {
		return fmt.Errorf("file: %q has limit %d, asked %d: %w", st.Name, st.Limit, limit, sema.ErrLimitMismatch)
	}
	st.Limit = limit
	nf.dirty = true
	return nil
}

// grantNow grants req to this backend, commits and returns the grant.
func (nf *nameFile) grantNow(st *state, req *sema.Request, now time.Time) (sema.Grant, error) {
	ns := now.UnixNano()
	st.Holders = append(st.Holders, holderRec{
		ID: req.ID, Owner: req.Owner, Host: req.Host, PID: pid32(req.PID), Token: st.nextToken(),
		Weight: req.Weight, Acquired: ns, Renewed: ns, Expires: ns + int64(req.TTL),
		Slot: uint32(nf.slot), Nonce: nf.nonce,
	})
	h := st.Holders[len(st.Holders)-1]
	nf.dirty = true
	if err := nf.commit(st, now); err != nil {
		return sema.Grant{}, err
	}
	nf.leases[h.ID] = lease{rec: h, limit: st.Limit}
	return st.grantOf(&h), nil
}

func pid32(pid int) uint32 {
	if pid < 0 || pid > math.MaxUint32 {
		return 0
	}
	return uint32(pid)
}

// enqueue appends w to the queue.
func (nf *nameFile) enqueue(st *state, w *waiter) {
	st.Ticket++
	st.Waiters = append(st.Waiters, waiterRec{
		Ticket: st.Ticket, ID: w.req.ID, Owner: w.req.Owner, Host: w.req.Host, PID: pid32(w.req.PID),
		Weight: w.req.Weight, TTL: int64(w.req.TTL), Since: w.since, Slot: uint32(nf.slot), Nonce: nf.nonce,
	})
	nf.dirty = true
}

// Renew extends the live lease id of name to ttl from now.
func (b *Backend) Renew(ctx context.Context, name, id string, ttl time.Duration) (sema.Grant, error) {
	if err := sema.ValidateTTL(ttl); err != nil {
		return sema.Grant{}, err
	}
	if err := sema.ValidateName(name); err != nil {
		return sema.Grant{}, err
	}
	var g sema.Grant
	err := b.step(ctx, name, false, func(nf *nameFile, st *state, now time.Time) error {
		i := nf.liveHolder(st, id)
		if i < 0 || st.revoked(id) {
			if i < 0 {
				delete(nf.leases, id)
			}
			if err := nf.commit(st, now); err != nil {
				return err
			}
			if st.revoked(id) {
				return fmt.Errorf("file: renew %q: %w", name, sema.ErrForceReleased)
			}
			return fmt.Errorf("file: renew %q: %w", name, sema.ErrLeaseLost)
		}
		h := &st.Holders[i]
		h.Renewed, h.Expires = now.UnixNano(), now.UnixNano()+int64(ttl)
		rec := *h
		nf.dirty = true
		if err := nf.commit(st, now); err != nil {
			return err
		}
		if l, ok := nf.leases[id]; ok {
			l.rec = rec
			nf.leases[id] = l
		}
		g = st.grantOf(&rec)
		return nil
	})
	switch {
	case errors.Is(err, errNoFile):
		return sema.Grant{}, fmt.Errorf("file: renew %q: %w", name, sema.ErrLeaseLost)
	case err != nil:
		return sema.Grant{}, err
	}
	return g, nil
}

// Release frees the lease id of name. An unknown or expired id returns an
// error wrapping sema.ErrNotHeld and changes nothing.
func (b *Backend) Release(ctx context.Context, name, id string) error {
	if err := sema.ValidateName(name); err != nil {
		return err
	}
	notHeld := func() error { return fmt.Errorf("file: release %q: %w", name, sema.ErrNotHeld) }
	err := b.step(ctx, name, false, func(nf *nameFile, st *state, now time.Time) error {
		i := st.holder(id)
		if i >= 0 {
			st.Holders = slices.Delete(st.Holders, i, i+1)
			nf.dirty = true
			delete(nf.leases, id)
		}
		if err := nf.commit(st, now); err != nil {
			return err
		}
		if i < 0 {
			return notHeld()
		}
		if st.revoked(id) {
			return fmt.Errorf("file: release %q: %w", name, sema.ErrForceReleased)
		}
		return nil
	})
	if errors.Is(err, errNoFile) {
		return notHeld()
	}
	return err
}

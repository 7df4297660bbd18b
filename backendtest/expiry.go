package backendtest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

// waitDone waits for the lease to end, up to d.
func (e *env) waitDone(l *sema.Lease, d time.Duration) {
	e.t.Helper()
	select {
	case <-l.Done():
	case <-time.After(d):
		e.t.Fatalf("lease %s did not end within %v", l, d)
	}
}

// takeover is a waiter's grant of the permits of an old lease that was
// lost, and whether the old lease had ended when the grant arrived.
type takeover struct {
	l        *sema.Lease
	oldEnded bool
}

// takeOver waits in the peer's queue for the mutex that old holds. The
// order of the two events is read when the grant arrives, so a slow test
// goroutine cannot get it wrong.
func (e *env) takeOver(old *sema.Lease) <-chan takeover {
	ch := make(chan takeover, 1)
	go func() {
		l := e.mustAcquireBG(e.p.Mutex(old.Name()))
		ch <- takeover{l, old.Err() != nil}
	}()
	return ch
}

func testExpiry(t *testing.T, e *env) {
	name := e.name("ttl")
	ttl := e.cfg.TTL
	l := e.mustAcquire(e.c.Mutex(name), sema.WithTTL(ttl), sema.WithoutKeepalive())
	if _, err := e.p.Mutex(name).TryAcquire(e.ctx(10 * time.Second)); !errors.Is(err, sema.ErrNotAcquired) {
		t.Fatalf("TryAcquire while held: %v", err)
	}
	granted := e.takeOver(l)
	e.waitDone(l, 20*ttl)
	if !errors.Is(l.Err(), sema.ErrExpired) || !errors.Is(l.Err(), sema.ErrLeaseLost) {
		t.Errorf("Err = %v, want ErrExpired", l.Err())
	}
	g := await(t, granted, "the waiter for expired permits")
	if g.l == nil {
		t.FailNow()
	}
	if !g.oldEnded {
		t.Errorf("the waiter was granted before the holder's lease ended")
	}
	if g.l.Token() <= l.Token() {
		t.Errorf("token %d granted after the lease with token %d expired: not greater", g.l.Token(), l.Token())
	}
	// Releasing the expired lease reports the loss and leaves the new holder.
	if err := l.Release(context.Background()); !errors.Is(err, sema.ErrLeaseLost) {
		t.Errorf("Release of an expired lease: %v, want ErrLeaseLost", err)
	}
	if _, err := e.c.Mutex(name).TryAcquire(e.ctx(10 * time.Second)); !errors.Is(err, sema.ErrNotAcquired) {
		t.Fatalf("the new holder lost the mutex: %v", err)
	}
	e.mustRelease(g.l)
}

func testRefreshAfterExpiry(t *testing.T, e *env) {
	name := e.name("refresh")
	ttl := e.cfg.TTL
	l := e.mustAcquire(e.c.Mutex(name), sema.WithTTL(ttl), sema.WithoutKeepalive())
	if err := l.Refresh(e.ctx(10 * time.Second)); err != nil {
		t.Fatalf("Refresh of a live lease: %v", err)
	}
	e.waitDone(l, 20*ttl)
	// Wait until the backend has expired it too, then let another client
	// take and release it.
	l2 := e.mustAcquire(e.p.Mutex(name))
	e.mustRelease(l2)
	if err := l.Refresh(e.ctx(10 * time.Second)); !errors.Is(err, sema.ErrLeaseLost) {
		t.Fatalf("Refresh after expiry: %v, want ErrLeaseLost", err)
	}
	if _, err := e.b.Renew(e.ctx(10*time.Second), name, l.ID(), ttl); !errors.Is(err, sema.ErrLeaseLost) {
		t.Fatalf("backend Renew of an expired lease: %v, want ErrLeaseLost", err)
	}
	// Never re-created.
	if st := e.describe(name); len(st.Holders) != 0 {
		t.Fatalf("refresh re-created the lease: %+v", st.Holders)
	}
}

func testReleaseIdempotent(t *testing.T, e *env) {
	name := e.name("idem")
	l1 := e.mustAcquire(e.c.Mutex(name))
	e.mustRelease(l1)
	e.mustRelease(l1)
	l2 := e.mustAcquire(e.p.Mutex(name))
	e.mustRelease(l1)
	if err := e.b.Release(e.ctx(10*time.Second), name, l1.ID()); !errors.Is(err, sema.ErrNotHeld) {
		t.Errorf("backend Release of an old lease id: %v, want ErrNotHeld", err)
	}
	if _, err := e.c.Mutex(name).TryAcquire(e.ctx(10 * time.Second)); !errors.Is(err, sema.ErrNotAcquired) {
		t.Fatalf("releasing an old lease freed the newer one: %v", err)
	}
	if l2.Err() != nil {
		t.Fatalf("newer lease ended: %v", l2.Err())
	}
	e.mustRelease(l2)
}

// counting counts Renew calls and can stall them.
type counting struct {
	sema.Backend
	renews atomic.Int64
	stall  atomic.Bool
}

func (c *counting) Renew(ctx context.Context, name, id string, ttl time.Duration) (sema.Grant, error) {
	c.renews.Add(1)
	if c.stall.Load() {
		<-ctx.Done() // a backend that never answers
		return sema.Grant{}, fmt.Errorf("stalled: %w: %w", sema.ErrUnavailable, ctx.Err())
	}
	return c.Backend.Renew(ctx, name, id, ttl)
}

// testKeepalive: a lease with keepalive outlives its TTL, renewing itself,
// and no renewal starts after Release returns.
func testKeepalive(t *testing.T, e *env) {
	name := e.name("keep")
	ttl := e.cfg.TTL
	cb := &counting{Backend: e.b}
	start := time.Now()
	l := e.mustAcquire(sema.New(cb).Mutex(name), sema.WithTTL(ttl))
	// Wait for the renewals themselves, not for a time that should be
	// enough for them: three, and past the TTL the lease was granted with.
	for cb.renews.Load() < 3 || time.Since(start) < ttl+ttl/10 {
		select {
		case <-l.Done():
			t.Fatalf("lease with keepalive ended after %d renewals: %v", cb.renews.Load(), l.Err())
		case <-time.After(5 * time.Millisecond):
		}
		if time.Since(start) > hang {
			t.Fatalf("%d renewals in %v", cb.renews.Load(), hang)
		}
	}
	if _, err := e.p.Mutex(name).TryAcquire(e.ctx(10 * time.Second)); !errors.Is(err, sema.ErrNotAcquired) {
		t.Fatalf("lease with keepalive was not held after %d renewals, past its TTL: %v", cb.renews.Load(), err)
	}
	if st := e.describe(name); len(st.Holders) != 1 || st.Holders[0].Token != l.Token() || !st.Holders[0].ExpiresAt.After(l.AcquiredAt().Add(ttl)) {
		t.Errorf("after renewals: %+v; want token %d expiring after %v", st.Holders, l.Token(), l.AcquiredAt().Add(ttl))
	}
	e.mustRelease(l)
	after := cb.renews.Load()
	// A renewal after Release would come at the next renew time (TTL/3):
	// wait past two of them. Waiting longer never makes this fail.
	time.Sleep(ttl * 2 / 3)
	if n := cb.renews.Load(); n != after {
		t.Fatalf("%d renewals after Release returned", n-after)
	}
}

func testMaxHold(t *testing.T, e *env) {
	name := e.name("maxhold")
	ttl := e.cfg.TTL
	start := time.Now()
	l := e.mustAcquire(e.c.Mutex(name), sema.WithTTL(ttl), sema.WithMaxHold(ttl))
	e.waitDone(l, 20*ttl)
	if !errors.Is(l.Err(), sema.ErrMaxHold) || !errors.Is(l.Err(), sema.ErrLeaseLost) {
		t.Fatalf("Err = %v, want ErrMaxHold", l.Err())
	}
	if el := time.Since(start); el < ttl {
		t.Fatalf("lease ended after %v, before its max hold %v", el, ttl)
	}
	// Renewal stopped: the backend frees it by itself.
	l2 := e.mustAcquire(e.p.Mutex(name))
	e.mustRelease(l2)
	if err := l.Release(context.Background()); !errors.Is(err, sema.ErrLeaseLost) {
		t.Errorf("Release after max hold: %v, want ErrLeaseLost", err)
	}
}

// testStalledBackend: the holder's backend stops answering renewals. The
// lease's context must end before anyone else is granted.
func testStalledBackend(t *testing.T, e *env) {
	name := e.name("stall")
	ttl := e.cfg.TTL
	cb := &counting{Backend: e.b}
	l := e.mustAcquire(sema.New(cb).Mutex(name), sema.WithTTL(ttl))
	cb.stall.Store(true)
	granted := e.takeOver(l)
	e.waitDone(l, 20*ttl)
	if !errors.Is(l.Err(), sema.ErrExpired) {
		t.Errorf("Err = %v, want ErrExpired", l.Err())
	}
	g := await(t, granted, "the waiter for the stalled holder's permits")
	if g.l == nil {
		t.FailNow()
	}
	if !g.oldEnded {
		t.Errorf("another client was granted before the stalled holder's lease ended")
	}
	e.mustRelease(g.l)
	_ = l.Release(context.Background())
}

// testRefreshExtends: Refresh moves the backend's expiry, as ExpiresAt and
// Describe show, and the lease outlives the TTL it was granted with. The
// lease is refreshed at half its TTL and looked at after its first expiry
// has passed but before the refreshed one; a round that a stall pushed past
// the refreshed expiry proves nothing and is run again.
func testRefreshExtends(t *testing.T, e *env) {
	ttl := e.cfg.TTL
	for round := range 3 {
		name := e.name(fmt.Sprintf("extend%d", round))
		l := e.mustAcquire(e.c.Mutex(name), sema.WithTTL(ttl), sema.WithoutKeepalive())
		got := time.Now()
		exp0 := l.ExpiresAt()
		time.Sleep(ttl / 2)
		sent := time.Now()
		if err := l.Refresh(e.ctx(10 * time.Second)); err != nil {
			if errors.Is(err, sema.ErrLeaseLost) && time.Since(got) >= ttl-ttl/10 {
				t.Logf("round %d: the refresh was answered past the lease's expiry (a stall); again", round)
				_ = l.Release(context.Background())
				continue
			}
			t.Fatalf("Refresh of a live lease: %v", err)
		}
		// The backend granted before got and extended after sent.
		exp1 := l.ExpiresAt()
		if moved, least := exp1.Sub(exp0), sent.Sub(got)-time.Millisecond; moved < least {
			t.Errorf("Refresh after %v moved ExpiresAt by %v (from %v to %v)", sent.Sub(got), moved, exp0, exp1)
		}
		st := e.describe(name)
		if len(st.Holders) != 1 || st.Holders[0].ExpiresAt.Before(exp1.Add(-time.Millisecond)) {
			t.Errorf("after Refresh, Describe shows %+v; want the lease expiring at %v", st.Holders, exp1)
		}
		time.Sleep(time.Until(got.Add(ttl + ttl/4)))
		_, err := e.p.Mutex(name).TryAcquire(e.ctx(10 * time.Second))
		if time.Now().After(sent.Add(ttl - ttl/10)) {
			t.Logf("round %d: stalled past the refreshed expiry; again", round)
			_ = l.Release(context.Background())
			continue
		}
		if !errors.Is(err, sema.ErrNotAcquired) {
			t.Fatalf("after its first TTL, a refreshed lease's name: %v, want ErrNotAcquired (Refresh did not extend it)", err)
		}
		// Its local deadline (TTL/5 before the backend's expiry) may have
		// passed by now: the release may report the lease lost.
		_ = l.Release(context.Background())
		return
	}
	t.Fatal("every round stalled past the refreshed expiry")
}

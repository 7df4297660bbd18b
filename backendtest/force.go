package backendtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

// forceTTL is the TTL of the leases the force-release tests end: long
// enough that a waiter granted before the old lease's expiry shows, short
// enough to wait out.
const forceTTL = 3 * time.Second

func (e *env) forceReleaser() sema.ForceReleaser {
	e.t.Helper()
	fr, ok := e.b.(sema.ForceReleaser)
	if !ok {
		e.t.Skip("backend is not a ForceReleaser")
	}
	return fr
}

// forceOne force-releases every holder of name and checks that the one
// returned is l.
func (e *env) forceOne(name string, l *sema.Lease, opts sema.ForceOptions) sema.Holder {
	e.t.Helper()
	hs, err := e.forceReleaser().ForceRelease(e.ctx(10*time.Second), name, "", opts)
	if err != nil || len(hs) != 1 || hs[0].Token != l.Token() || hs[0].ID != l.ID() {
		e.t.Fatalf("ForceRelease(%+v) = %+v, %v; want the holder with token %d", opts, hs, err, l.Token())
	}
	return hs[0]
}

// testForceReleaseDelays: a default force-release ends the lease for its
// holder at once, but grants its permits to nobody before the lease's
// expiry, which is never before its holder's local deadline.
func testForceReleaseDelays(t *testing.T, e *env) {
	e.forceReleaser()
	name := e.name("delay")
	ctx := e.ctx(hang)
	sent := time.Now()
	l := e.mustAcquire(e.c.Mutex(name), sema.WithTTL(forceTTL), sema.WithoutKeepalive())
	waiting := make(chan *sema.Lease, 1)
	go func() { waiting <- e.mustAcquireBG(e.p.Mutex(name), sema.WithTTL(time.Minute)) }()
	e.waitQueued(name, 1)
	e.forceOne(name, l, sema.ForceOptions{})
	if err := l.Refresh(ctx); !errors.Is(err, sema.ErrForceReleased) {
		t.Fatalf("Refresh after force-release: %v, want ErrForceReleased", err)
	}
	if !errors.Is(l.Err(), sema.ErrForceReleased) {
		t.Fatalf("lease after a refresh reported it force-released: Err = %v", l.Err())
	}
	st := e.describe(name)
	if len(st.Holders) != 1 || !st.Holders[0].ForceReleased || st.Holders[0].Token != l.Token() || st.Used != 1 {
		t.Errorf("Describe after a force-release: %+v; want the old holder, force-released, its permit used", st)
	}
	// A second force-release finds the same lease and changes nothing.
	if hs := e.forceOne(name, l, sema.ForceOptions{}); !hs.ForceReleased {
		t.Errorf("a second force-release returned %+v; want it marked force-released", hs)
	}
	l2 := await(t, waiting, "the waiter after the old lease's expiry")
	if l2 == nil {
		t.FailNow()
	}
	// The old holder's local deadline was sent + TTL − TTL/5 at the latest.
	if early := time.Since(sent); early < forceTTL*4/5 {
		t.Errorf("waiter granted %v after the old lease was requested; its holder could believe it valid for %v", early, forceTTL*4/5)
	}
	if l2.Token() <= l.Token() {
		t.Errorf("token %d granted after the lease with token %d: not greater", l2.Token(), l.Token())
	}
	_ = l.Release(context.Background())
	e.mustRelease(l2)
}

// testForceReleaseNow: with Now the waiter is granted at once, also after
// a default force-release of the same lease.
func testForceReleaseNow(t *testing.T, e *env) {
	fr := e.forceReleaser()
	name := e.name("now")
	ctx := e.ctx(hang)
	l := e.mustAcquire(e.c.Mutex(name), sema.WithTTL(time.Minute))
	waiting := make(chan *sema.Lease, 1)
	go func() { waiting <- e.mustAcquireBG(e.p.Mutex(name), sema.WithTTL(time.Minute)) }()
	e.waitQueued(name, 1)
	e.forceOne(name, l, sema.ForceOptions{})
	e.forceOne(name, l, sema.ForceOptions{Now: true})
	l2 := await(t, waiting, "the waiter after a force-release now")
	if l2 == nil {
		t.FailNow()
	}
	if l2.Token() <= l.Token() {
		t.Errorf("token %d granted after the lease with token %d: not greater", l2.Token(), l.Token())
	}
	if err := l.Refresh(ctx); !errors.Is(err, sema.ErrForceReleased) {
		t.Fatalf("Refresh after force-release: %v, want ErrForceReleased", err)
	}
	// By id: only that lease goes.
	if _, err := fr.ForceRelease(ctx, name, "notalease", sema.ForceOptions{Now: true}); !errors.Is(err, sema.ErrNotHeld) {
		t.Errorf("ForceRelease of an unknown id: %v, want ErrNotHeld", err)
	}
	if l2.Err() != nil {
		t.Fatal("force-release of another id ended the holder")
	}
	if hs, err := fr.ForceRelease(ctx, name, l2.ID(), sema.ForceOptions{Now: true}); err != nil || len(hs) != 1 {
		t.Fatalf("ForceRelease by id = %+v, %v", hs, err)
	}
	if _, err := fr.ForceRelease(ctx, name, "", sema.ForceOptions{}); !errors.Is(err, sema.ErrNotHeld) {
		t.Errorf("ForceRelease of a free name: %v, want ErrNotHeld", err)
	}
	if st := e.describe(name); len(st.Holders) != 0 || st.Used != 0 {
		t.Errorf("Describe after force-releases now: %+v; want no holder", st)
	}
	_ = l.Release(context.Background())
	_ = l2.Release(context.Background())
}

// testForceReleasedHolderReleases: the old holder's Release frees the
// permits of a force-released lease at once (its holder is done with
// them) and says the lease was force-released.
func testForceReleasedHolderReleases(t *testing.T, e *env) {
	e.forceReleaser()
	name := e.name("holder-releases")
	l := e.mustAcquire(e.c.Mutex(name), sema.WithTTL(time.Minute))
	waiting := make(chan *sema.Lease, 1)
	go func() { waiting <- e.mustAcquireBG(e.p.Mutex(name), sema.WithTTL(time.Minute)) }()
	e.waitQueued(name, 1)
	e.forceOne(name, l, sema.ForceOptions{})
	if err := e.b.Release(e.ctx(10*time.Second), name, l.ID()); !errors.Is(err, sema.ErrForceReleased) {
		t.Errorf("backend Release of a force-released lease: %v, want ErrForceReleased", err)
	}
	l2 := await(t, waiting, "the waiter after the old holder released")
	if l2 == nil {
		t.FailNow()
	}
	if err := l.Release(context.Background()); !errors.Is(err, sema.ErrLeaseLost) {
		t.Errorf("Lease.Release after the lease was force-released and freed: %v, want ErrLeaseLost", err)
	}
	if l2.Err() != nil {
		t.Errorf("the old holder's release ended the new holder: %v", l2.Err())
	}
	e.mustRelease(l2)
}

// testForceReleaseReopen: a default force-release outlives a close and
// reopen of the backend (a restart of its server): the lease can no longer
// be renewed, and its permits stay taken until it ends.
func testForceReleaseReopen(t *testing.T, e *env) {
	e.forceReleaser()
	if e.cfg.Reopen == nil {
		t.Skip("no Config.Reopen: backend state does not outlive it")
	}
	ctx := e.ctx(hang)
	name := e.name("forced-reopen")
	holder := func() sema.Backend {
		if e.cfg.ReopenEndsLeases {
			return e.peer // the reopened handle's own leases end with it
		}
		return e.b
	}
	g, err := holder().TryAcquire(ctx, request(name, "forced1", 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	if hs, err := e.forceReleaser().ForceRelease(ctx, name, "", sema.ForceOptions{}); err != nil || len(hs) != 1 {
		t.Fatalf("ForceRelease = %+v, %v", hs, err)
	}
	e.b = e.cfg.Reopen(t, e.b)
	if _, err := holder().Renew(ctx, name, g.ID, time.Minute); !errors.Is(err, sema.ErrForceReleased) {
		t.Errorf("after reopen, Renew of the force-released lease: %v, want ErrForceReleased", err)
	}
	st := e.describe(name)
	if len(st.Holders) != 1 || !st.Holders[0].ForceReleased || st.Holders[0].Token != g.Token || st.Used != 1 {
		t.Errorf("after reopen, Describe = %+v; want the force-released lease, marked so, its permit used", st)
	}
	var he *sema.HeldError
	if _, err := e.b.TryAcquire(ctx, request(name, "other", 1, 1)); !errors.As(err, &he) {
		t.Errorf("after reopen, another request for the name: %v, want a *HeldError (the permit stays taken)", err)
	}
	if _, err := e.forceReleaser().ForceRelease(ctx, name, "", sema.ForceOptions{Now: true}); err != nil {
		t.Errorf("ForceRelease now after reopen: %v", err)
	}
}

// testForceReleasedIDNotGrantedAgain: an acquire repeating the ID of a
// lease an admin force-released (a client that lost the answer to its
// acquire and tries again) is never answered with that lease, as if its
// caller still held it. While the lease's permits stay taken (the
// lock-delay), TryAcquire is refused; a Blocker's Acquire is refused, or
// waits and makes a new grant that really holds the permit, with a
// greater token.
func testForceReleasedIDNotGrantedAgain(t *testing.T, e *env) {
	fr := e.forceReleaser()
	ctx := e.ctx(hang)
	name := e.name("forced-retry")
	req := request(name, "forced-retry1", 1, 1)
	req.TTL = forceTTL
	g, err := e.b.TryAcquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if hs, err := fr.ForceRelease(ctx, name, req.ID, sema.ForceOptions{}); err != nil || len(hs) != 1 {
		t.Fatalf("ForceRelease = %+v, %v", hs, err)
	}
	refused := func(err error) bool {
		return errors.Is(err, sema.ErrForceReleased) || errors.Is(err, sema.ErrNotAcquired)
	}
	if g2, err := e.b.TryAcquire(ctx, req); !refused(err) {
		t.Errorf("TryAcquire repeating the force-released ID = %+v, %v; want ErrForceReleased or ErrNotAcquired", g2, err)
	}
	if bl, ok := e.b.(sema.Blocker); ok {
		g2, err := bl.Acquire(ctx, req)
		switch {
		case err == nil && g2.Token <= g.Token:
			t.Errorf("Acquire repeating the force-released ID answered token %d, the force-released lease's %d", g2.Token, g.Token)
		case err == nil:
			if st := e.describe(name); len(st.Holders) != 1 || st.Holders[0].Token != g2.Token {
				t.Errorf("after the repeated grant: %+v; want one holder with token %d", st, g2.Token)
			}
			if err := e.b.Release(ctx, name, req.ID); err != nil {
				t.Errorf("Release of the repeated grant: %v", err)
			}
		case !refused(err):
			t.Errorf("Acquire repeating the force-released ID: %v; want a new grant, ErrForceReleased or ErrNotAcquired", err)
		}
	}
	// The name still works once the force-released lease is gone.
	l := e.mustAcquire(e.p.Mutex(name))
	if l.Token() <= g.Token {
		t.Errorf("token %d after the force-released lease's %d", l.Token(), g.Token)
	}
	e.mustRelease(l)
}

// testForceReleaseOfAWaiter: a force-release names holders only. One that
// names a queued request's ID finds no holder (ErrNotHeld) and leaves the
// request queued, to be granted in its turn.
func testForceReleaseOfAWaiter(t *testing.T, e *env) {
	fr := e.forceReleaser()
	ctx := e.ctx(hang)
	name := e.name("forced-waiter")
	holder, waiter, got := e.queuedBehind(ctx, name, "fw-holder", "fw-waiter")
	for _, now := range []bool{false, true} {
		if hs, err := fr.ForceRelease(ctx, name, waiter.ID, sema.ForceOptions{Now: now}); !errors.Is(err, sema.ErrNotHeld) {
			t.Errorf("ForceRelease (now %v) of a queued request's ID = %+v, %v; want ErrNotHeld", now, hs, err)
		}
	}
	if st := e.describe(name); len(st.Holders) != 1 || len(st.Waiters) != 1 {
		t.Errorf("after force-releases of the waiter's ID: %+v; want the holder and the waiter", st)
	}
	if err := e.b.Release(ctx, name, holder.ID); err != nil {
		t.Fatal(err)
	}
	r := await(t, got, "the waiter after the holder released")
	if r.err != nil {
		t.Fatalf("the waiter: %v", r.err)
	}
	if err := e.b.Release(ctx, name, waiter.ID); err != nil {
		t.Error(err)
	}
}

// testForceReleaseTold: a backend that tells holders of force-releases
// (sema.ForceNotifier) ends the holder's lease at once, long before its
// next renewal would, also when the force-release comes through another
// handle (as sema release --force, another process, does), and tells who
// force-released it.
func testForceReleaseTold(t *testing.T, e *env) {
	e.forceReleaser()
	if _, ok := e.b.(sema.ForceNotifier); !ok || e.cfg.NoForceNotice {
		t.Skip("holders learn of a force-release at their next renewal")
	}
	const ttl = time.Minute // the first renewal comes after TTL/3
	name := e.name("told")
	l := e.mustAcquire(e.c.Mutex(name), sema.WithTTL(ttl))
	time.Sleep(e.cfg.ForceNoticeAfter)
	const by = "operator ☂ on host-1"
	if hs, err := e.p.ForceRelease(e.ctx(hang), name, l.ID(), sema.ForceBy(by)); err != nil || len(hs) != 1 {
		t.Fatalf("ForceRelease through the peer = %+v, %v", hs, err)
	}
	select {
	case <-l.Done():
	case <-time.After(ttl / 6):
		t.Fatalf("the holder was not told of the force-release within %v (its next renewal is %v after the grant)", ttl/6, ttl/3)
	}
	var fe *sema.ForcedError
	// (A server may add who the caller is as it knows it.)
	if !errors.As(l.Err(), &fe) || !strings.HasPrefix(fe.By, by) || !errors.Is(l.Err(), sema.ErrForceReleased) || !errors.Is(l.Err(), sema.ErrLeaseLost) {
		t.Errorf("lease ended with %v, want a *sema.ForcedError by %q (ErrForceReleased, ErrLeaseLost)", l.Err(), by)
	}
	_ = l.Release(context.Background())
}

package backendtest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

func testTokens(t *testing.T, e *env) {
	a, b := e.name("tok-a"), e.name("tok-b")
	var last uint64
	for i := range 10 {
		name := a
		c := e.client(i)
		l := e.mustAcquire(c.Mutex(name))
		if l.Token() <= last {
			t.Fatalf("token %d after %d: not strictly increasing", l.Token(), last)
		}
		last = l.Token()
		e.mustRelease(l)
		e.mustRelease(e.mustAcquire(e.c.Mutex(b))) // another name in between
	}
	// Concurrent holders of a semaphore get distinct tokens.
	s := e.c.Semaphore(e.name("tok-s"), 3)
	seen := map[uint64]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for range 10 {
				l := e.mustAcquireBG(s)
				if l == nil {
					return
				}
				mu.Lock()
				if seen[l.Token()] {
					t.Errorf("token %d granted twice", l.Token())
				}
				seen[l.Token()] = true
				mu.Unlock()
				_ = l.Release(context.Background())
			}
		})
	}
	wg.Wait()
}

func testTokensReopen(t *testing.T, e *env) {
	if e.cfg.Reopen == nil {
		t.Skip("no Config.Reopen: backend state does not outlive it")
	}
	name := e.name("reopen")
	l := e.mustAcquire(e.c.Mutex(name))
	before := l.Token()
	e.mustRelease(l)
	e.b = e.cfg.Reopen(t, e.b)
	c := sema.New(e.b)
	l2 := e.mustAcquire(c.Mutex(name))
	if l2.Token() <= before {
		t.Fatalf("token %d after reopen, was %d: went back", l2.Token(), before)
	}
	e.mustRelease(l2)
}

// testReopenHeld: a lease held while the backend is closed and opened
// again stays held, renewable and releasable by its ID through the new
// handle, and the token after it is greater. With ReopenEndsLeases, the
// lease is held through the peer, and the leases of the closed handle must
// be gone.
func testReopenHeld(t *testing.T, e *env) {
	if e.cfg.Reopen == nil {
		t.Skip("no Config.Reopen: backend state does not outlive it")
	}
	ctx := e.ctx(hang)
	name, mine := e.name("held"), e.name("mine")
	holder := e.b
	if e.cfg.ReopenEndsLeases {
		holder = e.peer
	}
	g, err := holder.TryAcquire(ctx, request(name, "held1", 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	gm, err := e.b.TryAcquire(ctx, request(mine, "mine1", 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	e.b = e.cfg.Reopen(t, e.b)
	var he *sema.HeldError
	if _, err := e.b.TryAcquire(ctx, request(name, "other", 1, 1)); !errors.As(err, &he) {
		t.Fatalf("after reopen, another request for the held mutex: %v, want a *HeldError", err)
	}
	if len(he.Holders) != 1 || he.Holders[0].Token != g.Token {
		t.Errorf("after reopen, HeldError holders = %+v, want the lease with token %d", he.Holders, g.Token)
	}
	if st := e.describe(name); len(st.Holders) != 1 || st.Holders[0].Token != g.Token || st.Used != 1 {
		t.Errorf("after reopen, Describe = %+v, want the lease with token %d", st, g.Token)
	}
	rg, err := e.b.Renew(ctx, name, "held1", time.Minute)
	if err != nil {
		t.Fatalf("after reopen, Renew of the held lease: %v", err)
	}
	if rg.Token != g.Token || rg.ExpiresAt.Before(g.ExpiresAt) {
		t.Errorf("after reopen, Renew = %+v; want token %d and an expiry from now, after %v", rg, g.Token, g.ExpiresAt)
	}
	if err := e.b.Release(ctx, name, "held1"); err != nil {
		t.Fatalf("after reopen, Release of the held lease: %v", err)
	}
	g2, err := e.b.TryAcquire(ctx, request(name, "after", 1, 1))
	if err != nil {
		t.Fatalf("after the release, the mutex is not free: %v", err)
	}
	if g2.Token <= g.Token {
		t.Errorf("token %d after reopen and release, was %d: not greater", g2.Token, g.Token)
	}
	_ = e.b.Release(ctx, name, g2.ID)
	if e.cfg.ReopenEndsLeases {
		// Declared: closing the handle ended its lease, as its holder's exit would.
		if _, err := e.b.Renew(ctx, mine, gm.ID, time.Minute); !errors.Is(err, sema.ErrLeaseLost) {
			t.Errorf("Renew of a lease of the closed handle: %v, want ErrLeaseLost (Config.ReopenEndsLeases)", err)
		}
	} else if err := e.b.Release(ctx, mine, gm.ID); err != nil {
		t.Errorf("after reopen, Release of the reopened handle's own lease: %v", err)
	}
}

func testDescribe(t *testing.T, e *env) {
	in := e.inspector()
	name := e.name("desc")
	s := e.c.Semaphore(name, 3)
	la := e.mustAcquire(s, sema.WithOwner("alice"), sema.WithWeight(1))
	lb := e.mustAcquire(s, sema.WithOwner("bob"), sema.WithWeight(2))
	waiting := make(chan *sema.Lease, 1)
	go func() { waiting <- e.mustAcquireBG(e.p.Semaphore(name, 3), sema.WithOwner("carol")) }()
	e.waitQueued(name, 1)
	st := e.describe(name)
	if st.Name != name || st.Limit != 3 || st.Used != 3 || len(st.Holders) != 2 {
		t.Fatalf("Describe = %+v", st)
	}
	byOwner := map[string]sema.Holder{}
	for _, h := range st.Holders {
		byOwner[h.Owner] = h
		if !h.ExpiresAt.After(h.AcquiredAt) {
			t.Errorf("holder %q expires %v, acquired %v", h.Owner, h.ExpiresAt, h.AcquiredAt)
		}
	}
	if h := byOwner["alice"]; h.Token != la.Token() || h.Weight != 1 {
		t.Errorf("alice = %+v, want token %d weight 1", h, la.Token())
	}
	if h := byOwner["bob"]; h.Token != lb.Token() || h.Weight != 2 {
		t.Errorf("bob = %+v, want token %d weight 2", h, lb.Token())
	}
	if len(st.Waiters) != 1 || st.Waiters[0].Owner != "carol" || st.Waiters[0].Weight != 1 {
		t.Errorf("waiters = %+v, want carol", st.Waiters)
	}
	ctx := e.ctx(10 * time.Second)
	all, err := in.List(ctx, e.prefix)
	if err != nil || len(all) != 1 || all[0].Name != name {
		t.Errorf("List(%q) = %+v, %v; want just %q", e.prefix, all, err, name)
	}
	if other, err := in.List(ctx, e.prefix+"nothing-here/"); err != nil || len(other) != 0 {
		t.Errorf("List of an unused prefix = %+v, %v", other, err)
	}
	e.mustRelease(la)
	e.mustRelease(lb)
	if lc := <-waiting; lc != nil {
		e.mustRelease(lc)
	}
	if st := e.describe(name); len(st.Holders) != 0 || len(st.Waiters) != 0 || st.Used != 0 {
		t.Errorf("after release: %+v", st)
	}
	if all, err := in.List(ctx, e.prefix); err != nil || len(all) != 0 {
		t.Errorf("List after release = %+v, %v; want none", all, err)
	}
}

package backendtest

import (
	"errors"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

// testIdempotentAcquire: a TryAcquire repeating the ID of a live lease
// returns that lease unchanged and takes no second permit.
func testIdempotentAcquire(t *testing.T, e *env) {
	ctx := e.ctx(10 * time.Second)
	req := request(e.name("s"), "idem1", 2, 1)
	g1, err := e.b.TryAcquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	g2, err := e.b.TryAcquire(ctx, req)
	if err != nil {
		t.Fatalf("repeated TryAcquire with the same ID: %v", err)
	}
	if g1.Token != g2.Token || g2.ID != req.ID {
		t.Fatalf("repeat gave another grant: %+v vs %+v", g1, g2)
	}
	// Only one permit is taken: another weight-1 request still fits.
	req2 := req
	req2.ID = "idem2"
	if _, err := e.b.TryAcquire(ctx, req2); err != nil {
		t.Fatalf("second lease should fit (limit 2): %v", err)
	}
	for _, id := range []string{"idem1", "idem2"} {
		if err := e.b.Release(ctx, req.Name, id); err != nil {
			t.Errorf("Release %s: %v", id, err)
		}
	}
}

// acquireResult is what a Blocker's Acquire returned.
type acquireResult struct {
	g   sema.Grant
	err error
}

// testIdempotentQueued: an acquire repeating the ID of a queued request (a
// client retrying after a lost connection) never takes a second place in
// the queue nor a second grant. The backend may let the retry take over the
// original's turn (the original then fails with ErrNotAcquired), refuse
// the retry (ErrInvalidArgument), or answer both with the one grant.
func testIdempotentQueued(t *testing.T, e *env) {
	bl := e.blocker()
	ctx := e.ctx(hang)
	name := e.name("queued")
	holder, x := request(name, "holder", 2, 2), request(name, "queued1", 2, 1)
	if _, err := e.b.TryAcquire(ctx, holder); err != nil {
		t.Fatal(err)
	}
	results := make(chan acquireResult, 2)
	acquire := func() {
		g, err := bl.Acquire(ctx, x)
		results <- acquireResult{g, err}
	}
	go acquire()
	e.waitQueued(name, 1)
	if _, err := e.b.TryAcquire(ctx, x); !errors.Is(err, sema.ErrNotAcquired) {
		t.Errorf("TryAcquire repeating a queued request's ID: %v, want ErrNotAcquired", err)
	}
	go acquire()
	// The retry is invisible when it joins the original; wait a little for
	// either an answer or a second place in the queue (the failure).
	var got []acquireResult
	for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline) && len(got) == 0; {
		select {
		case r := <-results:
			got = append(got, r)
		case <-time.After(time.Millisecond):
		}
		if st := e.describe(name); len(st.Waiters) > 1 {
			t.Errorf("a repeated acquire with a queued ID took a second place in the queue: %+v", st.Waiters)
			break
		}
	}
	if err := e.b.Release(ctx, name, holder.ID); err != nil {
		t.Fatal(err)
	}
	for len(got) < 2 {
		got = append(got, await(t, results, "an acquire after the holder released"))
	}
	var granted []sema.Grant
	for _, r := range got {
		switch {
		case r.err == nil:
			granted = append(granted, r.g)
		case !errors.Is(r.err, sema.ErrNotAcquired) && !errors.Is(r.err, sema.ErrInvalidArgument):
			t.Errorf("Acquire with a queued ID: %v, want a grant, ErrNotAcquired or ErrInvalidArgument", r.err)
		}
	}
	if len(granted) == 0 {
		t.Fatalf("neither acquire with ID %q was granted: %+v", x.ID, got)
	}
	if len(granted) == 2 && granted[0].Token != granted[1].Token {
		t.Errorf("two grants for one lease ID: tokens %d and %d", granted[0].Token, granted[1].Token)
	}
	st := e.describe(name)
	if len(st.Holders) != 1 || st.Used != x.Weight || len(st.Waiters) != 0 || st.Holders[0].Token != granted[0].Token {
		t.Errorf("after the grant: %+v; want the one lease with token %d", st, granted[0].Token)
	}
	// Now a live lease: a repeat returns it unchanged.
	if g, err := e.b.TryAcquire(ctx, x); err != nil || g.Token != granted[0].Token {
		t.Errorf("TryAcquire repeating a granted ID: %+v, %v; want token %d", g, err, granted[0].Token)
	}
	if err := e.b.Release(ctx, name, x.ID); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if g, err := e.b.TryAcquire(ctx, request(name, "full", 2, 2)); err != nil {
		t.Fatalf("the permits are not free after the lease was released: %v (a second grant leaked)", err)
	} else {
		_ = e.b.Release(ctx, name, g.ID)
	}
}

// testAcquireAfterRelease: an acquire repeating the ID of a released lease
// (a retry that arrives late) is either refused or a new grant that really
// holds the permit, with a greater token; never the old grant answered
// from memory while nothing is held.
func testAcquireAfterRelease(t *testing.T, e *env) {
	ctx := e.ctx(hang)
	name := e.name("again")
	req := request(name, "again1", 1, 1)
	g1, err := e.b.TryAcquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.b.Release(ctx, name, req.ID); err != nil {
		t.Fatal(err)
	}
	g2, err := e.b.TryAcquire(ctx, req)
	if err != nil {
		t.Logf("TryAcquire repeating a released ID is refused: %v", err)
	} else {
		if g2.Token <= g1.Token {
			t.Errorf("TryAcquire repeating a released ID returned token %d, not above the released lease's %d", g2.Token, g1.Token)
		}
		if g, err := e.peer.TryAcquire(ctx, request(name, "other", 1, 1)); !errors.Is(err, sema.ErrNotAcquired) {
			t.Errorf("the repeated ID was granted but the mutex is free: %v", err)
			if err == nil {
				_ = e.peer.Release(ctx, name, g.ID)
			}
		}
		if st := e.describe(name); len(st.Holders) != 1 || st.Holders[0].Token != g2.Token {
			t.Errorf("after the repeated grant: %+v; want one holder with token %d", st, g2.Token)
		}
		if err := e.b.Release(ctx, name, req.ID); err != nil {
			t.Errorf("Release of the repeated grant: %v", err)
		}
	}
	if err := e.b.Release(ctx, name, req.ID); !errors.Is(err, sema.ErrNotHeld) {
		t.Errorf("Release after release: %v, want ErrNotHeld", err)
	}
	if _, err := e.b.Renew(ctx, name, req.ID, time.Minute); !errors.Is(err, sema.ErrLeaseLost) {
		t.Errorf("Renew after release: %v, want ErrLeaseLost", err)
	}
	// The name is free for others.
	l := e.mustAcquire(e.p.Mutex(name))
	e.mustRelease(l)
}

// testRetryAskingOtherwise: an acquire repeating the ID of a live lease
// but asking another weight or limit (a client bug) is refused, or
// answered with the lease as it is held; never with what was asked but
// not taken.
func testRetryAskingOtherwise(t *testing.T, e *env) {
	ctx := e.ctx(10 * time.Second)
	name := e.name("retry-other")
	req := request(name, "other1", 3, 1)
	if _, err := e.b.TryAcquire(ctx, req); err != nil {
		t.Fatal(err)
	}
	heavier, wider := req, req
	heavier.Weight, wider.Limit = 2, 5
	for _, c := range []struct {
		what    string
		retry   sema.Request
		refusal error
	}{
		{"weight 2 of a lease of weight 1", heavier, sema.ErrInvalidArgument},
		{"limit 5 of a name of limit 3", wider, sema.ErrLimitMismatch},
	} {
		g, err := e.b.TryAcquire(ctx, c.retry)
		if err == nil && (g.Weight != req.Weight || g.Limit != req.Limit) {
			t.Errorf("retry asking %s answered weight %d, limit %d", c.what, g.Weight, g.Limit)
		} else if err != nil && !errors.Is(err, c.refusal) {
			t.Errorf("retry asking %s: %v; want the lease or %v", c.what, err, c.refusal)
		}
	}
	if st := e.describe(name); st.Used != 1 || st.Limit != 3 || len(st.Holders) != 1 {
		t.Errorf("after the retries: %+v; want the one lease of weight 1, limit 3", st)
	}
	if err := e.b.Release(ctx, name, req.ID); err != nil {
		t.Error(err)
	}
}

package backendtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

func testBadInput(t *testing.T, e *env) {
	good := sema.Request{Name: e.name("ok"), ID: "id1", Owner: "o", Limit: 2, Weight: 1, TTL: time.Second}
	cases := []struct {
		name string
		mod  func(*sema.Request)
		want error
	}{
		{"empty name", func(r *sema.Request) { r.Name = "" }, sema.ErrInvalidName},
		{"long name", func(r *sema.Request) { r.Name = strings.Repeat("n", 256) }, sema.ErrInvalidName},
		{"control char", func(r *sema.Request) { r.Name = "a\nb" }, sema.ErrInvalidName},
		{"nul byte", func(r *sema.Request) { r.Name = "a\x00b" }, sema.ErrInvalidName},
		{"bad utf8", func(r *sema.Request) { r.Name = "a\xffb" }, sema.ErrInvalidName},
		{"limit 0", func(r *sema.Request) { r.Limit = 0 }, sema.ErrInvalidArgument},
		{"limit negative", func(r *sema.Request) { r.Limit = -3 }, sema.ErrInvalidArgument},
		{"limit huge", func(r *sema.Request) { r.Limit = sema.MaxLimit + 1 }, sema.ErrInvalidArgument},
		{"weight 0", func(r *sema.Request) { r.Weight = 0 }, sema.ErrInvalidArgument},
		{"weight over limit", func(r *sema.Request) { r.Weight = 3 }, sema.ErrInvalidArgument},
		{"ttl 0", func(r *sema.Request) { r.TTL = 0 }, sema.ErrInvalidArgument},
		{"ttl tiny", func(r *sema.Request) { r.TTL = time.Nanosecond }, sema.ErrInvalidArgument},
		{"ttl huge", func(r *sema.Request) { r.TTL = 1000 * time.Hour }, sema.ErrInvalidArgument},
		{"owner long", func(r *sema.Request) { r.Owner = strings.Repeat("o", 256) }, sema.ErrInvalidArgument},
		{"owner control", func(r *sema.Request) { r.Owner = "x\ty" }, sema.ErrInvalidArgument},
		{"id empty", func(r *sema.Request) { r.ID = "" }, sema.ErrInvalidArgument},
		{"id path", func(r *sema.Request) { r.ID = "../x" }, sema.ErrInvalidArgument},
		{"id equals owner", func(r *sema.Request) { r.Owner = r.ID }, sema.ErrInvalidArgument},
	}
	ctx := e.ctx(10 * time.Second)
	for _, tc := range cases {
		req := good
		tc.mod(&req)
		_, err := e.b.TryAcquire(ctx, req)
		if !errors.Is(err, tc.want) {
			t.Errorf("TryAcquire with %s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	// Nothing was granted by any of them.
	if st := e.describe(good.Name); len(st.Holders) != 0 {
		t.Errorf("bad requests left holders: %+v", st.Holders)
	}
	// Through the client too.
	for _, s := range []*sema.Semaphore{e.c.Semaphore("", 1), e.c.Semaphore(e.name("x"), 0), e.c.Mutex("a\x00")} {
		if _, err := s.TryAcquire(ctx); !errors.Is(err, sema.ErrInvalidName) && !errors.Is(err, sema.ErrInvalidArgument) {
			t.Errorf("TryAcquire(%q, limit %d): got %v, want invalid", s.Name(), s.Limit(), err)
		}
	}
	s := e.c.Semaphore(e.name("opts"), 3)
	for _, o := range [][]sema.AcquireOption{
		{sema.WithWeight(4)}, {sema.WithWeight(-1)}, {sema.WithTTL(time.Nanosecond)},
		{sema.WithTTL(time.Second), sema.WithRenewInterval(900 * time.Millisecond)},
		{sema.WithMaxHold(-time.Second)},
	} {
		if _, err := s.Acquire(ctx, o...); !errors.Is(err, sema.ErrInvalidArgument) {
			t.Errorf("Acquire with bad option: got %v, want ErrInvalidArgument", err)
		}
	}
	// Renew and Release of unknown leases are definite errors, not panics.
	if _, err := e.b.Renew(ctx, good.Name, "nosuchlease", time.Second); !errors.Is(err, sema.ErrLeaseLost) {
		t.Errorf("Renew unknown: got %v, want ErrLeaseLost", err)
	}
	if err := e.b.Release(ctx, good.Name, "nosuchlease"); !errors.Is(err, sema.ErrNotHeld) {
		t.Errorf("Release unknown: got %v, want ErrNotHeld", err)
	}
	if _, err := e.b.Renew(ctx, good.Name, "nosuchlease", 0); err == nil {
		t.Errorf("Renew with ttl 0 succeeded")
	}
}

func testAlreadyDoneContext(t *testing.T, e *env) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := e.c.Mutex(e.name("m"))
	if l, err := s.Acquire(ctx); !errors.Is(err, sema.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with done ctx: lease %v, err %v; want ErrNotAcquired and context.Canceled", l, err)
	}
	if _, err := s.TryAcquire(ctx); !errors.Is(err, sema.ErrNotAcquired) {
		t.Fatalf("TryAcquire with done ctx: %v", err)
	}
	// The permit is free.
	e.mustRelease(e.mustAcquire(s))
}

func testTryAcquire(t *testing.T, e *env) {
	s := e.c.Mutex(e.name("m"))
	l := e.mustAcquire(s, sema.WithOwner("first"))
	defer e.mustRelease(l)
	_, err := e.p.Mutex(s.Name()).TryAcquire(e.ctx(10*time.Second), sema.WithOwner("second"))
	var he *sema.HeldError
	if !errors.As(err, &he) || !errors.Is(err, sema.ErrNotAcquired) {
		t.Fatalf("TryAcquire on held mutex: %v, want *HeldError", err)
	}
	if len(he.Holders) != 1 || he.Holders[0].Owner != "first" || he.Holders[0].Token != l.Token() {
		t.Errorf("HeldError holders = %+v, want the first lease (token %d)", he.Holders, l.Token())
	}
}

func testWeights(t *testing.T, e *env) {
	s := e.c.Semaphore(e.name("w"), 5)
	ctx := e.ctx(10 * time.Second)
	l3 := e.mustAcquire(s, sema.WithWeight(3))
	l2 := e.mustAcquire(s, sema.WithWeight(2))
	if _, err := s.TryAcquire(ctx); !errors.Is(err, sema.ErrNotAcquired) {
		t.Fatalf("6th permit of 5 granted: %v", err)
	}
	e.mustRelease(l3)
	if _, err := s.TryAcquire(ctx, sema.WithWeight(4)); !errors.Is(err, sema.ErrNotAcquired) {
		t.Fatalf("weight 4 granted with only 3 free: %v", err)
	}
	l3b, err := s.TryAcquire(ctx, sema.WithWeight(3))
	if err != nil {
		t.Fatalf("weight 3 with 3 free: %v", err)
	}
	if l3b.Weight() != 3 || l3b.Limit() != 5 {
		t.Errorf("lease weight/limit = %d/%d", l3b.Weight(), l3b.Limit())
	}
	e.mustRelease(l2)
	e.mustRelease(l3b)
	full := e.mustAcquire(s, sema.WithWeight(5))
	e.mustRelease(full)
}

func testLimitMismatch(t *testing.T, e *env) {
	name := e.name("lm")
	ctx := e.ctx(10 * time.Second)
	l := e.mustAcquire(e.c.Semaphore(name, 2))
	if _, err := e.p.Semaphore(name, 3).TryAcquire(ctx); !errors.Is(err, sema.ErrLimitMismatch) {
		t.Fatalf("limit 3 while limit-2 holder exists: %v, want ErrLimitMismatch", err)
	}
	if _, err := e.p.Semaphore(name, 3).Acquire(ctx); !errors.Is(err, sema.ErrLimitMismatch) {
		t.Fatalf("waiting Acquire with limit 3: %v, want ErrLimitMismatch", err)
	}
	e.mustRelease(l)
	// With no holders the name takes a new limit.
	l3 := e.mustAcquire(e.p.Semaphore(name, 3), sema.WithWeight(3))
	e.mustRelease(l3)
}

// testLimitMismatchWithWaiters: waiters fix a name's limit as holders do.
// While the name has a holder or a waiter at every instant — also between
// the holder's release and the waiter's grant, when a backend whose
// waiters take their grant themselves has only waiters — a request with
// another limit fails with ErrLimitMismatch: it neither adopts its limit
// nor takes the permit.
func testLimitMismatchWaiters(t *testing.T, e *env) {
	name := e.name("lmw")
	ctx := e.ctx(hang)
	if _, err := e.b.TryAcquire(ctx, request(name, "holder", 1, 1)); err != nil {
		t.Fatal(err)
	}
	waiter := make(chan *sema.Lease, 1)
	go func() { waiter <- e.mustAcquireBG(e.c.Mutex(name)) }()
	e.waitQueued(name, 1)
	stop := make(chan struct{})
	probes := make(chan int, 1)
	stopProbe := sync.OnceValue(func() int { close(stop); return <-probes })
	t.Cleanup(func() { stopProbe() })
	go func() {
		n := 0
		defer func() { probes <- n }()
		for ; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			g, err := e.peer.TryAcquire(ctx, request(name, fmt.Sprintf("probe%d", n), 2, 1))
			if err == nil {
				t.Errorf("a limit-2 request was granted while the limit-1 name had a holder or waiter (token %d)", g.Token)
				_ = e.peer.Release(ctx, name, g.ID)
				return
			}
			if !errors.Is(err, sema.ErrLimitMismatch) {
				t.Errorf("limit-2 request while the limit-1 name had a holder or waiter: %v, want ErrLimitMismatch", err)
				return
			}
		}
	}()
	if err := e.b.Release(ctx, name, "holder"); err != nil {
		t.Fatal(err)
	}
	l := await(t, waiter, "the waiter after the holder released")
	t.Logf("%d limit-2 requests refused", stopProbe())
	if l == nil {
		t.FailNow()
	}
	if l.Limit() != 1 {
		t.Errorf("the waiter holds with limit %d, want 1", l.Limit())
	}
	if st := e.describe(name); st.Limit != 1 {
		t.Errorf("the name's limit is %d, want 1", st.Limit)
	}
	e.mustRelease(l)
}

func testDo(t *testing.T, e *env) {
	name := e.name("do")
	ran := false
	err := e.c.Do(e.ctx(10*time.Second), name, func(ctx context.Context) error {
		ran = true
		if ctx.Err() != nil {
			t.Error("Do's context already done")
		}
		if _, err := e.p.Mutex(name).TryAcquire(ctx); !errors.Is(err, sema.ErrNotAcquired) {
			t.Errorf("mutex free inside Do: %v", err)
		}
		return errors.New("boom")
	})
	if !ran || err == nil || err.Error() != "boom" {
		t.Fatalf("Do: ran=%v err=%v, want fn's error", ran, err)
	}
	e.mustRelease(e.mustAcquire(e.p.Mutex(name))) // released after fn
}

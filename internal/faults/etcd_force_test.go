package faults

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/testenv"
)

// TestEtcdForceReleaseOfAGrantInFlight: a waiter is granted by a release
// while its connection is paused, and an operator force-releases it before
// it learns of the grant. Its lease ID must then stay force-released: its
// Acquire may fail, or return that grant, whose renewal fails — but it
// must not queue again under the same ID and return a second grant that
// the force-release did not end.
func TestEtcdForceReleaseOfAGrantInFlight(t *testing.T) {
	c := testenv.StartEtcd(t, 1)
	p := newProxy(t, c.Members[0].ClientAddr)
	open := func(u string) *sema.Client {
		b, err := sema.Open(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		cl := sema.New(b)
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	admin, holder, waiter := open(c.URL()), open(c.URL()), open("etcd://"+p.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	first, err := holder.Mutex("m").Acquire(ctx, sema.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   *sema.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := waiter.Mutex("m").Acquire(ctx, sema.WithTTL(2*time.Second))
		got <- result{l, err}
	}()
	testenv.WaitFor(t, "the waiter to queue", func() bool {
		st, err := admin.Describe(ctx, "m")
		return err == nil && len(st.Waiters) == 1
	})
	end := p.PauseAll(Both)
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	forced, err := admin.ForceRelease(ctx, "m", "")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	end(false)
	res := <-got
	if res.err != nil {
		t.Logf("the waiter's Acquire failed: %v", res.err)
		return
	}
	defer res.l.Release(context.Background())
	if len(forced) != 1 || forced[0].ID != res.l.ID() {
		t.Fatalf("force-release reported %+v, the waiter holds %s", forced, res.l.ID())
	}
	if res.l.Token() != forced[0].Token {
		t.Errorf("lease %s was force-released with token %d, then granted again with token %d", res.l.ID(), forced[0].Token, res.l.Token())
	}
	if err := res.l.Refresh(ctx); !errors.Is(err, sema.ErrForceReleased) && !errors.Is(err, sema.ErrLeaseLost) {
		t.Errorf("renewing the force-released lease %s: %v, want it lost", res.l.ID(), err)
	}
}

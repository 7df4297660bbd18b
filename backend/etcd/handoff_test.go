package etcd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/etcd"
	"github.com/sema-dev/sema/internal/testenv"
)

// TestLockHandOffAcrossClients queues waiters of four clients (as four
// processes would) on one lock, with the re-check so long that only etcd's
// watches can wake them. A waiter that gives up must not let the one
// behind it in; the holder's release must reach the head waiter, and a
// waiter granted after waiting must hand the lock on to the one behind it.
func TestLockHandOffAcrossClients(t *testing.T) {
	c := testenv.SharedEtcd(t)
	name := fmt.Sprintf("handoff/%d", time.Now().UnixNano())
	locks := make([]*sema.Semaphore, 4)
	for i := range locks {
		b, err := etcd.Open(context.Background(), etcd.Config{Endpoints: c.Endpoints(), Recheck: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		cl := sema.New(b)
		t.Cleanup(func() { _ = cl.Close() })
		locks[i] = cl.Mutex(name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := locks[0].Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   *sema.Lease
		err error
	}
	queue := func(s *sema.Semaphore, ctx context.Context, waiters int) <-chan result {
		ch := make(chan result, 1)
		go func() {
			l, err := s.Acquire(ctx)
			ch <- result{l, err}
		}()
		waitWaiters(t, s, waiters)
		return ch
	}
	bctx, bcancel := context.WithCancel(ctx)
	bres := queue(locks[1], bctx, 1)
	cres := queue(locks[2], ctx, 2)
	dres := queue(locks[3], ctx, 3)

	bcancel() // the waiter just behind the holder gives up
	if r := <-bres; r.err == nil {
		t.Fatal("a cancelled Acquire was granted")
	}
	waitWaiters(t, locks[2], 2)
	time.Sleep(300 * time.Millisecond) // time for a wrong grant to show
	select {
	case r := <-cres:
		t.Fatalf("granted while the lock is held (err %v)", r.err)
	default:
	}

	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-cres
	if r.err != nil {
		t.Fatalf("the head waiter after the holder's release: %v", r.err)
	}
	if r.l.Token() <= a.Token() {
		t.Errorf("token %d after %d", r.l.Token(), a.Token())
	}
	select {
	case d := <-dres:
		t.Fatalf("granted while the lock is held (err %v)", d.err)
	default:
	}
	if err := r.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	d := <-dres
	if d.err != nil {
		t.Fatalf("the waiter behind a holder that waited: %v", d.err)
	}
	if d.l.Token() <= r.l.Token() {
		t.Errorf("token %d after %d", d.l.Token(), r.l.Token())
	}
	if err := d.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitWaiters waits until s has n waiters.
func waitWaiters(t *testing.T, s *sema.Semaphore, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		st, err := s.Describe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Waiters) == n {
			return
		}
	}
	t.Fatalf("%s never had %d waiters", s.Name(), n)
}

package backendtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

func testExclusionHammer(t *testing.T, e *env) {
	const limit, workers, iters = 3, 8, 60
	name := e.name("hammer")
	ck := e.startChecker(name, limit)
	var wg sync.WaitGroup
	for i := range workers {
		c := e.client(i)
		wg.Go(func() {
			s := c.Semaphore(name, limit)
			for range iters {
				w := rand.Int64N(limit) + 1
				l, err := s.Acquire(e.ctx(30*time.Second), sema.WithWeight(w))
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				ck.enter(w)
				if rand.IntN(4) == 0 {
					time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
				}
				ck.leave(w)
				if err := l.Release(context.Background()); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		})
	}
	wg.Wait()
	ck.finish()
	if st := e.describe(name); st.Used != 0 || len(st.Holders) != 0 || len(st.Waiters) != 0 {
		t.Errorf("after the hammer: %+v", st)
	}
}

// testMutexCounter is the exclusion test in one process: a plain
// (non-atomic) counter incremented under the mutex ends at exactly P×K.
func testMutexCounter(t *testing.T, e *env) {
	const workers, iters = 8, 50
	name := e.name("counter")
	counter := 0
	var wg sync.WaitGroup
	for i := range workers {
		c := e.client(i)
		wg.Go(func() {
			for range iters {
				err := c.Do(e.ctx(30*time.Second), name, func(context.Context) error {
					v := counter
					if rand.IntN(8) == 0 {
						time.Sleep(10 * time.Microsecond)
					}
					counter = v + 1
					return nil
				})
				if err != nil {
					t.Errorf("Do: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if counter != workers*iters {
		t.Fatalf("counter = %d, want %d", counter, workers*iters)
	}
}

// waitQueued waits until name shows n waiters, so that arrival order is
// known.
func (e *env) waitQueued(name string, n int) {
	e.t.Helper()
	in := e.inspector()
	deadline := time.Now().Add(hang)
	for time.Now().Before(deadline) {
		st, err := in.Describe(context.Background(), name)
		if err == nil && len(st.Waiters) >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	e.t.Fatalf("%q never showed %d waiters", name, n)
}

// blocker returns the backend as a Blocker, or skips the test.
func (e *env) blocker() sema.Blocker {
	e.t.Helper()
	bl, ok := e.b.(sema.Blocker)
	if !ok {
		e.t.Skip("backend is not a Blocker: it queues no requests")
	}
	return bl
}

// queuedBehind has holderID hold name (limit 1) and waiterID queue behind
// it, acquiring on ctx in the background; its result comes on the channel.
func (e *env) queuedBehind(ctx context.Context, name, holderID, waiterID string) (holder, waiter sema.Request, got <-chan acquireResult) {
	e.t.Helper()
	bl := e.blocker()
	holder, waiter = request(name, holderID, 1, 1), request(name, waiterID, 1, 1)
	if _, err := e.b.TryAcquire(ctx, holder); err != nil {
		e.t.Fatal(err)
	}
	ch := make(chan acquireResult, 1)
	go func() {
		g, err := bl.Acquire(ctx, waiter)
		ch <- acquireResult{g, err}
	}()
	e.waitQueued(name, 1)
	return holder, waiter, ch
}

// mustAcquireBG acquires from a goroutine other than the test's; it reports
// failure with Errorf and returns nil.
func (e *env) mustAcquireBG(s *sema.Semaphore, opts ...sema.AcquireOption) *sema.Lease {
	l, err := s.Acquire(e.ctx(hang), opts...)
	if errors.Is(err, context.Canceled) {
		return nil // the test is over and cancelled the wait
	}
	if err != nil {
		e.t.Errorf("Acquire(%q): %v", s.Name(), err)
		return nil
	}
	return l
}

func testCancelWhileWaiting(t *testing.T, e *env) {
	const limit, workers, iters = 2, 8, 25
	name := e.name("cancel")
	ck := e.startChecker(name, limit)
	var granted, cancelled atomic.Int64
	var wg sync.WaitGroup
	for i := range workers {
		c := e.client(i)
		wg.Go(func() {
			s := c.Semaphore(name, limit)
			for range iters {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(3000))*time.Microsecond)
				l, err := s.Acquire(ctx, sema.WithWeight(rand.Int64N(limit)+1))
				cancel()
				if err != nil {
					if !errors.Is(err, sema.ErrNotAcquired) {
						t.Errorf("Acquire: %v, want ErrNotAcquired", err)
					}
					cancelled.Add(1)
					continue
				}
				granted.Add(1)
				ck.enter(l.Weight())
				time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
				ck.leave(l.Weight())
				if err := l.Release(context.Background()); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		})
	}
	wg.Wait()
	ck.finish()
	t.Logf("granted %d, cancelled %d", granted.Load(), cancelled.Load())
	// No leaked permit and no ghost waiter: the full weight is free now.
	l, err := e.c.Semaphore(name, limit).TryAcquire(e.ctx(10*time.Second), sema.WithWeight(limit))
	if err != nil {
		t.Fatalf("full weight not free after cancellations: %v", err)
	}
	e.mustRelease(l)
	if st := e.describe(name); len(st.Waiters) != 0 {
		t.Errorf("ghost waiters: %+v", st.Waiters)
	}
}

// testBlockerCancel cancels waits in a Blocker directly, without the core's
// give-back: a grant racing with cancellation must not leak.
func testBlockerCancel(t *testing.T, e *env) {
	bl := e.blocker()
	name := e.name("blocker")
	ctx := e.ctx(60 * time.Second)
	req := func(id string) sema.Request {
		return sema.Request{Name: name, ID: id, Limit: 1, Weight: 1, TTL: time.Minute}
	}
	for i := range 60 {
		holder := fmt.Sprintf("h%d", i)
		if _, err := e.b.TryAcquire(ctx, req(holder)); err != nil {
			t.Fatalf("round %d: the permit is not free: %v (a grant that raced with cancellation leaked)", i, err)
		}
		wctx, cancel := context.WithCancel(ctx)
		res := make(chan error, 1)
		go func() {
			g, err := bl.Acquire(wctx, req(fmt.Sprintf("w%d", i)))
			if err == nil {
				err = e.b.Release(context.Background(), name, g.ID)
			} else if errors.Is(err, sema.ErrNotAcquired) {
				err = nil
			}
			res <- err
		}()
		e.waitQueued(name, 1)
		// Release and cancel at once: the grant races with the cancellation.
		released := make(chan error, 1)
		go func() { released <- e.b.Release(context.Background(), name, holder) }()
		cancel()
		if err := <-res; err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if err := <-released; err != nil {
			t.Fatalf("round %d: Release: %v", i, err)
		}
	}
	if _, err := e.b.TryAcquire(ctx, req("final")); err != nil {
		t.Fatalf("permit leaked: %v", err)
	}
	_ = e.b.Release(ctx, name, "final")
}

func testReleaseOtherGoroutine(t *testing.T, e *env) {
	name := e.name("other")
	l := e.mustAcquire(e.c.Mutex(name))
	got := make(chan *sema.Lease, 1)
	go func() { got <- e.mustAcquireBG(e.p.Mutex(name)) }()
	e.waitQueued(name, 1)
	released := make(chan error, 1)
	go func() { released <- l.Release(context.Background()) }()
	if err := <-released; err != nil {
		t.Fatalf("Release from another goroutine: %v", err)
	}
	if l2 := <-got; l2 != nil {
		e.mustRelease(l2)
	}
	if !errors.Is(l.Err(), sema.ErrReleased) {
		t.Errorf("Err after Release = %v, want ErrReleased", l.Err())
	}
}

// testReleaseOfAQueuedID: a Release naming a request that is still queued
// (it holds nothing) says so or changes nothing the waiter cannot see: the
// waiting Acquire is granted in its turn, or fails at once with an error of
// its own; it never waits on for its context to end.
func testReleaseOfAQueuedID(t *testing.T, e *env) {
	ctx := e.ctx(hang)
	name := e.name("release-queued")
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	holder, waiter, got := e.queuedBehind(wctx, name, "rq-holder", "rq-waiter")
	if err := e.b.Release(ctx, name, waiter.ID); err != nil && !errors.Is(err, sema.ErrNotHeld) {
		t.Errorf("Release of a queued request's ID: %v; want nil or ErrNotHeld", err)
	}
	if err := e.b.Release(ctx, name, holder.ID); err != nil {
		t.Fatal(err)
	}
	r := await(t, got, "the waiter whose ID was released while it was queued")
	switch {
	case r.err == nil:
		if err := e.b.Release(ctx, name, waiter.ID); err != nil {
			t.Errorf("Release of the waiter's grant: %v", err)
		}
	case wctx.Err() != nil || errors.Is(r.err, context.Canceled) || errors.Is(r.err, context.DeadlineExceeded):
		t.Errorf("the waiter waited for its context to end: %v", r.err)
	default:
		t.Logf("the waiter failed: %v", r.err)
	}
}

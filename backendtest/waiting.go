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

// checker watches a semaphore while a test runs: clients report the weights
// they believe they hold, and a goroutine polls Describe. Either view
// exceeding the limit fails the test.
type checker struct {
	t     *testing.T
	limit int64
	held  atomic.Int64
	stop  chan struct{}
	done  chan struct{}
}

func (e *env) startChecker(name string, limit int64) *checker {
	ck := &checker{t: e.t, limit: limit, stop: make(chan struct{}), done: make(chan struct{})}
	in := e.inspector()
	go func() {
		defer close(ck.done)
		for {
			select {
			case <-ck.stop:
				return
			default:
			}
			if in == nil {
				time.Sleep(time.Millisecond)
				continue
			}
			st, err := in.Describe(context.Background(), name)
			if err != nil {
				continue // a backend may refuse while busy; the client view still counts
			}
			var sum int64
			for _, h := range st.Holders {
				sum += h.Weight
			}
			if sum > limit || st.Used > limit {
				ck.t.Errorf("describe shows %d (used %d) > limit %d: %+v", sum, st.Used, limit, st.Holders)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	return ck
}

func (ck *checker) enter(w int64) {
	if n := ck.held.Add(w); n > ck.limit {
		ck.t.Errorf("clients hold %d > limit %d", n, ck.limit)
	}
}

func (ck *checker) leave(w int64) { ck.held.Add(-w) }

func (ck *checker) finish() {
	close(ck.stop)
	<-ck.done
}

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
	if st := e.describeIfAble(name); st != nil && (st.Used != 0 || len(st.Holders) != 0 || len(st.Waiters) != 0) {
		t.Errorf("after the hammer: %+v", *st)
	}
}

func (e *env) describeIfAble(name string) *sema.Status {
	if e.inspector() == nil {
		return nil
	}
	st := e.describe(name)
	return &st
}

// testMutexCounter is the seed's exclusion test in one process: a plain
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

// waitQueued waits until name shows n waiters (or a short while without an
// Inspector), so that arrival order is known.
func (e *env) waitQueued(name string, n int) {
	e.t.Helper()
	in := e.inspector()
	if in == nil {
		time.Sleep(100 * time.Millisecond)
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		st, err := in.Describe(context.Background(), name)
		if err == nil && len(st.Waiters) >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	e.t.Fatalf("%q never showed %d waiters", name, n)
}

func testFIFO(t *testing.T, e *env) {
	if !e.g.FIFO {
		t.Skip("backend does not declare FIFO")
	}
	name := e.name("fifo")
	s := e.c.Semaphore(name, 2)
	h1 := e.mustAcquire(s)
	h2 := e.mustAcquire(s)
	bigCtx, cancelBig := context.WithCancel(context.Background())
	defer cancelBig()
	bigErr := make(chan error, 1)
	small := make(chan *sema.Lease, 1)
	go func() {
		l, err := e.p.Semaphore(name, 2).Acquire(bigCtx, sema.WithWeight(2))
		if err == nil {
			_ = l.Release(context.Background())
		}
		bigErr <- err
	}()
	e.waitQueued(name, 1)
	go func() { small <- e.mustAcquireBG(e.p.Semaphore(name, 2), sema.WithWeight(1)) }()
	e.waitQueued(name, 2)
	e.mustRelease(h1) // one permit free: the later, smaller request must not take it
	select {
	case l := <-small:
		t.Fatalf("a later weight-1 request overtook an earlier weight-2 one (token %d)", l.Token())
	case <-time.After(150 * time.Millisecond):
	}
	// Nor may a TryAcquire barge past the queue.
	if l, err := e.c.Semaphore(name, 2).TryAcquire(e.ctx(10 * time.Second)); !errors.Is(err, sema.ErrNotAcquired) {
		t.Fatalf("TryAcquire barged past waiters: lease %v, err %v", l, err)
	}
	// When the head gives up, the request behind it gets the free permit.
	cancelBig()
	if err := <-bigErr; !errors.Is(err, sema.ErrNotAcquired) {
		t.Fatalf("cancelled head: %v, want ErrNotAcquired", err)
	}
	select {
	case ls := <-small:
		if ls == nil {
			t.FailNow()
		}
		e.mustRelease(ls)
	case <-time.After(10 * time.Second):
		t.Fatal("the head waiter's cancellation did not wake the next waiter")
	}
	e.mustRelease(h2)
}

// mustAcquireBG acquires from a goroutine other than the test's; it reports
// failure with Errorf and returns nil.
func (e *env) mustAcquireBG(s *sema.Semaphore, opts ...sema.AcquireOption) *sema.Lease {
	l, err := s.Acquire(e.ctx(20*time.Second), opts...)
	if errors.Is(err, context.Canceled) {
		return nil // the test is over and cancelled the wait
	}
	if err != nil {
		e.t.Errorf("Acquire(%q): %v", s.Name(), err)
		return nil
	}
	return l
}

func testFIFOOrder(t *testing.T, e *env) {
	if !e.g.FIFO {
		t.Skip("backend does not declare FIFO")
	}
	const n = 5
	name := e.name("order")
	first := e.mustAcquire(e.c.Mutex(name))
	got := make(chan int, n)
	for i := range n {
		c := e.client(i)
		go func() {
			l := e.mustAcquireBG(c.Mutex(name))
			got <- i
			if l != nil {
				_ = l.Release(context.Background())
			}
		}()
		e.waitQueued(name, i+1)
	}
	e.mustRelease(first)
	for want := range n {
		if i := <-got; i != want {
			t.Fatalf("grant %d went to waiter %d: not FIFO", want, i)
		}
	}
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
	if st := e.describeIfAble(name); st != nil && len(st.Waiters) != 0 {
		t.Errorf("ghost waiters: %+v", st.Waiters)
	}
}

// testBlockerCancel cancels waits in a Blocker directly, without the core's
// give-back: a grant racing with cancellation must not leak.
func testBlockerCancel(t *testing.T, e *env) {
	bl, ok := e.b.(sema.Blocker)
	if !ok {
		t.Skip("backend is not a Blocker")
	}
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

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
// exceeding the limit fails the test, and so does a Describe that fails: a
// checker that cannot see checks nothing.
type checker struct {
	t            *testing.T
	limit        int64
	held         atomic.Int64
	anchor       *sema.Lease
	sawHeld      chan struct{} // closed at the first answer that shows holders
	stop, done   chan struct{}
	seen         int  // Describe answers checked; read after done
	observedHeld bool // sawHeld is closed
}

// startChecker starts watching name. It takes one permit itself (the
// anchor) and keeps it until the checker has seen it in a Describe answer,
// so every run proves that the checker looked while the name was held.
func (e *env) startChecker(name string, limit int64) *checker {
	e.t.Helper()
	ck := &checker{t: e.t, limit: limit, sawHeld: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	ck.anchor = e.mustAcquire(e.c.Semaphore(name, limit), sema.WithOwner("checker-anchor"))
	ck.enter(1)
	in := e.inspector()
	go func() {
		defer close(ck.done)
		for {
			select {
			case <-ck.stop:
				return
			default:
			}
			st, err := in.Describe(context.Background(), name)
			if err != nil {
				ck.t.Errorf("checker: Describe(%q): %v", name, err)
				return
			}
			ck.seen++
			var sum int64
			for _, h := range st.Holders {
				sum += h.Weight
			}
			if sum > limit || st.Used > limit {
				ck.t.Errorf("describe shows %d (used %d) > limit %d: %+v", sum, st.Used, limit, st.Holders)
			}
			if sum > 0 && !ck.observedHeld {
				ck.observedHeld = true
				close(ck.sawHeld)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	// The workers start now; the anchor goes once the checker has seen it
	// (or has failed, or has seen nothing for too long: finish says so).
	go func() {
		select {
		case <-ck.sawHeld:
		case <-ck.done:
		case <-time.After(hang):
		}
		ck.leave(1)
		if err := ck.anchor.Release(context.Background()); err != nil {
			ck.t.Errorf("checker: release anchor: %v", err)
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

// finish stops the checker and fails the test if it never saw the name
// held.
func (ck *checker) finish() {
	ck.t.Helper()
	select {
	case <-ck.sawHeld:
	case <-ck.done:
	case <-time.After(hang):
	}
	close(ck.stop)
	<-ck.done
	if !ck.observedHeld {
		ck.t.Errorf("checker: %d Describe answers, none with a holder: it checked nothing", ck.seen)
	}
	_ = ck.anchor.Release(context.Background())
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
	if st := e.describe(name); st.Used != 0 || len(st.Holders) != 0 || len(st.Waiters) != 0 {
		t.Errorf("after the hammer: %+v", st)
	}
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

// fifoBackend skips the test unless the backend declares FIFO, and fails
// it if FIFO is declared without a queue of the backend's own.
func (e *env) fifoBackend() {
	e.t.Helper()
	if !e.g.FIFO {
		e.t.Skip("backend does not declare FIFO")
	}
	if _, ok := e.b.(sema.Blocker); !ok {
		e.t.Fatal("backend declares FIFO but is not a sema.Blocker: without a queue of its own, waiters can only poll, in no order")
	}
}

// bigResult is what the weight-2 waiter of queueBigThenSmall got.
type bigResult struct {
	token uint64
	err   error
}

// queueBigThenSmall holds both permits of the limit-2 semaphore name, then
// queues a weight-2 request ("big", waiting on bigCtx) and behind it a
// weight-1 one ("small"). Big releases its lease as soon as it is granted;
// small's lease is the caller's.
func (e *env) queueBigThenSmall(name string, bigCtx context.Context) (h1, h2 *sema.Lease, big <-chan bigResult, small <-chan *sema.Lease) {
	s := e.c.Semaphore(name, 2)
	h1, h2 = e.mustAcquire(s), e.mustAcquire(s)
	bigc, smallc := make(chan bigResult, 1), make(chan *sema.Lease, 1)
	go func() {
		l, err := e.p.Semaphore(name, 2).Acquire(bigCtx, sema.WithWeight(2), sema.WithOwner("big"))
		if err != nil {
			bigc <- bigResult{err: err}
			return
		}
		bigc <- bigResult{token: l.Token()}
		_ = l.Release(context.Background())
	}()
	e.waitQueued(name, 1)
	go func() { smallc <- e.mustAcquireBG(e.p.Semaphore(name, 2), sema.WithWeight(1), sema.WithOwner("small")) }()
	e.waitQueued(name, 2)
	return h1, h2, bigc, smallc
}

// testFIFO: with one permit of two free and a weight-2 request at the head
// of the queue, a later weight-1 request must wait. The order of grants is
// read from the tokens, not from a timing window: the weight-2 request is
// granted when both permits are free, and the weight-1 one only after it.
func testFIFO(t *testing.T, e *env) {
	e.fifoBackend()
	name := e.name("fifo")
	h1, h2, big, small := e.queueBigThenSmall(name, e.ctx(hang))
	e.mustRelease(h1) // one permit free: the later, smaller request must not take it
	st := e.describe(name)
	if len(st.Holders) != 1 || st.Used != 1 || len(st.Waiters) != 2 || st.Waiters[0].Owner != "big" || st.Waiters[1].Owner != "small" {
		t.Errorf("after one permit of two was freed: %+v; want h2 holding and big, small waiting in that order", st)
	}
	// Nor may a TryAcquire barge past the queue.
	if l, err := e.c.Semaphore(name, 2).TryAcquire(e.ctx(10 * time.Second)); !errors.Is(err, sema.ErrNotAcquired) {
		t.Fatalf("TryAcquire barged past waiters: lease %v, err %v", l, err)
	}
	// A backend whose waiters retry on a wake-up of their own (pub/sub,
	// a notification) would barge a little later: give it the time of a
	// few wake-ups. Waiting longer never makes this test fail.
	time.Sleep(e.cfg.FallbackRecheck / 10)
	e.mustRelease(h2)
	var tb, ts uint64 // the tokens of big and small
	for tb == 0 || ts == 0 {
		select {
		case r := <-big:
			if r.err != nil {
				t.Fatalf("the weight-2 waiter: %v", r.err)
			}
			tb = r.token
		case l := <-small:
			if l == nil {
				t.FailNow()
			}
			ts = l.Token()
			e.mustRelease(l) // a barging small one would block big
		case <-time.After(hang):
			t.Fatalf("waiters not granted within %v after both permits were freed", hang)
		}
	}
	if ts < tb {
		t.Errorf("the later weight-1 request was granted (token %d) before the earlier weight-2 one (token %d): it overtook", ts, tb)
	}
}

// testFIFOHeadCancel: when the head of the queue gives up, the request
// behind it gets the permit it was blocking.
func testFIFOHeadCancel(t *testing.T, e *env) {
	e.fifoBackend()
	name := e.name("fifo-cancel")
	bigCtx, cancelBig := context.WithCancel(context.Background())
	defer cancelBig()
	h1, h2, big, small := e.queueBigThenSmall(name, bigCtx)
	e.mustRelease(h1)
	cancelBig()
	if r := await(t, big, "the cancelled head waiter"); !errors.Is(r.err, sema.ErrNotAcquired) {
		t.Fatalf("cancelled head: %+v, want ErrNotAcquired", r)
	}
	ls := await(t, small, "the waiter behind a cancelled head")
	if ls == nil {
		t.FailNow()
	}
	e.mustRelease(ls)
	e.mustRelease(h2)
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

func testFIFOOrder(t *testing.T, e *env) {
	e.fifoBackend()
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
	if st := e.describe(name); len(st.Waiters) != 0 {
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

package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

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

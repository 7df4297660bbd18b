package backendtest

import (
	"context"
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

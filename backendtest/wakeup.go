package backendtest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

// testWakeup: a release wakes the next waiter by an event, not at the
// waiter's next poll. Each round queues one waiter behind a holder and
// times the hand-off from the holder's release to the waiter's grant; the
// median of the rounds must be under a tenth of the backend's fallback
// re-check. A waiter that only polls would take about the whole interval,
// as it starts waiting just before the release.
func testWakeup(t *testing.T, e *env) {
	_, blocker := e.b.(sema.Blocker)
	_, notifier := e.b.(sema.Notifier)
	if !blocker && !notifier {
		t.Fatal("the backend is neither a sema.Blocker nor a sema.Notifier: nothing wakes its waiters, they can only poll")
	}
	const rounds = 9
	name := e.name("wake")
	var took []time.Duration
	for i := range rounds {
		// Odd rounds hand over between the two handles, as between
		// processes.
		holder := e.mustAcquire(e.client(i).Mutex(name))
		type grant struct {
			l  *sema.Lease
			at time.Time
		}
		granted := make(chan grant, 1)
		go func() {
			l := e.mustAcquireBG(e.client(i + 1).Mutex(name))
			granted <- grant{l, time.Now()}
		}()
		e.waitQueued(name, 1)
		start := time.Now()
		e.mustRelease(holder)
		g := await(t, granted, "the waiter after the release")
		if g.l == nil {
			t.FailNow()
		}
		took = append(took, g.at.Sub(start))
		e.mustRelease(g.l)
	}
	slices.Sort(took)
	median := took[rounds/2]
	t.Logf("release → grant of the next waiter: median %v, min %v, max %v (fallback re-check %v)", median, took[0], took[rounds-1], e.cfg.FallbackRecheck)
	if median >= e.cfg.FallbackRecheck/10 {
		t.Errorf("a release wakes the next waiter after %v (median of %d), not well before the fallback re-check of %v: the wake-up is not driven by an event", median, rounds, e.cfg.FallbackRecheck)
	}
}

// testCloseWhileWaiting: closing a backend ends the acquires waiting on it
// with ErrClosed, and later calls fail with ErrClosed too.
func testCloseWhileWaiting(t *testing.T, e *env) {
	name := e.name("close")
	holder := e.mustAcquire(e.p.Mutex(name))
	waited := make(chan error, 1)
	go func() {
		l, err := e.c.Mutex(name).Acquire(e.ctx(hang))
		if err == nil {
			err = errors.New("granted while the name was held: " + l.String())
		}
		waited <- err
	}()
	e.waitQueued(name, 1)
	if err := e.b.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := await(t, waited, "an acquire waiting on a closed backend"); !errors.Is(err, sema.ErrClosed) {
		t.Errorf("acquire waiting when the backend closed: %v, want ErrClosed", err)
	}
	ctx := e.ctx(10 * time.Second)
	if _, err := e.b.TryAcquire(ctx, request(e.name("after"), "after1", 1, 1)); !errors.Is(err, sema.ErrClosed) {
		t.Errorf("TryAcquire on a closed backend: %v, want ErrClosed", err)
	}
	if e.peer == e.b {
		return // the holder's backend is closed too
	}
	// Another handle is unaffected: its holder still holds and releases.
	if _, err := e.p.Mutex(name).TryAcquire(ctx); !errors.Is(err, sema.ErrNotAcquired) {
		t.Errorf("the other handle's holder lost the mutex when this one closed: %v", err)
	}
	e.mustRelease(holder)
}

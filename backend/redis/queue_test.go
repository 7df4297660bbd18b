package redis_test

import (
	"context"
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/testenv"
)

// TestTryAcquireOfAQueuedID: a TryAcquire repeating the ID of a queued
// request is refused and leaves it queued.
func TestTryAcquireOfAQueuedID(t *testing.T) {
	b := open(t, testenv.SharedRedis(t).URL())
	ctx := bg(t)
	if _, err := b.TryAcquire(ctx, req("q/idem", "holder")); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, req("q/idem", "waiter"))
		got <- err
	}()
	waitQueued(t, b, "q/idem", 1)
	var he *sema.HeldError
	if _, err := b.TryAcquire(ctx, req("q/idem", "waiter")); !errors.As(err, &he) {
		t.Fatalf("TryAcquire of the queued ID: %v, want *HeldError", err)
	}
	if st, _ := b.Describe(ctx, "q/idem"); len(st.Waiters) != 1 {
		t.Fatalf("the waiter left the queue: %+v", st)
	}
	if err := b.Release(ctx, "q/idem", "holder"); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
}

// TestDeadWaiterIsSkipped: a waiting `sema run` is killed with SIGKILL
// (the process that waits, then sema run), so nothing takes it out of the
// queue. When the
// holder releases, the grant is not made to it (its channel has no
// subscriber any more): the live waiter behind it is granted at once, not
// after the dead one's queue lease.
func TestDeadWaiterIsSkipped(t *testing.T) {
	url := testenv.SharedRedis(t).URL()
	b := open(t, url)
	c := sema.New(b)
	l, err := c.Mutex("q/dead").Acquire(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	dead := exec.Command(testenv.SemaBinary(t), "run", "--backend", url, "q/dead", "--", "true")
	if err := dead.Start(); err != nil {
		t.Fatal(err)
	}
	waitQueued(t, b, "q/dead", 1)
	st, err := b.Describe(bg(t), "q/dead")
	if err != nil || len(st.Waiters) != 1 {
		t.Fatalf("%+v, %v", st, err)
	}
	// The process that waits (sema run's supervisor), then sema run.
	_ = syscall.Kill(st.Waiters[0].PID, syscall.SIGKILL)
	_ = dead.Process.Kill()
	_ = dead.Wait()
	got := make(chan time.Time, 1)
	go func() {
		l2, err := sema.New(open(t, url)).Mutex("q/dead").Acquire(bg(t))
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- time.Now()
		_ = l2.Release(context.Background())
	}()
	waitQueued(t, b, "q/dead", 2)
	released := time.Now()
	if err := l.Release(bg(t)); err != nil {
		t.Fatal(err)
	}
	at, ok := <-got
	if !ok {
		t.FailNow()
	}
	if d := at.Sub(released); d > 500*time.Millisecond {
		t.Fatalf("the live waiter was granted %v after the release: the dead waiter held the queue", d)
	} else {
		t.Logf("granted %v after the release, past a dead waiter", d)
	}
}

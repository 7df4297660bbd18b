package redis_test

import (
	"errors"
	"os"
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
// queue. Once that process is gone (its connections closed), the holder
// releases: the release grants the live waiter behind it, not the dead one
// (its channel has no subscriber any more), in the same script, rather
// than leaving the queue to the dead one's queue lease.
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
	supervisor := st.Waiters[0].PID
	_ = syscall.Kill(supervisor, syscall.SIGKILL)
	_ = dead.Process.Kill()
	_ = dead.Wait()
	// kill(2) returns before the process is gone: a dying process keeps
	// its sockets (and Redis its subscription) until the kernel has torn
	// down its memory, which takes a while for a race-detector build.
	for alive(supervisor) {
		time.Sleep(time.Millisecond)
	}
	live := sema.New(open(t, url))
	got := make(chan error, 1)
	var l2 *sema.Lease
	go func() {
		var err error
		l2, err = live.Mutex("q/dead").Acquire(bg(t))
		got <- err
	}()
	waitQueued(t, b, "q/dead", 2)
	if err := l.Release(bg(t)); err != nil {
		t.Fatal(err)
	}
	st, err = b.Describe(bg(t), "q/dead")
	if err != nil || len(st.Holders) != 1 {
		t.Fatalf("after the release: %+v, %v", st, err)
	}
	if h := st.Holders[0]; h.PID != os.Getpid() {
		t.Fatalf("the release granted %+v (pid %d), not the live waiter: the dead waiter held the queue", h, h.PID)
	}
	if err := <-got; err != nil {
		t.Fatalf("the live waiter: %v", err)
	}
	if err := l2.Release(bg(t)); err != nil {
		t.Fatal(err)
	}
}

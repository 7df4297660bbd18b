package redis_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

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
// queue. Once Redis has dropped its subscription, the holder releases: the
// release grants the live waiter behind it, not the dead one (its channel
// has no subscriber any more), in the same script, rather than leaving
// the queue to the dead one's queue lease.
func TestDeadWaiterIsSkipped(t *testing.T) {
	r := testenv.SharedRedis(t)
	url := r.URL()
	b := open(t, url)
	c := sema.New(b)
	l, err := c.Mutex("qdead").Acquire(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	dead := exec.Command(testenv.SemaBinary(t), "run", "--backend", url, "qdead", "--", "true")
	if err := dead.Start(); err != nil {
		t.Fatal(err)
	}
	waitQueued(t, b, "qdead", 1)
	st, err := b.Describe(bg(t), "qdead")
	if err != nil || len(st.Waiters) != 1 {
		t.Fatalf("%+v, %v", st, err)
	}
	channel := waiterChannel(t, rawClient(t, r, ""), "qdead")
	_ = syscall.Kill(st.Waiters[0].PID, syscall.SIGKILL)
	_ = dead.Process.Kill()
	_ = dead.Wait()
	// kill(2) returns before the process is gone, and a dying process
	// keeps its sockets until its last thread has exited: wait until Redis
	// has seen its connection close.
	rc := rawClient(t, r, "")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		n, err := rc.PubSubNumSub(bg(t), channel).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n[channel] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis still counts a subscriber of the killed waiter's channel %s", channel)
		}
	}
	live := sema.New(open(t, url))
	got := make(chan error, 1)
	var l2 *sema.Lease
	go func() {
		var err error
		l2, err = live.Mutex("qdead").Acquire(bg(t))
		got <- err
	}()
	waitQueued(t, b, "qdead", 2)
	if err := l.Release(bg(t)); err != nil {
		t.Fatal(err)
	}
	st, err = b.Describe(bg(t), "qdead")
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

// waiterChannel returns the wake-up channel of the waiter at the head of
// name's queue, as its record in the state hash names it:
// "w<weight> <since> <expires> <ttl> <channel>\x1f<label>" (lua/common.lua).
func waiterChannel(t *testing.T, rc *goredis.Client, name string) string {
	t.Helper()
	ids, err := rc.ZRange(bg(t), "sema:{"+name+"}:q", 0, 0).Result()
	if err != nil || len(ids) != 1 {
		t.Fatalf("queue head: %v, %v", ids, err)
	}
	rec, err := rc.HGet(bg(t), "sema:{"+name+"}:s", ids[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(rec, "\x1f")
	f := strings.Fields(head)
	if len(f) != 5 || !strings.HasPrefix(rec, "w") {
		t.Fatalf("waiter record %q", rec)
	}
	return f[4]
}

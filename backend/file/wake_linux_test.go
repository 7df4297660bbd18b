package file_test

import (
	"context"
	"io"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

// queueHelpers starts n helper processes that queue, in order, for weight
// of limit on name, held by the test.
func queueHelpers(t *testing.T, dir, name string, n int, limit, weight int64) []*helper {
	t.Helper()
	var hs []*helper
	for i := range n {
		hs = append(hs, startHelper(t, "queue", envDir+"="+dir, envName+"="+name, envTTL+"=30s",
			envArg+"="+strconv.FormatInt(limit, 10)+" "+strconv.FormatInt(weight, 10)))
		waitQueued(t, dir, name, i+1)
	}
	return hs
}

// wakes asks each helper how many times another process woke it.
func wakes(t *testing.T, hs []*helper) []int64 {
	t.Helper()
	out := make([]int64, len(hs))
	for i, h := range hs {
		io.WriteString(h.stdin, "wakes\n")
		out[i] = atoi64(t, h.expect("wakes", 10*time.Second)[0])
	}
	return out
}

// checkWakes fails unless the helpers were woken exactly want times.
func checkWakes(t *testing.T, hs []*helper, want ...int64) {
	t.Helper()
	got := wakes(t, hs)
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("wake-ups per waiting process %v, want %v: a release must wake only the process it serves", got, want)
		}
	}
}

// A release wakes exactly the process it serves, and the processes queue
// in FIFO order: four waiting processes, woken one at a time, each once,
// in the order they queued. Writes to the state (queueing, releasing)
// wake nobody else.
func TestReleaseWakesOnlyTheServedProcess(t *testing.T) {
	dir := t.TempDir()
	c := sema.New(open(t, dir))
	defer c.Close()
	l, err := c.Mutex("q").Acquire(ctx(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	hs := queueHelpers(t, dir, "q", 4, 1, 1)
	checkWakes(t, hs, 0, 0, 0, 0)
	if err := l.Release(ctx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	last := l.Token()
	want := []int64{0, 0, 0, 0}
	for i, h := range hs {
		tok := uint64(atoi64(t, h.expect("granted", 10*time.Second)[0]))
		if tok <= last {
			t.Fatalf("waiter %d granted token %d after %d: not in queue order", i, tok, last)
		}
		last = tok
		want[i] = 1
		checkWakes(t, hs, want...)
		io.WriteString(h.stdin, "release\n")
		h.expect("released", 10*time.Second)
	}
	checkWakes(t, hs, 1, 1, 1, 1)
}

// For a semaphore, a release wakes the processes of every waiter it can
// serve, and only them.
func TestSemaphoreReleaseWakesTheServed(t *testing.T) {
	dir := t.TempDir()
	c := sema.New(open(t, dir))
	defer c.Close()
	l, err := c.Semaphore("pool", 3).Acquire(ctx(t, 5*time.Second), sema.WithWeight(3))
	if err != nil {
		t.Fatal(err)
	}
	hs := queueHelpers(t, dir, "pool", 4, 3, 1)
	if err := l.Release(ctx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, h := range hs[:3] {
		h.expect("granted", 10*time.Second)
	}
	checkWakes(t, hs, 1, 1, 1, 0)
	io.WriteString(hs[0].stdin, "release\n")
	hs[0].expect("released", 10*time.Second)
	hs[3].expect("granted", 10*time.Second)
	checkWakes(t, hs, 1, 1, 1, 1)
}

// A waiter process killed in the queue is dropped at once: the waiter
// behind it, which it blocked (a semaphore of 2, one permit held, the dead
// one asking for 2), is granted without any release, long before its
// one-minute re-check.
func TestKilledWaiterUnblocksTheQueue(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir)
	c := sema.New(b)
	defer c.Close()
	l, err := c.Semaphore("pool", 2).Acquire(ctx(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	first := queueHelpers(t, dir, "pool", 1, 2, 2)[0]
	second := startHelper(t, "queue", envDir+"="+dir, envName+"=pool", envArg+"=2 1")
	waitQueued(t, dir, "pool", 2)
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	second.expect("granted", 10*time.Second)
	st, err := b.Describe(ctx(t, 5*time.Second), "pool")
	if err != nil || len(st.Holders) != 2 || len(st.Waiters) != 0 {
		t.Fatalf("after the queued process died: %+v, %v", st, err)
	}
}

// One release granting many waiters of one process hands every grant
// over (more than a doorbell queues at once), without the one-minute
// re-check.
func TestOneReleaseGrantsManyWaitersOfAProcess(t *testing.T) {
	const n = 40
	dir := t.TempDir()
	c := sema.New(open(t, dir))
	defer c.Close()
	l, err := c.Semaphore("many", n).Acquire(ctx(t, 5*time.Second), sema.WithWeight(n))
	if err != nil {
		t.Fatal(err)
	}
	h := startHelper(t, "many", envDir+"="+dir, envName+"=many", envArg+"="+strconv.Itoa(n)+" "+strconv.Itoa(n))
	h.expect("started", 10*time.Second)
	waitQueued(t, dir, "many", n)
	if err := l.Release(ctx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	h.expect("all", 10*time.Second)
	if err := h.wait(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// On a lock, a process that releases and then exits makes no waiter read
// the state: each waits behind the process just ahead of it, alive, and
// the holder it saw when it queued has released (the shell loop of sema
// run, where every holder exits after its release).
func TestExitAfterReleaseIsNoDeathToTheQueue(t *testing.T) {
	dir := t.TempDir()
	first := startHelper(t, "queue", envDir+"="+dir, envName+"=q", envTTL+"=30s", envArg+"=1 1")
	first.expect("granted", 10*time.Second)
	hs := queueHelpers(t, dir, "q", 4, 1, 1)
	prev := first
	for i, h := range hs {
		io.WriteString(prev.stdin, "release\n")
		prev.expect("released", 10*time.Second)
		h.expect("granted", 10*time.Second)
		prev.stdin.(io.Closer).Close()
		if err := prev.wait(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		io.WriteString(h.stdin, "looks\n")
		// The first waiter looks if the holder's exit reaches it before its
		// grant: it waited behind that holder.
		if n := atoi64(t, h.expect("looks", 10*time.Second)[0]); n != 0 && i > 0 {
			t.Fatalf("waiter %d read the state %d times after processes exited that had released", i, n)
		}
		prev = h
	}
}

// A waiter that leaves the queue of a lock, its process living on, tells
// the one behind it: that one watches the holder from then on, and is
// granted at once when the holder is killed, long before its one-minute
// re-check.
func TestLeavingWaiterHandsTheWatchBack(t *testing.T) {
	dir := t.TempDir()
	holder := startHelper(t, "queue", envDir+"="+dir, envName+"=q", envTTL+"=30s", envArg+"=1 1")
	holder.expect("granted", 10*time.Second)
	hs := queueHelpers(t, dir, "q", 2, 1, 1)
	io.WriteString(hs[0].stdin, "cancel\n")
	hs[0].expect("cancelled", 10*time.Second)
	if err := holder.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	hs[1].expect("granted", 10*time.Second)
}

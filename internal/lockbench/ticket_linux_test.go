package lockbench

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func openTwoTicketLocks(t *testing.T) (a, b *ticketLock) {
	path := filepath.Join(t.TempDir(), "counter.fifo")
	if err := resetTicketLock(path); err != nil {
		t.Fatal(err)
	}
	for _, l := range []**ticketLock{&a, &b} {
		var err error
		if *l, err = openTicketLock(path); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { (*l).close() })
	}
	return a, b
}

// An unlock through one mapping wakes the waiter sleeping on another, in
// ticket order.
func TestTicketLockHandsOver(t *testing.T) {
	a, b := openTwoTicketLocks(t)
	unlockA, err := a.lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		unlockB, err := b.lock(context.Background())
		if err == nil {
			err = unlockB()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("second lock returned while the first was held: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := unlockA(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken by the unlock")
	}
}

// A holder that never unlocks (a dead process) makes the waiters fail
// once the lock has not moved for ticketStuck, rather than hang the run.
func TestTicketLockStuck(t *testing.T) {
	old := ticketStuck
	ticketStuck = 200 * time.Millisecond
	t.Cleanup(func() { ticketStuck = old })
	a, b := openTwoTicketLocks(t)
	if _, err := a.lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := b.lock(context.Background())
	if err == nil || !strings.Contains(err.Error(), "died") {
		t.Fatalf("lock behind a holder that never unlocks: %v, want an error saying it is stuck", err)
	}
}

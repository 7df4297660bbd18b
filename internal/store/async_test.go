package store

import (
	"errors"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

// TestAcquireAsync: a queued request is notified once, on the goroutine
// that granted it and after the store's lock is free; a cancelled one is
// never notified; closing the store notifies the rest with ErrClosed.
func TestAcquireAsync(t *testing.T) {
	s := openT(t, t.TempDir())
	ctx := t.Context()
	who := Caller{Principal: "p"}
	req := func(id string) sema.Request {
		return sema.Request{Name: "async", ID: id, Limit: 1, Weight: 1, TTL: time.Minute}
	}
	if _, err := s.AcquireAs(ctx, req("A"), who, false); err != nil {
		t.Fatal(err)
	}
	got := make(chan *Wait, 3)
	notify := func(wt *Wait) {
		s.mu.Lock() // the lock is free in notify: no deadlock
		s.mu.Unlock()
		got <- wt
	}
	_, wb, err := s.AcquireAsync(ctx, req("B"), who, notify)
	if err != nil || wb == nil {
		t.Fatalf("queue B: %v %v", wb, err)
	}
	_, wc, err := s.AcquireAsync(ctx, req("C"), who, notify)
	if err != nil || wc == nil {
		t.Fatalf("queue C: %v %v", wc, err)
	}
	if !wc.Cancel() || wc.Cancel() {
		t.Fatal("Cancel of a waiting request: want true once, then false")
	}
	if err := s.ReleaseAs(ctx, "async", "A", who); err != nil {
		t.Fatal(err)
	}
	// ReleaseAs returned: B's notify has run, on this goroutine.
	select {
	case wt := <-got:
		g, err := wt.Result()
		if wt != wb || err != nil || g.ID != "B" {
			t.Fatalf("notified %+v %v", g, err)
		}
		if !wt.Early() {
			if err := wt.Durable(ctx); err != nil {
				t.Fatal(err)
			}
		}
	default:
		t.Fatal("B not notified by the release that granted it")
	}
	if wb.Cancel() {
		t.Fatal("Cancel of a granted request reported true")
	}
	// A waiter left at Close is notified with ErrClosed.
	_, wd, err := s.AcquireAsync(ctx, req("D"), who, notify)
	if err != nil || wd == nil {
		t.Fatalf("queue D: %v %v", wd, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case wt := <-got:
		if _, err := wt.Result(); wt != wd || !errors.Is(err, sema.ErrClosed) {
			t.Fatalf("at close: %v", err)
		}
	default:
		t.Fatal("D not notified at Close")
	}
	if len(got) != 0 {
		t.Fatal("a cancelled request was notified")
	}
}

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

// TestAcquireDeferred: an immediate grant (and the repeat of a live
// lease's ID) is notified only once its record is on disk, on the
// committer's goroutine, without blocking the caller; a try that must wait
// fails at once; a log that fails gives the grant back and reports it.
func TestAcquireDeferred(t *testing.T) {
	s := openT(t, t.TempDir())
	ctx := t.Context()
	who := Caller{Principal: "p"}
	r := func(name, id string) sema.Request {
		return sema.Request{Name: name, ID: id, Limit: 1, Weight: 1, TTL: time.Minute}
	}
	got := make(chan *Wait, 4)
	notify := func(wt *Wait) { got <- wt }

	// Stall the committer: the grant must not be notified before it.
	stall := make(chan struct{})
	hook := func(w *wal) {
		if w == s.wal {
			<-stall
		}
	}
	testHookCommit.Store(&hook)
	wt, err := s.AcquireDeferred(ctx, r("d", "A"), who, false, notify)
	if err != nil || wt == nil || !wt.Immediate() {
		t.Fatalf("deferred grant: %v %v", wt, err)
	}
	select {
	case <-got:
		testHookCommit.Store(nil)
		close(stall)
		t.Fatal("notified before the grant reached disk")
	case <-time.After(50 * time.Millisecond):
	}
	testHookCommit.Store(nil)
	close(stall)
	w := <-got
	g, err := w.Result()
	if w != wt || err != nil || g.ID != "A" || !w.Early() || w.Cancel() {
		t.Fatalf("notified %+v %v (early %v)", g, err, w.Early())
	}
	if s.wal.durable.Load() < s.names["d"].find("A").seq {
		t.Fatal("notified, but the grant is not durable")
	}
	// A repeat of the live lease: the same lease, notified.
	if wt, err := s.AcquireDeferred(ctx, r("d", "A"), who, false, notify); err != nil || wt == nil {
		t.Fatalf("repeat: %v %v", wt, err)
	}
	if g2, err := (<-got).Result(); err != nil || g2.Token != g.Token {
		t.Fatalf("repeat answered %+v %v, want token %d", g2, err, g.Token)
	}
	// A try that must wait fails at once; a waiting one is queued.
	var held *sema.HeldError
	if wt, err := s.AcquireDeferred(ctx, r("d", "B"), who, false, notify); wt != nil || !errors.As(err, &held) {
		t.Fatalf("try on a held name: %v %v", wt, err)
	}
	wq, err := s.AcquireDeferred(ctx, r("d", "C"), who, true, notify)
	if err != nil || wq == nil || wq.Immediate() {
		t.Fatalf("queued: %v %v", wq, err)
	}
	if err := s.ReleaseAs(ctx, "d", "A", who); err != nil {
		t.Fatal(err)
	}
	if gc, err := (<-got).Result(); err != nil || gc.ID != "C" {
		t.Fatalf("queued request: %+v %v", gc, err)
	}

	// A log that cannot be written: the grant is given back and notify
	// reports the error.
	s.wal.file.Close()
	wf, err := s.AcquireDeferred(ctx, r("broken", "F"), who, false, notify)
	if err != nil || wf == nil {
		t.Fatalf("grant before the write fails: %v %v", wf, err)
	}
	if _, err := (<-got).Result(); !errors.Is(err, sema.ErrUnavailable) {
		t.Fatalf("grant on a failed log: %v", err)
	}
	if st, err := s.Describe(ctx, "broken"); err != nil || len(st.Holders) != 0 {
		t.Fatalf("the failed grant is held: %+v, %v", st, err)
	}
}

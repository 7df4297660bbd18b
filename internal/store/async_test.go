package store

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

// outcome is one answer of AcquireAsync.
type outcome struct {
	g   sema.Grant
	err error
}

// TestAcquireAsyncQueue: a queued request is answered once, on the
// goroutine that granted it and after the store's lock is free; a
// withdrawn one is never answered; closing the store answers the rest
// with ErrClosed.
func TestAcquireAsyncQueue(t *testing.T) {
	s := openT(t, t.TempDir())
	ctx := t.Context()
	who := Caller{Principal: "p"}
	req := func(id string) sema.Request {
		return sema.Request{Name: "async", ID: id, Limit: 1, Weight: 1, TTL: time.Minute}
	}
	if _, err := s.AcquireAs(ctx, req("A"), who, false); err != nil {
		t.Fatal(err)
	}
	got := make(chan outcome, 4)
	done := func(g sema.Grant, err error) {
		s.mu.Lock() // the lock is free in done: no deadlock
		s.mu.Unlock()
		got <- outcome{g, err}
	}
	pb := s.AcquireAsync(req("B"), who, true, done)
	pc := s.AcquireAsync(req("C"), who, true, done)
	if pb == nil || pc == nil || len(got) != 0 {
		t.Fatalf("queued requests answered at once: %d", len(got))
	}
	if !pc.Cancel() || pc.Cancel() {
		t.Fatal("Cancel of a waiting request: want true once, then false")
	}
	if err := s.ReleaseAs(ctx, "async", "A", who); err != nil {
		t.Fatal(err)
	}
	o := <-got // a handoff: answered at once, or once on disk
	if o.err != nil || o.g.ID != "B" {
		t.Fatalf("answered %+v %v", o.g, o.err)
	}
	if pb.Cancel() {
		t.Fatal("Cancel of a granted request reported true")
	}
	// A waiter left at Close is answered ErrClosed.
	pd := s.AcquireAsync(req("D"), who, true, done)
	if pd == nil {
		t.Fatal("D refused")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-got:
		if !errors.Is(o.err, sema.ErrClosed) {
			t.Fatalf("at close: %v", o.err)
		}
	default:
		t.Fatal("D not answered at Close")
	}
	if len(got) != 0 {
		t.Fatal("a withdrawn request was answered")
	}
}

// TestAcquireAsyncDurable: a grant (and the repeat of a live lease's ID)
// is answered only once its record is on disk, on the committer's
// goroutine, without blocking the caller; a try that must wait is refused
// at once; a log that fails gives the grant back and reports it.
func TestAcquireAsyncDurable(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close() // (an error: its log was broken on purpose)
	ctx := t.Context()
	who := Caller{Principal: "p"}
	r := func(name, id string) sema.Request {
		return sema.Request{Name: name, ID: id, Limit: 1, Weight: 1, TTL: time.Minute}
	}
	got := make(chan outcome, 4)
	done := func(g sema.Grant, err error) { got <- outcome{g, err} }

	// Stall the committer: the grant must not be answered before it
	// writes the grant's batch.
	stall, stalled := make(chan struct{}), make(chan struct{}, 1)
	hook := func(w *wal) {
		if w == s.wal {
			select {
			case stalled <- struct{}{}:
			default:
			}
			<-stall
		}
	}
	testHookCommit.Store(&hook)
	if p := s.AcquireAsync(r("d", "A"), who, false, done); p == nil {
		t.Fatal("grant refused")
	}
	<-stalled // the committer holds the grant's batch
	select {
	case <-got:
		testHookCommit.Store(nil)
		close(stall)
		t.Fatal("answered before the grant reached disk")
	default:
	}
	testHookCommit.Store(nil)
	close(stall)
	o := <-got
	if o.err != nil || o.g.ID != "A" {
		t.Fatalf("answered %+v %v", o.g, o.err)
	}
	s.mu.Lock()
	seq := s.names["d"].find("A").seq
	s.mu.Unlock()
	if s.wal.durable.Load() < seq {
		t.Fatal("answered, but the grant is not durable")
	}
	// A repeat of the live lease: the same lease.
	s.AcquireAsync(r("d", "A"), who, false, done)
	if o2 := <-got; o2.err != nil || o2.g.Token != o.g.Token {
		t.Fatalf("repeat answered %+v %v, want token %d", o2.g, o2.err, o.g.Token)
	}
	// A try that must wait is refused at once, on this goroutine.
	var held *sema.HeldError
	if p := s.AcquireAsync(r("d", "B"), who, false, done); p != nil || len(got) != 1 {
		t.Fatalf("try on a held name: %v, %d answers", p, len(got))
	}
	if o := <-got; !errors.As(o.err, &held) {
		t.Fatalf("try on a held name: %v", o.err)
	}
	pq := s.AcquireAsync(r("d", "C"), who, true, done)
	if pq == nil {
		t.Fatal("queued request refused")
	}
	if err := s.ReleaseAs(ctx, "d", "A", who); err != nil {
		t.Fatal(err)
	}
	if o := <-got; o.err != nil || o.g.ID != "C" {
		t.Fatalf("queued request: %+v %v", o.g, o.err)
	}

	// A log that cannot be written: the grant is given back and done
	// reports the error.
	s.wal.file.Close()
	s.AcquireAsync(r("broken", "F"), who, false, done)
	if o := <-got; !errors.Is(o.err, sema.ErrUnavailable) {
		t.Fatalf("grant on a failed log: %v", o.err)
	}
	if st, err := s.Describe(ctx, "broken"); err != nil || len(st.Holders) != 0 {
		t.Fatalf("the failed grant is held: %+v, %v", st, err)
	}
}

// TestQueuedMemoryGivenBack: once a crowd of waiters has left, the index
// of queued requests is made anew (a Go map never shrinks).
func TestQueuedMemoryGivenBack(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	who := Caller{Principal: "p"}
	if _, err := s.AcquireAs(t.Context(), req("crowd", "h", 1), who, false); err != nil {
		t.Fatal(err)
	}
	var ps []*Pending
	for i := range 5000 {
		ps = append(ps, s.AcquireAsync(req("crowd", "w"+strconv.Itoa(i), 1), who, true, func(sema.Grant, error) {}))
	}
	for _, p := range ps {
		if !p.Cancel() {
			t.Fatal("a waiter was not withdrawn")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queuedPeak != 0 || len(s.queued) != 0 {
		t.Fatalf("after the crowd left: peak %d, %d queued", s.queuedPeak, len(s.queued))
	}
}

// TestReleaseWithdrawsQueuedRequest: a release of the lease ID of a
// request still queued (its client gave up on it) withdraws the request,
// so a grant cannot come to nobody; another principal's release does not.
func TestReleaseWithdrawsQueuedRequest(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	ctx := t.Context()
	alice, bob := Caller{Principal: "alice"}, Caller{Principal: "bob"}
	if _, err := s.AcquireAs(ctx, req("w", "holder", 1), alice, false); err != nil {
		t.Fatal(err)
	}
	got := make(chan outcome, 1)
	s.AcquireAsync(req("w", "gaveup", 1), alice, true, func(g sema.Grant, err error) { got <- outcome{g, err} })
	if err := s.ReleaseAs(ctx, "w", "gaveup", bob); !errors.Is(err, sema.ErrNotHeld) || len(got) != 0 {
		t.Fatalf("another principal's release: %v, answered %d", err, len(got))
	}
	if err := s.ReleaseAs(ctx, "w", "gaveup", alice); !errors.Is(err, sema.ErrNotHeld) {
		t.Fatalf("release of a queued id: %v", err)
	}
	if o := <-got; !errors.Is(o.err, sema.ErrNotAcquired) {
		t.Fatalf("the withdrawn request: %+v %v", o.g, o.err)
	}
	if err := s.ReleaseAs(ctx, "w", "holder", alice); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Describe(ctx, "w"); len(st.Holders) != 0 || len(st.Waiters) != 0 {
		t.Fatalf("after the release: %+v", st)
	}
}

package store

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backendtest"
	"github.com/sema-dev/sema/internal/testenv"
)

var quiet = slog.New(slog.DiscardHandler)

func openT(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(Config{Dir: dir, Logger: quiet})
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return s
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Config{
		New: func(t *testing.T) sema.Backend { return openT(t, t.TempDir()) },
		Reopen: func(t *testing.T, b sema.Backend) sema.Backend {
			s := b.(*Store)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return openT(t, s.cfg.Dir)
		},
	})
}

func req(name, id string, limit int64) sema.Request {
	return sema.Request{Name: name, ID: id, Limit: limit, Weight: 1, TTL: 10 * time.Second, Owner: "o-" + id}
}

func TestDirLockedOnce(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	if _, err := Open(Config{Dir: dir, Logger: quiet}); !errors.Is(err, sema.ErrUnavailable) {
		t.Fatalf("second Open of a dir in use: %v, want ErrUnavailable", err)
	}
	s.Close()
	openT(t, dir).Close()
}

func TestPrincipalBinding(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	alice, bob := Caller{Principal: "alice"}, Caller{Principal: "bob"}
	g, err := s.AcquireAs(ctx, req("p", "lease1", 1), alice, false)
	if err != nil {
		t.Fatal(err)
	}
	// Another principal's lease is answered as an unknown ID would be.
	_, unknownRenew := s.RenewAs(ctx, "p", "nosuchlease", time.Second, bob)
	if _, err := s.RenewAs(ctx, "p", g.ID, time.Second, bob); !errors.Is(err, sema.ErrExpired) || !errors.Is(unknownRenew, sema.ErrExpired) {
		t.Errorf("renew by another principal: %v, want ErrExpired as for an unknown id (%v)", err, unknownRenew)
	}
	if err := s.ReleaseAs(ctx, "p", g.ID, bob); !errors.Is(err, sema.ErrNotHeld) {
		t.Errorf("release by another principal: %v, want ErrNotHeld as for an unknown id", err)
	}
	if _, err := s.AcquireAs(ctx, req("p", "lease1", 1), bob, false); !errors.Is(err, ErrForbidden) {
		t.Errorf("idempotent acquire by another principal: %v, want ErrForbidden", err)
	}
	if g2, err := s.AcquireAs(ctx, req("p", "lease1", 1), alice, false); err != nil || g2.Token != g.Token {
		t.Errorf("idempotent acquire by its principal = %+v, %v; want token %d", g2, err, g.Token)
	}
	if err := s.ReleaseAs(ctx, "p", g.ID, Caller{Principal: "root", Admin: true}); err != nil {
		t.Errorf("release by an admin: %v", err)
	}
}

// TestRecoverHonoursLeases: leases survive a reopen with their tokens,
// owners and principals, renew and release work, and a full semaphore is
// still full.
func TestRecoverHonoursLeases(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	ctx := context.Background()
	a, err := s.AcquireAs(ctx, req("r", "a", 2), Caller{Principal: "pa"}, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.AcquireAs(ctx, req("r", "b", 2), Caller{Principal: "pb"}, false)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := s.TryAcquire(ctx, req("other", "c", 1))
	if err := s.Release(ctx, "other", c.ID); err != nil {
		t.Fatal(err)
	}
	// A longer TTL must survive too.
	if _, err := s.RenewAs(ctx, "r", "a", time.Minute, Caller{Principal: "pa"}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = openT(t, dir)
	defer s.Close()
	st, err := s.Describe(ctx, "r")
	if err != nil || len(st.Holders) != 2 || st.Limit != 2 || st.Used != 2 {
		t.Fatalf("after reopen Describe = %+v, %v", st, err)
	}
	for _, h := range st.Holders {
		want := map[string]uint64{"a": a.Token, "b": b.Token}[h.ID]
		if h.Token != want || h.Owner != "o-"+h.ID {
			t.Errorf("holder %+v, want token %d", h, want)
		}
		if h.ID == "a" && time.Until(h.ExpiresAt) < 50*time.Second {
			t.Errorf("lease a expires in %v; its TTL was raised to 1m", time.Until(h.ExpiresAt))
		}
	}
	if st, _ := s.Describe(ctx, "other"); len(st.Holders) != 0 {
		t.Errorf("a released lease came back: %+v", st)
	}
	if _, err := s.TryAcquire(ctx, req("r", "x", 2)); !errors.Is(err, sema.ErrNotAcquired) {
		t.Fatalf("a third holder on a recovered full semaphore: %v", err)
	}
	if err := s.ReleaseAs(ctx, "r", "b", Caller{Principal: "pa"}); !errors.Is(err, sema.ErrNotHeld) {
		t.Errorf("recovered lease lost its principal: %v (another principal's lease is not held for it)", err)
	}
	if _, err := s.RenewAs(ctx, "r", "b", time.Second, Caller{Principal: "pb"}); err != nil {
		t.Errorf("renew of a recovered lease: %v", err)
	}
	if err := s.ReleaseAs(ctx, "r", "b", Caller{Principal: "pb"}); err != nil {
		t.Errorf("release of a recovered lease: %v", err)
	}
	g, err := s.TryAcquire(ctx, req("r", "x", 2))
	if err != nil {
		t.Fatal(err)
	}
	if g.Token <= c.Token {
		t.Errorf("token after reopen %d, want > %d", g.Token, c.Token)
	}
}

func TestWaiterCancelAndClose(t *testing.T) {
	s := openT(t, t.TempDir())
	ctx := context.Background()
	if _, err := s.TryAcquire(ctx, req("w", "h", 1)); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 2)
	go func() { _, err := s.Acquire(cctx, req("w", "w1", 1)); errc <- err }()
	go func() { _, err := s.Acquire(ctx, req("w", "w2", 1)); errc <- err }()
	testenv.WaitFor(t, "2 waiters", func() bool { return s.Stats().Waiters == 2 })
	cancel()
	if err := <-errc; !errors.Is(err, sema.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled waiter: %v", err)
	}
	testenv.WaitFor(t, "1 waiters", func() bool { return s.Stats().Waiters == 1 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, sema.ErrClosed) {
		t.Errorf("waiter at Close: %v, want ErrClosed", err)
	}
	if _, err := s.TryAcquire(ctx, req("w", "z", 1)); !errors.Is(err, sema.ErrClosed) {
		t.Errorf("acquire after Close: %v", err)
	}
}

// TestLogFailureRefusesGrants: once the log cannot be written, grants fail
// with ErrUnavailable and leave nothing held; Err reports why.
func TestLogFailureRefusesGrants(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	if _, err := s.TryAcquire(ctx, req("ok", "a", 1)); err != nil {
		t.Fatal(err)
	}
	s.wal.file.Close() // the next write fails, as on a dead disk
	if _, err := s.TryAcquire(ctx, req("bad", "b", 1)); !errors.Is(err, sema.ErrUnavailable) {
		t.Fatalf("grant with a broken log: %v, want ErrUnavailable", err)
	}
	if s.Err() == nil {
		t.Fatal("Err() is nil after a write failure")
	}
	if st, err := s.Describe(ctx, "bad"); err != nil || len(st.Holders) != 0 {
		t.Fatalf("the failed grant is held: %+v, %v", st, err)
	}
	if _, err := s.TryAcquire(ctx, req("bad", "c", 1)); !errors.Is(err, sema.ErrUnavailable) {
		t.Fatalf("second grant: %v", err)
	}
}

// TestRetryReplacesQueuedWaiter: a second acquire with the lease ID of a
// queued one (a client retrying after a lost connection) takes its place
// in the queue; there are never two leases with one ID.
func TestRetryReplacesQueuedWaiter(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	if _, err := s.TryAcquire(ctx, req("q", "holder", 1)); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { _, err := s.AcquireAs(ctx, req("q", "x", 1), Caller{Principal: "p"}, true); first <- err }()
	testenv.WaitFor(t, "1 waiters", func() bool { return s.Stats().Waiters == 1 })
	other := make(chan error, 1)
	go func() { _, err := s.AcquireAs(ctx, req("q", "y", 1), Caller{Principal: "p"}, true); other <- err }()
	testenv.WaitFor(t, "2 waiters", func() bool { return s.Stats().Waiters == 2 })
	if _, err := s.AcquireAs(ctx, req("q", "x", 1), Caller{Principal: "intruder"}, true); !errors.Is(err, ErrForbidden) {
		t.Fatalf("retry by another principal: %v", err)
	}
	second := make(chan sema.Grant, 1)
	go func() {
		g, err := s.AcquireAs(ctx, req("q", "x", 1), Caller{Principal: "p"}, true)
		if err != nil {
			t.Error(err)
		}
		second <- g
	}()
	if err := <-first; !errors.Is(err, sema.ErrNotAcquired) {
		t.Fatalf("the superseded request: %v", err)
	}
	if n := s.Stats().Waiters; n != 2 {
		t.Fatalf("%d waiters after the retry, want 2", n)
	}
	if err := s.Release(ctx, "q", "holder"); err != nil {
		t.Fatal(err)
	}
	if g := <-second; g.ID != "x" { // the retry kept the first place
		t.Fatalf("granted %+v", g)
	}
	if err := s.Release(ctx, "q", "x"); err != nil {
		t.Fatal(err)
	}
	if err := <-other; err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Describe(ctx, "q"); len(st.Holders) != 1 || st.Holders[0].ID != "y" {
		t.Fatalf("final state %+v", st)
	}
}

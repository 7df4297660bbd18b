package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/testenv"
)

// handoff holds name, queues a waiter and releases, returning the
// waiter's grant (a handoff).
func handoff(t *testing.T, s *Store, name, holderID, waiterID string, ttl time.Duration) sema.Grant {
	t.Helper()
	ctx := context.Background()
	got := make(chan sema.Grant, 1)
	go func() {
		r := req(name, waiterID, 1)
		r.TTL = ttl
		g, err := s.Acquire(ctx, r)
		if err != nil {
			t.Error(err)
		}
		got <- g
	}()
	testenv.WaitFor(t, "the waiter queued", func() bool { st, _ := s.Describe(ctx, name); return len(st.Waiters) == 1 })
	if err := s.Release(ctx, name, holderID); err != nil {
		t.Fatal(err)
	}
	return <-got
}

// TestFastHandoffFence: a handoff answered before its grant reached disk
// is lost in a crash, and the restarted store fences the name for a full
// TTL, so nobody else is granted while its holder may still run; leases
// that did reach disk are honoured; tokens never go back.
func TestFastHandoffFence(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	const ttl = 400 * time.Millisecond
	a := req("hot", "a", 1)
	a.TTL = ttl
	if _, err := s.TryAcquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	b := handoff(t, s, "hot", "a", "b", ttl) // arms fast mode; waits for its fsync
	// Stall the committer: nothing more reaches disk.
	stall := make(chan struct{})
	hook := func(w *wal) {
		if w == s.wal {
			<-stall
		}
	}
	testHookCommit.Store(&hook)
	defer func() {
		testHookCommit.Store(nil)
		close(stall)
	}()
	c := handoff(t, s, "hot", "b", "c", ttl) // answered although not on disk
	if c.Token <= b.Token {
		t.Fatalf("tokens %d then %d", b.Token, c.Token)
	}
	if s.wal.durable.Load() >= s.names["hot"].find("c").seq {
		t.Fatal("the handoff's grant reached disk: the test did not stall the log")
	}

	restarted := time.Now()
	s2 := openT(t, crashCopy(t, s))
	defer s2.Close()
	if _, err := s2.Renew(ctx, "hot", "c", ttl); !errors.Is(err, sema.ErrLeaseLost) {
		t.Fatalf("renew of the lost handoff: %v, want lease lost", err)
	}
	// b's release did not reach disk either: b is back, with the fence.
	if err := s2.Release(ctx, "hot", "b"); err != nil {
		t.Fatalf("release of the recovered lease b: %v", err)
	}
	_, err := s2.TryAcquire(ctx, req("hot", "d", 1))
	var held *sema.HeldError
	if !errors.As(err, &held) || len(held.Holders) != 1 || held.Holders[0].Token != 0 {
		t.Fatalf("TryAcquire on a fenced name: %v, want the recovery fence as holder", err)
	}
	fenceEnd := held.Holders[0].ExpiresAt
	if fenceEnd.Before(restarted.Add(ttl)) {
		t.Fatalf("fence ends %v, before restart+ttl %v", fenceEnd, restarted.Add(ttl))
	}
	d := req("hot", "d", 1)
	g, err := s2.Acquire(ctx, d) // waits for the fence to lift, by the timer
	if err != nil {
		t.Fatal(err)
	}
	if g.AcquiredAt.Before(fenceEnd) {
		t.Errorf("granted at %v, before the fence ended at %v", g.AcquiredAt, fenceEnd)
	}
	if g.Token <= c.Token {
		t.Errorf("token %d after the restart; the lost handoff had %d", g.Token, c.Token)
	}
}

// TestFenceHonoursDurableLeases: a lease on disk survives the crash of a
// fenced name, can be renewed and released, and its release frees nothing
// before the fence ends; an admin force-release lifts the fence.
func TestFenceHonoursDurableLeases(t *testing.T) {
	s := openT(t, t.TempDir())
	ctx := context.Background()
	if _, err := s.TryAcquire(ctx, req("f", "a", 1)); err != nil {
		t.Fatal(err)
	}
	b := handoff(t, s, "f", "a", "b", 10*time.Second) // on disk, fast mode armed
	s2 := openT(t, crashCopy(t, s))
	s.Close()
	defer s2.Close()
	if _, err := s2.Renew(ctx, "f", "b", time.Second); err != nil {
		t.Fatalf("renew of a durable lease on a fenced name: %v", err)
	}
	if err := s2.Release(ctx, "f", "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.TryAcquire(ctx, req("f", "x", 1)); !errors.Is(err, sema.ErrNotAcquired) {
		t.Fatalf("granted during the fence: %v", err)
	}
	hs, err := s2.ForceRelease(ctx, "f", "")
	if err != nil || len(hs) != 1 || hs[0].Token != 0 {
		t.Fatalf("force-release of the fence = %+v, %v", hs, err)
	}
	if g, err := s2.TryAcquire(ctx, req("f", "x", 1)); err != nil || g.Token <= b.Token {
		t.Fatalf("after lifting the fence: %+v, %v", g, err)
	}
	// Idle again: an UNFAST record means no fence after the next restart.
	if err := s2.Release(ctx, "f", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.TryAcquire(ctx, req("other", "o", 1)); err != nil { // flushes the release
		t.Fatal(err)
	}
	s3 := openT(t, crashCopy(t, s2))
	defer s3.Close()
	if _, err := s3.TryAcquire(ctx, req("f", "y", 1)); err != nil {
		t.Errorf("a name gone idle is still fenced after a restart: %v", err)
	}
}

// TestCleanCloseLeavesNoFence: after a clean Close every early handoff
// is on disk, so the reopened store fences nothing and honours the lease.
func TestCleanCloseLeavesNoFence(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	ctx := context.Background()
	if _, err := s.TryAcquire(ctx, req("hot", "a", 1)); err != nil {
		t.Fatal(err)
	}
	handoff(t, s, "hot", "a", "b", time.Minute) // arms fast mode
	c := handoff(t, s, "hot", "b", "c", time.Minute)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir)
	defer s.Close()
	st, err := s.Describe(ctx, "hot")
	if err != nil || len(st.Holders) != 1 || st.Holders[0].ID != "c" || st.Holders[0].Token != c.Token {
		t.Fatalf("after a clean restart: %+v %v (want c, no fence)", st, err)
	}
	if err := s.Release(ctx, "hot", "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TryAcquire(ctx, req("hot", "d", 1)); err != nil {
		t.Fatalf("a clean restart fenced the name: %v", err)
	}
}

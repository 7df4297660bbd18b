package redis_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/testenv"
)

// grantSeen is one grant as a client saw it.
type grantSeen struct {
	token              uint64
	sent, granted, end time.Time // acquire sent; grant received; the client stopped relying on it
}

// TestRestartWithPersistence: clients hammer a limit-2 semaphore while
// Redis (append-only file, fsync always) is killed with SIGKILL and
// restarted, twice. By the clients' clocks no instant has more than 2
// holders, and a grant received before another acquire was sent has the
// smaller token: tokens never go back. A lease granted before the
// restarts is still held after them.
func TestRestartWithPersistence(t *testing.T) {
	const clients, limit = 8, 2
	r := testenv.StartRedis(t, testenv.RedisOptions{Persist: true})
	b := open(t, r.URL())
	if g := b.Guarantees(); !g.DurableFencing {
		t.Fatalf("with appendfsync always: %+v, want DurableFencing", g)
	}
	kept, err := sema.New(b).Mutex("restart/kept").Acquire(bg(t), sema.WithTTL(time.Minute), sema.WithoutKeepalive())
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var (
		mu    sync.Mutex
		seen  []grantSeen
		fails atomic.Int64
		wg    sync.WaitGroup
	)
	// Two backends, four workers each: calls that meet go out together
	// (autopipelined), and must survive the restarts as well.
	var cs [2]*sema.Client
	for i := range cs {
		cs[i] = sema.New(open(t, r.URL()+"?recheck=200ms"), sema.WithReleaseTimeout(2*time.Second))
	}
	for i := range clients {
		s := cs[i%2].Semaphore("restart/hammer", limit, sema.WithTTL(time.Second))
		wg.Go(func() {
			for ctx.Err() == nil {
				g := grantSeen{sent: time.Now()}
				l, err := s.Acquire(ctx)
				if err != nil {
					if ctx.Err() == nil {
						fails.Add(1)
						time.Sleep(10 * time.Millisecond)
					}
					continue
				}
				g.granted, g.token = time.Now(), l.Token()
				select { // hold a little, or until the lease is lost
				case <-time.After(time.Duration(rand.IntN(2000)) * time.Microsecond):
				case <-l.Done():
				}
				g.end = time.Now()
				if l.Err() != nil { // lost while held: it ended when Done closed
					g.end = g.granted
				}
				_ = l.Release(context.Background())
				mu.Lock()
				seen = append(seen, g)
				mu.Unlock()
			}
		})
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	waitGrants := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); count() < n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("only %d grants, want %d (%d failed acquires)", count(), n, fails.Load())
			}
		}
	}
	waitGrants(150)
	for range 2 {
		r.Restart(t, true)
		waitGrants(count() + 150)
	}
	stop()
	wg.Wait()
	checkGrants(t, seen, limit)
	if err := kept.Refresh(bg(t)); err != nil {
		t.Fatalf("a lease granted before the restarts: %v", err)
	}
	if err := kept.Release(bg(t)); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d grants, %d failed acquires, 2 kill -9 restarts of Redis", len(seen), fails.Load())
}

// checkGrants checks exclusion and token order on the clients' records.
func checkGrants(t *testing.T, gs []grantSeen, limit int) {
	t.Helper()
	type event struct {
		at    time.Time
		delta int
	}
	var evs []event
	for _, g := range gs {
		evs = append(evs, event{g.granted, +1}, event{g.end, -1})
	}
	slices.SortFunc(evs, func(a, b event) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // ends first
	})
	live := 0
	for _, e := range evs {
		if live += e.delta; live > limit {
			t.Fatalf("%d holders at %v (limit %d)", live, e.at, limit)
		}
	}
	byGrant := slices.Clone(gs)
	slices.SortFunc(byGrant, func(a, b grantSeen) int { return a.granted.Compare(b.granted) })
	bySent := slices.Clone(gs)
	slices.SortFunc(bySent, func(a, b grantSeen) int { return a.sent.Compare(b.sent) })
	var high uint64
	i := 0
	tokens := map[uint64]bool{}
	for _, g := range bySent {
		for ; i < len(byGrant) && byGrant[i].granted.Before(g.sent); i++ {
			high = max(high, byGrant[i].token)
		}
		if g.token <= high {
			t.Fatalf("token went back: %d granted to an acquire sent after %d was received", g.token, high)
		}
		if tokens[g.token] {
			t.Fatalf("token %d granted twice", g.token)
		}
		tokens[g.token] = true
	}
}

// TestRestartWithoutPersistence: a Redis that keeps nothing loses every
// lease and the token counter in a restart, and says so in its
// guarantees; tokens still go up, as they follow Redis's clock.
func TestRestartWithoutPersistence(t *testing.T) {
	r := testenv.StartRedis(t, testenv.RedisOptions{})
	b := open(t, r.URL())
	g := b.Guarantees()
	if g.DurableFencing || !strings.Contains(g.Notes, "append-only file is off") {
		t.Fatalf("without persistence: %+v", g)
	}
	c := sema.New(b)
	l, err := c.Mutex("restart/volatile").Acquire(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	r.Restart(t, true)
	st, err := b.Describe(bg(t), "restart/volatile")
	if err != nil || len(st.Holders) != 0 {
		t.Fatalf("after a restart without persistence: %+v, %v; want the lease gone", st, err)
	}
	l2, err := c.Mutex("restart/volatile").Acquire(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token() <= l.Token() {
		t.Fatalf("token went back after the restart: %d, was %d", l2.Token(), l.Token())
	}
}

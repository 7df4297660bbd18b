package etcd_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/testenv"
)

// TestLeaderKilled runs a lock hammered by three clients (each connected to
// all members of a three-member cluster) while the leader is killed, and
// later restarted: never two holders, tokens strictly increasing in the
// order of the grants, and the waiters carry on once a new leader is
// elected.
func TestLeaderKilled(t *testing.T) {
	c := testenv.StartEtcd(t, 3)
	var (
		held    atomic.Int64
		mu      sync.Mutex
		tokens  []uint64
		stop    atomic.Bool
		retried atomic.Int64
	)
	grants := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(tokens)
	}
	var wg sync.WaitGroup
	for range 3 {
		cl := sema.New(open(t, c, "fo"))
		t.Cleanup(func() { _ = cl.Close() })
		for range 3 {
			wg.Go(func() {
				m := cl.Mutex("fo", sema.WithTTL(5*time.Second))
				for !stop.Load() {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					l, err := m.Acquire(ctx)
					cancel()
					if err != nil {
						// Unavailable while there is no leader: try again.
						if !errors.Is(err, sema.ErrUnavailable) && !errors.Is(err, sema.ErrNotAcquired) {
							t.Errorf("Acquire: %v", err)
							return
						}
						retried.Add(1)
						time.Sleep(50 * time.Millisecond)
						continue
					}
					if n := held.Add(1); n > 1 {
						t.Errorf("%d holders at once", n)
					}
					mu.Lock()
					if len(tokens) > 0 && l.Token() <= tokens[len(tokens)-1] {
						t.Errorf("token %d granted after %d", l.Token(), tokens[len(tokens)-1])
					}
					tokens = append(tokens, l.Token())
					mu.Unlock()
					time.Sleep(time.Millisecond)
					held.Add(-1)
					if err := l.Release(context.Background()); err != nil && !errors.Is(err, sema.ErrUnavailable) {
						t.Logf("Release: %v", err) // lost during the election: it expires by its TTL
					}
				}
			})
		}
	}
	waitGrants := func(n int, what string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for grants() < n {
			if time.Now().After(deadline) {
				stop.Store(true)
				t.Fatalf("%s: only %d grants, want %d", what, grants(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitGrants(50, "before the kill")
	leader := c.Leader()
	if leader < 0 {
		t.Fatal("no leader")
	}
	killedAt, before := time.Now(), grants()
	c.Members[leader].Kill()
	waitGrants(before+50, "after the leader was killed")
	t.Logf("leader %d killed: 50 more grants in %v", leader, time.Since(killedAt).Round(time.Millisecond))
	c.Members[leader].Restart(t)
	waitGrants(grants()+50, "after the member came back")
	stop.Store(true)
	wg.Wait()
	t.Logf("%d grants, %d acquires retried", grants(), retried.Load())
}

package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/testenv"
)

// holders returns the lease IDs a server holds for name, read with a
// plain client (on a replica too).
func holdersOn(t *testing.T, r *testenv.Redis, name string) []string {
	t.Helper()
	rc := goredis.NewClient(&goredis.Options{Addr: r.Addr})
	defer rc.Close()
	fields, err := rc.HGetAll(bg(t), "sema:{"+name+"}:s").Result()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for f, v := range fields {
		if len(v) > 0 && v[0] == 'h' {
			ids = append(ids, f)
		}
	}
	return ids
}

// TestWaitReplicas: with wait_replicas=1 a grant is answered only once the
// replica has it; with the replica frozen, grants fail and are given back;
// after the primary dies and the replica is promoted, the grant is still
// there and tokens go on upward.
func TestWaitReplicas(t *testing.T) {
	primary := testenv.StartRedis(t, testenv.RedisOptions{})
	replica := testenv.StartRedisReplica(t, primary, testenv.RedisOptions{})
	b := open(t, primary.URL()+"?wait_replicas=1&wait_timeout=300ms")
	if g := b.Guarantees(); !g.SurvivesFailover || g.Linearizable {
		t.Fatalf("guarantees with wait_replicas: %+v", g)
	}
	c := sema.New(b)

	// A grant, and a hand-off to a waiter, are on the replica when answered.
	l, err := c.Mutex("w/held").Acquire(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	if ids := holdersOn(t, replica, "w/held"); len(ids) != 1 || ids[0] != l.ID() {
		t.Fatalf("replica holds %v right after the grant, want [%s]", ids, l.ID())
	}
	first, err := c.Mutex("w/handoff").Acquire(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	waiter := make(chan *sema.Lease, 1)
	go func() { // queued behind first: started once first holds
		l2, err := sema.New(open(t, primary.URL()+"?wait_replicas=1")).Mutex("w/handoff").Acquire(bg(t))
		if err != nil {
			t.Error(err)
		}
		waiter <- l2
	}()
	waitQueued(t, b, "w/handoff", 1)
	if err := first.Release(bg(t)); err != nil {
		t.Fatal(err)
	}
	if l2 := <-waiter; l2 == nil {
		t.FailNow()
	} else if ids := holdersOn(t, replica, "w/handoff"); len(ids) != 1 || ids[0] != l2.ID() {
		t.Fatalf("replica holds %v after the hand-off, want [%s]", ids, l2.ID())
	}

	// The replica stops acknowledging: a grant fails and is given back.
	replica.Freeze()
	start := time.Now()
	_, err = c.Mutex("w/frozen").TryAcquire(bg(t))
	if !errors.Is(err, sema.ErrUnavailable) {
		replica.Thaw()
		t.Fatalf("TryAcquire with the replica frozen: %v, want ErrUnavailable", err)
	}
	t.Logf("with the replica frozen: %v after %v", err, time.Since(start))
	if st, err := b.Describe(bg(t), "w/frozen"); err != nil || len(st.Holders) != 0 {
		replica.Thaw()
		t.Fatalf("an unacknowledged grant stayed: %+v, %v", st, err)
	}
	replica.Thaw()

	// Failover: the primary dies, the replica takes over with the grant.
	before := l.Token()
	primary.Kill()
	replica.Promote(t)
	b2 := open(t, replica.URL())
	st, err := b2.Describe(bg(t), "w/held")
	if err != nil || len(st.Holders) != 1 || st.Holders[0].ID != l.ID() {
		t.Fatalf("after failover: %+v, %v; want the lease %s", st, err, l.ID())
	}
	if _, err := sema.New(b2).Mutex("w/held").TryAcquire(bg(t)); !errors.Is(err, sema.ErrNotAcquired) {
		t.Fatalf("after failover the lock is free: %v", err)
	}
	if err := b2.Release(bg(t), "w/held", l.ID()); err != nil {
		t.Fatal(err)
	}
	l3, err := sema.New(b2).Mutex("w/held").Acquire(bg(t))
	if err != nil || l3.Token() <= before {
		t.Fatalf("after failover: token %v (%v), was %d", l3, err, before)
	}
}

// TestFailoverWithoutWait shows what the default mode does not promise: a
// failover that promotes a replica which had not got a grant yet (here the
// replica is promoted while the old primary still answers, as in a
// partition) loses that grant — the lock is free again — but the next
// token is still higher (tokens follow Redis's clock when the counter is
// lost).
func TestFailoverWithoutWait(t *testing.T) {
	primary := testenv.StartRedis(t, testenv.RedisOptions{})
	replica := testenv.StartRedisReplica(t, primary, testenv.RedisOptions{})
	b := open(t, primary.URL())
	if g := b.Guarantees(); g.SurvivesFailover {
		t.Fatalf("guarantees without wait_replicas: %+v", g)
	}
	old, err := sema.New(b).Mutex("nw/lost").Acquire(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Release(bg(t)); err != nil {
		t.Fatal(err)
	}
	replica.Promote(t)
	l, err := sema.New(b).Mutex("nw/lost").Acquire(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	primary.Kill()
	l2, err := sema.New(open(t, replica.URL())).Mutex("nw/lost").TryAcquire(bg(t))
	if err != nil {
		t.Fatalf("after failover: %v (the unreplicated grant was expected to be lost)", err)
	}
	if l2.Token() <= l.Token() {
		t.Fatalf("token went back after failover: %d, was %d", l2.Token(), l.Token())
	}
}

// waitQueued waits until name shows n waiters.
func waitQueued(t *testing.T, b interface {
	Describe(context.Context, string) (sema.Status, error)
}, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if st, err := b.Describe(context.Background(), name); err == nil && len(st.Waiters) >= n {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("%q never showed %d waiters", name, n)
}

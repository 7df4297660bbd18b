package redis_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/testenv"
)

// TestKeysCarryTTLs: while a name is in use its state and queue keys
// expire after its latest lease or waiter (so a name whose holders all
// died goes by itself); an idle name keeps only its token counter.
func TestKeysCarryTTLs(t *testing.T) {
	r := testenv.SharedRedis(t)
	rc := rawClient(t, r, "")
	b := open(t, r.URL())
	ctx := bg(t)
	s, q, tk := "sema:{k/ttl}:s", "sema:{k/ttl}:q", "sema:{k/ttl}:t"

	q1 := req("k/ttl", "h1")
	q1.TTL = 5 * time.Second
	if _, err := b.TryAcquire(ctx, q1); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = b.Acquire(ctx, req("k/ttl", "w1")) }()
	waitQueued(t, b, "k/ttl", 1)
	for _, k := range []string{s, q} {
		if ttl := rc.PTTL(ctx, k).Val(); ttl < 5*time.Second || ttl > 20*time.Second {
			t.Errorf("%s: TTL %v while in use, want after the lease (5 s) plus slack", k, ttl)
		}
	}
	if ttl := rc.PTTL(ctx, tk).Val(); ttl != -1 {
		t.Errorf("token counter: TTL %v, want none", ttl)
	}
	if err := b.Release(ctx, "k/ttl", "h1"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if st, _ := b.Describe(ctx, "k/ttl"); len(st.Holders) == 1 && st.Holders[0].ID == "w1" {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the waiter was not granted: %+v", st)
		}
	}
	if err := b.Release(ctx, "k/ttl", "w1"); err != nil {
		t.Fatal(err)
	}
	keys := rc.Exists(ctx, s, q, tk).Val()
	if keys != 1 {
		t.Fatalf("an idle name keeps %d keys, want only its token counter", keys)
	}
}

// TestGuarantees: what the backend declares depends on what Open finds.
func TestGuarantees(t *testing.T) {
	shared := open(t, testenv.SharedRedis(t).URL()).Guarantees()
	want := sema.Guarantees{Scope: sema.ScopeCluster, FIFO: true, Wakeup: "pub/sub"}
	if shared.Scope != want.Scope || !shared.FIFO || shared.Linearizable || shared.DurableFencing || shared.SurvivesFailover || shared.Wakeup != want.Wakeup {
		t.Errorf("a Redis without persistence: %+v", shared)
	}
	if c := open(t, testenv.SharedRedisCluster(t).URL()).Guarantees(); !strings.Contains(c.Notes, "cluster:") {
		t.Errorf("a cluster: %+v", c)
	}

	// Persistence on, but CONFIG refused to the user: unknown, so not
	// declared.
	r := testenv.StartRedis(t, testenv.RedisOptions{Persist: true})
	if s, err := r.Do("ACL", "SETUSER", "app", "on", ">pw", "~*", "&*", "+@all", "-config"); err != nil || s != "+OK" {
		t.Fatalf("ACL SETUSER: %q, %v", s, err)
	}
	host := strings.TrimPrefix(r.URL(), "redis://")
	g := open(t, "redis://app:pw@"+host).Guarantees()
	if g.DurableFencing || !strings.Contains(g.Notes, "CONFIG GET was refused") {
		t.Errorf("CONFIG refused: %+v", g)
	}
	if g := open(t, r.URL()).Guarantees(); !g.DurableFencing {
		t.Errorf("appendfsync always: %+v", g)
	}
	if s, err := r.Do("CONFIG", "SET", "appendfsync", "everysec"); err != nil || s != "+OK" {
		t.Fatal(s, err)
	}
	if g := open(t, r.URL()).Guarantees(); g.DurableFencing || !strings.Contains(g.Notes, "everysec") {
		t.Errorf("appendfsync everysec: %+v", g)
	}
}

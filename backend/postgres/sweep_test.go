package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

// The rows of names nobody uses any more go: released ones, and one whose
// holder died (its lease expired and nobody took the name again).
func TestSweep(t *testing.T) {
	cfg := cfgWithPrefix(t, freshPrefix())
	cfg.Sweep = time.Second
	b := open(t, cfg)
	ctx := context.Background()
	for _, name := range []string{"sweep/a", "sweep/b"} {
		g, err := b.TryAcquire(ctx, req(name, "released"))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Release(ctx, name, g.ID); err != nil {
			t.Fatal(err)
		}
	}
	dead := req("sweep/dead", "dead")
	dead.TTL = sema.MinTTL
	if _, err := b.TryAcquire(ctx, dead); err != nil {
		t.Fatal(err)
	}
	held := req("sweep/held", "held")
	held.TTL = time.Minute
	if _, err := b.TryAcquire(ctx, held); err != nil {
		t.Fatal(err)
	}
	a := admin(t)
	count := func(table string) int {
		var n int
		if err := a.QueryRow(ctx, "SELECT count(*) FROM "+cfg.TablePrefix+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for deadline := time.Now().Add(20 * time.Second); count("names") != 1 || count("leases") != 1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 20s: %d names, %d leases; want only the held one", count("names"), count("leases"))
		}
	}
	if st, err := b.Describe(ctx, "sweep/held"); err != nil || len(st.Holders) != 1 {
		t.Fatalf("the held name: %+v, %v", st, err)
	}
}

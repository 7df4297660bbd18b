package mem

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

// Idle names are kept for reuse but never pile up: after churning through
// many names, the map holds the live ones and at most a bounded number of
// idle ones, and the live ones are intact.
func TestIdleEntriesBounded(t *testing.T) {
	b := New()
	ctx := context.Background()
	req := func(name, id string) sema.Request {
		return sema.Request{Name: name, ID: id, Owner: "t", Limit: 1, Weight: 1, TTL: time.Minute}
	}
	for i := range 10 {
		if _, err := b.TryAcquire(ctx, req(fmt.Sprintf("held-%d", i), fmt.Sprintf("h%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 * maxIdle {
		name, id := fmt.Sprintf("churn-%d", i), fmt.Sprintf("c%d", i)
		if _, err := b.TryAcquire(ctx, req(name, id)); err != nil {
			t.Fatal(err)
		}
		if err := b.Release(ctx, name, id); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(b.names); n > 2*maxIdle+10 {
		t.Fatalf("%d entries kept after churn; want at most %d", n, 2*maxIdle+10)
	}
	idle := 0
	for _, e := range b.names {
		if e.idle {
			idle++
		}
	}
	if idle != b.idle {
		t.Fatalf("idle count %d, entries marked idle %d", b.idle, idle)
	}
	for i := range 10 {
		name := fmt.Sprintf("held-%d", i)
		if _, err := b.TryAcquire(ctx, req(name, "other")); err == nil {
			t.Fatalf("%s granted twice after the churn", name)
		}
		if err := b.Release(ctx, name, fmt.Sprintf("h%d", i)); err != nil {
			t.Fatalf("release %s: %v", name, err)
		}
	}
}

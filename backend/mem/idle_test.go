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

// The entry kept at hand for the last name looked up is forgotten with the
// idle entries: a name taken again after a sweep gets an entry in the map
// (else List would not show it, and a reused entry could join two names).
func TestLastEntryForgottenBySweep(t *testing.T) {
	b := New()
	ctx := context.Background()
	req := func(name, id string) sema.Request {
		return sema.Request{Name: name, ID: id, Owner: "t", Limit: 1, Weight: 1, TTL: time.Minute}
	}
	take := func(name, id string) {
		t.Helper()
		if _, err := b.TryAcquire(ctx, req(name, id)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range maxIdle {
		name := fmt.Sprintf("churn-%d", i)
		take(name, "c")
		if err := b.Release(ctx, name, "c"); err != nil {
			t.Fatal(err)
		}
	}
	take("a", "a1")
	if err := b.Release(ctx, "a", "a1"); err != nil { // one idle name too many: a sweep
		t.Fatal(err)
	}
	if len(b.names) != 0 {
		t.Fatalf("%d names after the sweep, want 0", len(b.names))
	}
	take("a", "a2")
	take("b", "b1")
	st, err := b.List(ctx, "")
	if err != nil || len(st) != 2 || st[0].Name != "a" || st[1].Name != "b" {
		t.Fatalf("List after the sweep = %+v, %v; want a and b", st, err)
	}
}

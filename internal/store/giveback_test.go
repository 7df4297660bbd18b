package store

import (
	"errors"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

// TestGiveBack: an undelivered grant given back frees its permits, unless
// a retry of its acquire (same lease ID, as a client sends after losing
// its connection) was answered with the lease meanwhile: that client
// holds it, and giving the first answer back must not end it.
func TestGiveBack(t *testing.T) {
	s := openT(t, t.TempDir())
	ctx := t.Context()
	who := Caller{Principal: "p"}
	req := func(name string) sema.Request {
		return sema.Request{Name: name, ID: "L", Limit: 1, Weight: 1, TTL: time.Minute}
	}

	g, err := s.AcquireAs(ctx, req("undelivered"), who, false)
	if err != nil {
		t.Fatal(err)
	}
	s.GiveBack(g)
	if _, err := s.AcquireAs(ctx, sema.Request{Name: "undelivered", ID: "M", Limit: 1, Weight: 1, TTL: time.Minute}, who, false); err != nil {
		t.Fatalf("the permits of a grant given back are not free: %v", err)
	}

	g, err = s.AcquireAs(ctx, req("retried"), who, false)
	if err != nil {
		t.Fatal(err)
	}
	g2, err := s.AcquireAs(ctx, req("retried"), who, false) // the retry, answered with the lease
	if err != nil || g2.Token != g.Token {
		t.Fatalf("retry = %+v, %v; want token %d", g2, err, g.Token)
	}
	s.GiveBack(g)
	if _, err := s.RenewAs(ctx, "retried", "L", time.Minute, who); err != nil {
		t.Fatalf("the retried lease was ended by the give-back of the first answer: %v", err)
	}
	if _, err := s.AcquireAs(ctx, sema.Request{Name: "retried", ID: "M", Limit: 1, Weight: 1, TTL: time.Minute}, who, false); !errors.Is(err, sema.ErrNotAcquired) {
		t.Fatalf("another request was granted the retried lease's permits: %v", err)
	}
}

package store

import (
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

// TestAcquireNow: a free name is granted at once, a repeated ID returns
// its lease, and a held name reports "must wait" without queueing.
func TestAcquireNow(t *testing.T) {
	s := openT(t, t.TempDir())
	ctx := t.Context()
	who := Caller{Principal: "p"}
	req := sema.Request{Name: "now", ID: "A", Limit: 1, Weight: 1, TTL: time.Minute}
	g, granted, err := s.AcquireNow(ctx, req, who)
	if err != nil || !granted || g.ID != "A" {
		t.Fatalf("free name: %+v %v %v", g, granted, err)
	}
	again, granted, err := s.AcquireNow(ctx, req, who)
	if err != nil || !granted || again.Token != g.Token {
		t.Fatalf("repeated ID: %+v %v %v", again, granted, err)
	}
	other := req
	other.ID = "B"
	if _, granted, err := s.AcquireNow(ctx, other, who); err != nil || granted {
		t.Fatalf("held name: granted %v, err %v", granted, err)
	}
	if st := s.Stats(); st.Waiters != 0 || st.Holders != 1 {
		t.Fatalf("stats after a must-wait: %+v", st)
	}
	if _, _, err := s.AcquireNow(ctx, sema.Request{Name: "", ID: "C", Limit: 1, Weight: 1, TTL: time.Minute}, who); err == nil {
		t.Fatal("invalid request accepted")
	}
	if err := s.ReleaseAs(ctx, "now", "A", who); err != nil {
		t.Fatal(err)
	}
	if _, granted, err := s.AcquireNow(ctx, other, who); err != nil || !granted {
		t.Fatalf("after release: granted %v, err %v", granted, err)
	}
}

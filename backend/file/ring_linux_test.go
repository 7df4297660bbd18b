package file

import (
	"os"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

// ringTarget is a nameFile with one waiter, enough for deliver.
func ringTarget(t testing.TB) (*nameFile, *waiter) {
	f, err := os.CreateTemp(t.TempDir(), "state")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	nf := &nameFile{name: "n", slot: 3, nonce: 77, lk: make(chan struct{}, 1), b: &Backend{done: make(chan struct{})},
		rd: newPreader(rc, f.Name()), leases: map[string]lease{}, waiting: map[string]*waiter{}}
	w := &waiter{req: sema.Request{Name: "n", ID: "LEASEID", Limit: 2, Weight: 1, TTL: time.Minute}, start: time.Now(),
		since: time.Now().UnixNano(), ch: make(chan result, 1)}
	nf.waiting[w.req.ID] = w
	return nf, w
}

// A grant encoded by grantRings is handed to the waiter it names, with
// the token and times as written.
func TestRingRoundTrip(t *testing.T) {
	nf, w := ringTarget(t)
	now := time.Now().UnixNano()
	st := &state{Name: "n", Limit: 2}
	h := &holderRec{ID: "LEASEID", Token: 9, Weight: 1, Acquired: now, Expires: now + int64(time.Minute), Slot: 3, Nonce: 77}
	other := &holderRec{ID: "NOTOURS", Token: 10, Weight: 1, Acquired: now, Expires: now + int64(time.Minute), Slot: 3, Nonce: 77}
	msgs := grantRings(st, []*holderRec{h, other})
	if len(msgs) != 1 || !nf.deliver(msgs[0]) {
		t.Fatalf("rings %d, delivered %v", len(msgs), len(msgs) == 1 && nf.deliver(msgs[0]))
	}
	r := <-w.ch
	if r.err != nil || r.g.Token != 9 || r.g.ExpiresAt.UnixNano() != h.Expires || r.g.Limit != 2 {
		t.Fatalf("grant %+v, %v", r.g, r.err)
	}
	if _, ok := nf.leases["LEASEID"]; !ok || len(nf.waiting) != 0 {
		t.Fatalf("leases %v, waiting %v", nf.leases, nf.waiting)
	}
}

// A ring for another open file, a lost waiter, another weight or an
// expired grant is not used: the state decides.
func TestRingRefused(t *testing.T) {
	now := time.Now().UnixNano()
	for name, h := range map[string]holderRec{
		"other nonce":  {ID: "LEASEID", Token: 9, Weight: 1, Acquired: now, Expires: now + 1e9, Nonce: 78},
		"other weight": {ID: "LEASEID", Token: 9, Weight: 2, Acquired: now, Expires: now + 1e9, Nonce: 77},
		"expired":      {ID: "LEASEID", Token: 9, Weight: 1, Acquired: now - 2e9, Expires: now - 1e9, Nonce: 77},
		"no token":     {ID: "LEASEID", Token: 0, Weight: 1, Acquired: now, Expires: now + 1e9, Nonce: 77},
	} {
		nf, _ := ringTarget(t)
		if nf.deliver(grantRings(&state{Limit: 2}, []*holderRec{&h})[0]) || len(nf.waiting) != 1 {
			t.Errorf("%s: used", name)
		}
	}
	nf, w := ringTarget(t)
	w.lost = true
	h := holderRec{ID: "LEASEID", Token: 9, Weight: 1, Acquired: now, Expires: now + 1e9, Nonce: 77}
	if nf.deliver(grantRings(&state{Limit: 2}, []*holderRec{&h})[0]) || len(nf.waiting) != 1 {
		t.Errorf("lost waiter: used")
	}
}

// Any datagram is used or refused, never a panic, and a refused one
// grants nothing.
func FuzzRing(f *testing.F) {
	now := time.Now().UnixNano()
	h := &holderRec{ID: "LEASEID", Token: 9, Weight: 1, Acquired: now, Expires: now + int64(time.Hour), Nonce: 77}
	f.Add(grantRings(&state{Limit: 2}, []*holderRec{h})[0])
	f.Add([]byte("W"))
	f.Add([]byte("G"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		nf, w := ringTarget(t)
		ok := nf.deliver(msg)
		select {
		case r := <-w.ch:
			if r.g.ID != "LEASEID" || r.g.Weight != 1 || r.g.Limit != 2 || r.g.Token == 0 {
				t.Fatalf("delivered %+v", r.g)
			}
		default:
			if _, held := nf.leases["LEASEID"]; held {
				t.Fatal("lease kept without a grant")
			}
		}
		_ = ok
	})
}

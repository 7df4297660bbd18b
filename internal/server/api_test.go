package server

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/mem"
	"github.com/sema-dev/sema/internal/testenv"
	"github.com/sema-dev/sema/internal/wire"
)

func TestAPIEndToEnd(t *testing.T) {
	ts := newTS(t, testTokens, nil)
	name := "jobs/nightly report"
	l := ts.mustAcquire(aliceTok, wire.AcquireRequest{Name: name, Limit: 2, Weight: 1, TTLMillis: 5000, Owner: "alice"})
	if l.Name != name || l.Limit != 2 || l.Weight != 1 || l.TTLMillis != 5000 || l.Token == 0 || l.ID == "" ||
		!l.ExpiresAt.After(l.AcquiredAt) || l.Owner != "alice" {
		t.Fatalf("lease = %+v", l)
	}
	// Idempotent retry with the same id: the same lease.
	again := ts.mustAcquire(aliceTok, wire.AcquireRequest{Name: name, Limit: 2, ID: l.ID, TTLMillis: 5000})
	if again.Token != l.Token {
		t.Errorf("retry got token %d, want %d", again.Token, l.Token)
	}
	l2 := ts.mustAcquire(bobTok, wire.AcquireRequest{Name: name, Limit: 2, Owner: "bob"})
	if l2.Token <= l.Token {
		t.Errorf("tokens %d then %d", l.Token, l2.Token)
	}
	// Full: try-acquire answers 409 with the holders, IDs hidden from clients.
	r := ts.acquire(aliceTok, wire.AcquireRequest{Name: name, Limit: 2})
	wantErr(t, r, 409, wire.CodeNotAcquired)
	if e := r.env.Error; e == nil || len(e.Holders) != 2 || e.Limit != 2 || e.Holders[0].ID != "" {
		t.Errorf("not_acquired body = %s", r.raw)
	}
	wantErr(t, ts.acquire(aliceTok, wire.AcquireRequest{Name: name, Limit: 3}), 409, wire.CodeLimitMismatch)

	// Renew.
	r = ts.do("POST", wire.PathRenew, aliceTok, wire.RenewRequest{Name: name, ID: l.ID, TTLMillis: 20000})
	if r.status != 200 || r.env.Lease == nil || r.env.Lease.Token != l.Token || r.env.Lease.TTLMillis != 20000 {
		t.Fatalf("renew: %d %s", r.status, r.raw)
	}
	// Describe: clients see no IDs, admins do.
	st := ts.describe(aliceTok, name)
	if st.Used != 2 || len(st.Holders) != 2 || st.Holders[0].ID != "" || st.Holders[0].Owner != "alice" {
		t.Errorf("client describe = %+v", st)
	}
	if st := ts.describe(adminTok, name); st.Holders[0].ID != l.ID {
		t.Errorf("admin describe = %+v", st)
	}
	// List (admin).
	r = ts.do("GET", wire.PathLocks+"?prefix=jobs/", adminTok, nil)
	var list wire.ListResponse
	if r.status != 200 || json.Unmarshal([]byte(r.raw), &list) != nil || len(list.Locks) != 1 || list.Locks[0].Name != name {
		t.Errorf("list: %d %s", r.status, r.raw)
	}
	// Release, twice: the second succeeds too, saying so; a renewal after
	// it finds the lease not held.
	if r := ts.do("POST", wire.PathRelease, aliceTok, wire.ReleaseRequest{Name: name, ID: l.ID}); r.status != 200 || strings.TrimSpace(r.raw) != "{}" {
		t.Errorf("release: %d %s", r.status, r.raw)
	}
	if r := ts.do("POST", wire.PathRelease, aliceTok, wire.ReleaseRequest{Name: name, ID: l.ID}); r.status != 200 || !r.env.AlreadyReleased {
		t.Errorf("second release: %d %s", r.status, r.raw)
	}
	wantErr(t, ts.do("POST", wire.PathRenew, aliceTok, wire.RenewRequest{Name: name, ID: l.ID}), 404, wire.CodeNotHeld)
	// Force-release (admin), then bob's renew reports why.
	r = ts.do("POST", wire.PathForceRelease, adminTok, wire.ForceReleaseRequest{Name: name})
	var fr wire.ForceReleaseResponse
	if r.status != 200 || json.Unmarshal([]byte(r.raw), &fr) != nil || len(fr.Released) != 1 || fr.Released[0].Token != l2.Token ||
		!fr.Released[0].ForceReleased {
		t.Errorf("force-release: %d %s", r.status, r.raw)
	}
	if st := ts.describe(aliceTok, name); len(st.Holders) != 1 || !st.Holders[0].ForceReleased || st.Used != 1 {
		t.Errorf("after a force-release, its permit stays taken until its expiry: %s", mustJSON(st))
	}
	r = ts.do("POST", wire.PathRenew, bobTok, wire.RenewRequest{Name: name, ID: l2.ID})
	wantErr(t, r, 410, wire.CodeLeaseLost)
	if r.env.Error != nil && r.env.Error.Reason != wire.ReasonForceReleased {
		t.Errorf("renew after force-release: reason %q", r.env.Error.Reason)
	}
	// Now: the permit is free at once.
	if r := ts.do("POST", wire.PathForceRelease, adminTok, wire.ForceReleaseRequest{Name: name, Now: true}); r.status != 200 {
		t.Errorf("force-release now: %d %s", r.status, r.raw)
	}
	wantErr(t, ts.do("POST", wire.PathForceRelease, adminTok, wire.ForceReleaseRequest{Name: name}), 404, wire.CodeNotHeld)
	if st := ts.describe(aliceTok, name); len(st.Holders) != 0 || st.Holders == nil || st.Waiters == nil {
		t.Errorf("after all: %s", mustJSON(st))
	}
	// Guarantees.
	r = ts.do("GET", wire.PathGuarantees, aliceTok, nil)
	var g sema.Guarantees
	if r.status != 200 || json.Unmarshal([]byte(r.raw), &g) != nil || g.Scope != sema.ScopeCluster || !g.DurableFencing || !g.FIFO {
		t.Errorf("guarantees: %d %s", r.status, r.raw)
	}
	if r := ts.do("GET", wire.PathHealth, "", nil); r.status != 200 || strings.TrimSpace(r.raw) != "ok" {
		t.Errorf("healthz: %d %q", r.status, r.raw)
	}
	r = ts.do("GET", wire.PathMetrics, "", nil)
	for _, m := range []string{"sema_grants_total 3", "sema_holders 0", `sema_http_requests_total{code="not_acquired",route="acquire"} 1`,
		"sema_force_releases_total 2", `sema_lease_losses_total{reason="force_released"} 1`, "sema_acquire_wait_seconds_count 3"} {
		if !strings.Contains(r.raw, m) {
			t.Errorf("metrics lack %q", m)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestRolesAndBinding(t *testing.T) {
	ts := newTS(t, testTokens, nil)
	l := ts.mustAcquire(aliceTok, wire.AcquireRequest{Name: "bound"})
	// Another client token may neither renew nor release it, nor steal it
	// by repeating its id; its lease looks to it like an unknown id.
	wantErr(t, ts.acquire(bobTok, wire.AcquireRequest{Name: "bound", ID: l.ID}), 403, wire.CodeForbidden)
	wantErr(t, ts.do("POST", wire.PathRelease, bobTok, wire.ReleaseRequest{Name: "bound", ID: l.ID}), 404, wire.CodeNotHeld)
	wantErr(t, ts.do("POST", wire.PathRelease, bobTok, wire.ReleaseRequest{Name: "bound", ID: "unknown"}), 404, wire.CodeNotHeld)
	wantErr(t, ts.do("POST", wire.PathRenew, bobTok, wire.RenewRequest{Name: "bound", ID: l.ID}), 404, wire.CodeNotHeld)
	wantErr(t, ts.do("POST", wire.PathRenew, bobTok, wire.RenewRequest{Name: "bound", ID: "unknown"}), 404, wire.CodeNotHeld)
	// Clients may not list or force-release.
	wantErr(t, ts.do("GET", wire.PathLocks, aliceTok, nil), 403, wire.CodeForbidden)
	wantErr(t, ts.do("POST", wire.PathForceRelease, aliceTok, wire.ForceReleaseRequest{Name: "bound"}), 403, wire.CodeForbidden)
	// No token, an unknown token, a malformed header.
	wantErr(t, ts.acquire("", wire.AcquireRequest{Name: "x"}), 401, wire.CodeUnauthorized)
	wantErr(t, ts.acquire(unknownTk, wire.AcquireRequest{Name: "x"}), 401, wire.CodeUnauthorized)
	wantErr(t, ts.do("GET", wire.PathLock+"bound", "", nil), 401, wire.CodeUnauthorized)
	// healthz and metrics need none.
	if r := ts.do("GET", wire.PathMetrics, "", nil); r.status != 200 {
		t.Errorf("metrics: %d", r.status)
	}
	// An admin may release anyone's lease.
	if r := ts.do("POST", wire.PathRelease, adminTok, wire.ReleaseRequest{Name: "bound", ID: l.ID}); r.status != 200 {
		t.Errorf("admin release: %d %s", r.status, r.raw)
	}
}

// TestOtherBackend serves backend/mem through --backend's path: the
// binding of leases to tokens is kept by the server.
func TestOtherBackend(t *testing.T) {
	ts := newTS(t, testTokens, mem.New())
	l := ts.mustAcquire(aliceTok, wire.AcquireRequest{Name: "m", Limit: 1})
	wantErr(t, ts.do("POST", wire.PathRelease, bobTok, wire.ReleaseRequest{Name: "m", ID: l.ID}), 404, wire.CodeNotHeld)
	wantErr(t, ts.do("POST", wire.PathRenew, bobTok, wire.RenewRequest{Name: "m", ID: l.ID}), 404, wire.CodeNotHeld)
	done := make(chan reply, 1)
	go func() { done <- ts.acquire(bobTok, wire.AcquireRequest{Name: "m", WaitMillis: 10000}) }()
	testenv.WaitFor(t, "bob queued", func() bool { return len(ts.describe(adminTok, "m").Waiters) == 1 })
	if r := ts.do("POST", wire.PathRelease, aliceTok, wire.ReleaseRequest{Name: "m", ID: l.ID}); r.status != 200 {
		t.Fatalf("release: %d %s", r.status, r.raw)
	}
	r := <-done
	if r.status != 200 || r.env.Lease == nil || r.env.Lease.Token <= l.Token {
		t.Fatalf("waiter: %d %s", r.status, r.raw)
	}
	g := ts.srv.Guarantees()
	if g.Scope != sema.ScopeCluster || g.DurableFencing || g.Wakeup != "long-poll" {
		t.Errorf("guarantees over mem = %+v", g)
	}
}

// pollOnly hides every optional interface but Inspector: the server must
// wait for it by polling.
type pollOnly struct {
	sema.Backend
	sema.Inspector
}

func TestOtherBackendPolling(t *testing.T) {
	m := mem.New()
	ts := newTS(t, nil, pollOnly{m, m})
	l := ts.mustAcquire("", wire.AcquireRequest{Name: "p"})
	done := make(chan reply, 1)
	go func() { done <- ts.acquire("", wire.AcquireRequest{Name: "p", WaitMillis: 10000}) }()
	time.Sleep(20 * time.Millisecond) // let it poll a few times (not an assertion)
	if r := ts.do("POST", wire.PathRelease, "", wire.ReleaseRequest{Name: "p", ID: l.ID}); r.status != 200 {
		t.Fatal(r.raw)
	}
	if r := <-done; r.status != 200 || r.env.Lease == nil {
		t.Fatalf("polling waiter: %d %s", r.status, r.raw)
	}
	if g := ts.srv.Guarantees(); g.FIFO {
		t.Error("a polled backend cannot be FIFO")
	}
	// A wait that runs out.
	wantErr(t, ts.acquire("", wire.AcquireRequest{Name: "p", WaitMillis: 50}), 409, wire.CodeNotAcquired)
	// No force-release on this backend.
	wantErr(t, ts.do("POST", wire.PathForceRelease, "", wire.ForceReleaseRequest{Name: "p"}), 400, wire.CodeInvalidArgument)
}

// gated holds the first TryAcquire at the backend until a second one
// arrives (or a moment has passed): two acquires are then in flight at
// once.
type gated struct {
	sema.Backend
	calls atomic.Int32
	both  chan struct{}
}

func (g *gated) TryAcquire(ctx context.Context, req sema.Request) (sema.Grant, error) {
	if g.calls.Add(1) == 1 {
		select {
		case <-g.both:
		case <-time.After(500 * time.Millisecond):
		}
	} else {
		close(g.both)
	}
	return g.Backend.TryAcquire(ctx, req)
}

// TestOtherBackendBindsAtomically: two tokens racing to acquire one lease
// id on a served backend cannot both get it.
func TestOtherBackendBindsAtomically(t *testing.T) {
	ts := newTS(t, testTokens, &gated{Backend: mem.New(), both: make(chan struct{})})
	res := make(chan reply, 2)
	for _, tok := range []string{aliceTok, bobTok} {
		go func() { res <- ts.acquire(tok, wire.AcquireRequest{Name: "race", ID: "contested"}) }()
	}
	won := 0
	for range 2 {
		if r := <-res; r.status == 200 {
			won++
		} else {
			wantErr(t, r, 403, wire.CodeForbidden)
		}
	}
	if won != 1 {
		t.Fatalf("%d tokens got lease id \"contested\", want 1", won)
	}
}

// TestForceReleaseNamesTheServer: in front of a backend that tells holders
// of force-releases (here mem, whose holders are in this process), a
// force-release through the API tells the holder it came from the server,
// with the admin's token as the server knows it, not a name the request
// could claim.
func TestForceReleaseNamesTheServer(t *testing.T) {
	m := mem.New()
	ts := newTS(t, testTokens, m)
	l, err := sema.New(m).Mutex("gw").Acquire(context.Background(), sema.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if r := ts.do("POST", wire.PathForceRelease, adminTok, wire.ForceReleaseRequest{Name: "gw"}); r.status != 200 {
		t.Fatal(r.raw)
	}
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the holder was not told")
	}
	var fe *sema.ForcedError
	if !errors.As(l.Err(), &fe) || !strings.HasPrefix(fe.By, "sema serve (token ") {
		t.Errorf("lease ended with %v, want force-released by sema serve (token …)", l.Err())
	}
}

package remote_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/remote"
	"github.com/sema-dev/sema/backendtest"
)

func TestConformance(t *testing.T) {
	srv := startServer(t)
	open := func(t *testing.T) sema.Backend {
		b, err := remote.New(remote.Config{URL: srv.URL()})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	backendtest.Run(t, backendtest.Config{
		New:  open,
		Peer: func(t *testing.T, _ sema.Backend) sema.Backend { return open(t) },
		Reopen: func(t *testing.T, b sema.Backend) sema.Backend {
			_ = b.Close()
			srv.stop() // kill -9 is TestKillRestartUnderLoad's
			srv.restart()
			return open(t)
		},
	})
}

func TestGuarantees(t *testing.T) {
	srv := startServer(t)
	g := newBackend(t, srv).Guarantees()
	if g.Scope != sema.ScopeCluster || g.Wakeup != "long-poll" || !g.FIFO || !g.DurableFencing {
		t.Fatalf("guarantees %+v", g)
	}
}

// TestAuth: with a token file, no token is ErrUnauthorized, a client token
// may hold leases but not list, an admin token may do everything, and a
// lease is bound to the token that acquired it.
func TestAuth(t *testing.T) {
	const clientTok, otherTok, adminTok = "client-secret-0001", "client-secret-0002", "admin-secret-00003"
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("client "+clientTok+"\nclient "+otherTok+"\nadmin "+adminTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "--token-file="+file)
	ctx := context.Background()
	req := sema.Request{Name: "auth", ID: "lease1", Limit: 1, Weight: 1, TTL: 10 * time.Second}

	anon := newBackend(t, srv)
	if _, err := anon.TryAcquire(ctx, req); !errors.Is(err, remote.ErrUnauthorized) || errors.Is(err, sema.ErrUnavailable) {
		t.Fatalf("no token: %v", err)
	}
	bad := newBackend(t, srv, func(c *remote.Config) { c.Token = "wrong-secret-00004" })
	if _, err := bad.Acquire(ctx, req); !errors.Is(err, remote.ErrUnauthorized) || strings.Contains(err.Error(), "wrong-secret-00004") {
		t.Fatalf("wrong token: %v", err)
	}
	cl := newBackend(t, srv, func(c *remote.Config) { c.Token = clientTok })
	g, err := cl.TryAcquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.List(ctx, ""); !errors.Is(err, remote.ErrForbidden) {
		t.Fatalf("client token lists: %v", err)
	}
	if st, err := cl.Describe(ctx, "auth"); err != nil || len(st.Holders) != 1 || st.Holders[0].ID != "" {
		t.Fatalf("client Describe: %+v %v (holder ids are for admins)", st, err)
	}
	other := newBackend(t, srv, func(c *remote.Config) { c.Token = otherTok })
	// To another client token the lease is unknown.
	if err := other.Release(ctx, "auth", g.ID); !errors.Is(err, sema.ErrNotHeld) {
		t.Fatalf("another client token releases the lease: %v", err)
	}
	if _, err := other.Renew(ctx, "auth", g.ID, 10*time.Second); !errors.Is(err, sema.ErrLeaseLost) {
		t.Fatalf("another client token renews the lease: %v", err)
	}
	admin := newBackend(t, srv, func(c *remote.Config) { c.Token = adminTok })
	if ls, err := admin.List(ctx, "au"); err != nil || len(ls) != 1 || ls[0].Holders[0].ID != g.ID {
		t.Fatalf("admin List: %+v %v", ls, err)
	}
	if _, err := cl.Renew(ctx, "auth", g.ID, 10*time.Second); err != nil {
		t.Fatalf("owner renews: %v", err)
	}
	if err := cl.Release(ctx, "auth", g.ID); err != nil {
		t.Fatalf("owner releases: %v", err)
	}
}

// TestUnreachable: a server that is not there is an error wrapping
// ErrUnavailable, quickly, for every call (a blocking Acquire too: a server
// never reached is not retried).
func TestUnreachable(t *testing.T) {
	addr := freeAddr(t) // nobody listens there any more
	b, err := remote.New(remote.Config{URL: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	req := sema.Request{Name: "n", ID: "id1", Limit: 1, Weight: 1, TTL: time.Second}
	if _, err := b.TryAcquire(ctx, req); !errors.Is(err, sema.ErrUnavailable) {
		t.Errorf("TryAcquire: %v", err)
	}
	if _, err := b.Acquire(ctx, req); !errors.Is(err, sema.ErrUnavailable) {
		t.Errorf("Acquire: %v", err)
	}
	if _, err := b.Renew(ctx, "n", "id1", time.Second); !errors.Is(err, sema.ErrUnavailable) {
		t.Errorf("Renew: %v", err)
	}
	if err := b.Release(ctx, "n", "id1"); !errors.Is(err, sema.ErrUnavailable) {
		t.Errorf("Release: %v", err)
	}
	if _, err := b.Describe(ctx, "n"); !errors.Is(err, sema.ErrUnavailable) {
		t.Errorf("Describe: %v", err)
	}
	if g := b.Guarantees(); g.Scope != sema.ScopeCluster || g.FIFO {
		t.Errorf("Guarantees of an unreachable server: %+v", g)
	}
}

// TestAcquireSurvivesRestart: a waiting Acquire outlives a kill -9 and
// restart of the server: it polls again with the same lease ID and is
// granted once the holder's lease, honoured across the restart, expires.
func TestAcquireSurvivesRestart(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	req := func(id string) sema.Request {
		return sema.Request{Name: "restart", ID: id, Limit: 1, Weight: 1, TTL: time.Second}
	}
	h, err := b.TryAcquire(ctx, req("holder"))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		g   sema.Grant
		err error
	}
	done := make(chan result, 1)
	go func() {
		g, err := b.Acquire(ctx, req("waiter"))
		done <- result{g, err}
	}()
	waitFor(t, func() bool {
		st, err := b.Describe(ctx, "restart")
		return err == nil && len(st.Waiters) == 1
	})
	srv.kill9()
	srv.restart()
	r := <-done
	if r.err != nil || r.g.ID != "waiter" || r.g.Token <= h.Token {
		t.Fatalf("Acquire across a restart: %+v %v", r.g, r.err)
	}
}

// TestTokenNeverInErrors: a token given in the config does not show in
// errors.
func TestTokenNeverInErrors(t *testing.T) {
	const secret = "s3cr3t-t0ken"
	b, err := remote.New(remote.Config{URL: "http://" + freeAddr(t), Token: secret, RetryTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = b.TryAcquire(context.Background(), sema.Request{Name: "n", ID: "i", Limit: 1, Weight: 1, TTL: time.Second})
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("error %v", err)
	}
}

// TestLongPollCapRepolls: with MaxWait shorter than the wait, the client
// polls again with the same lease ID and still gets the grant. The server
// heartbeats every 50ms, so the polls that end at the cap and the final
// grant arrive after heartbeat spaces, inside a 200.
func TestLongPollCapRepolls(t *testing.T) {
	srv := startServer(t, "--heartbeat=50ms")
	b := newBackend(t, srv, func(c *remote.Config) { c.MaxWait = 200 * time.Millisecond })
	ctx := context.Background()
	h, err := b.TryAcquire(ctx, sema.Request{Name: "cap", ID: "holder", Limit: 1, Weight: 1, TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The answer this client must cope with: spaces, then an error in a 200.
	resp, err := http.Post(srv.URL()+"/v1/acquire", "application/json",
		strings.NewReader(`{"name":"cap","id":"raw","ttl_ms":1000,"wait_ms":250}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.HasPrefix(raw, []byte("  ")) || !bytes.Contains(raw, []byte(`"not_acquired"`)) {
		t.Fatalf("long poll past heartbeats: HTTP %d %q", resp.StatusCode, raw)
	}
	type result struct {
		g   sema.Grant
		err error
	}
	done := make(chan result, 1)
	go func() {
		g, err := b.Acquire(ctx, sema.Request{Name: "cap", ID: "waiter", Limit: 1, Weight: 1, TTL: 10 * time.Second})
		done <- result{g, err}
	}()
	time.Sleep(700 * time.Millisecond) // several polls end at the cap meanwhile
	select {
	case r := <-done:
		t.Fatalf("Acquire returned while held: %+v %v", r.g, r.err)
	default:
	}
	if err := b.Release(ctx, "cap", h.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.g.ID != "waiter" || r.g.Token <= h.Token {
			t.Fatalf("Acquire: %+v %v", r.g, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not granted after release")
	}
}

// TestStalledServer: a server that stops answering (SIGSTOP) cannot hang a
// renewal; the lease's context ends before the server would expire it.
func TestStalledServer(t *testing.T) {
	srv := startServer(t)
	c := sema.New(newBackend(t, srv))
	const ttl = 1500 * time.Millisecond
	l, err := c.Mutex("stall").Acquire(context.Background(), sema.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.signal(syscall.SIGSTOP)
	defer srv.signal(syscall.SIGCONT)
	frozen := time.Now()
	select {
	case <-l.Done():
	case <-time.After(ttl + 5*time.Second):
		t.Fatal("lease still live long after the server froze")
	}
	ended := time.Now()
	// The server (same host, same clock) expires the lease at ExpiresAt,
	// as confirmed by the last successful renewal.
	if exp := l.ExpiresAt(); !ended.Before(exp) {
		t.Fatalf("lease context ended at %v, not before the server's expiry %v", ended, exp)
	}
	if !errors.Is(l.Err(), sema.ErrLeaseLost) {
		t.Fatalf("lease error %v", l.Err())
	}
	// A Refresh against the frozen server returns by its context.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	b := newBackend(t, srv)
	start := time.Now()
	if _, err := b.Renew(ctx, "stall", l.ID(), ttl); !errors.Is(err, sema.ErrUnavailable) {
		t.Fatalf("Renew against a frozen server: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("Renew hung for %v", time.Since(start))
	}
	t.Logf("froze at +0, lease ended after %v (server expiry after %v)", ended.Sub(frozen), l.ExpiresAt().Sub(frozen))
}

// waitFor polls cond (a test helper, not a product path) for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pastDeadline is a context whose deadline has passed but whose timer has
// not fired yet: Done is not closed and Err is nil.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// TestAcquireDeadlinePassed: an Acquire whose deadline has passed wraps
// context.DeadlineExceeded, even before the context's timer fires, and
// never formats a missing cause.
func TestAcquireDeadlinePassed(t *testing.T) {
	b, err := remote.New(remote.Config{URL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	req := sema.Request{Name: "late", ID: "late1", Limit: 1, Weight: 1, TTL: time.Second}
	_, err = b.Acquire(pastDeadline{context.Background()}, req)
	if !errors.Is(err, sema.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "%!") {
		t.Fatalf("Acquire past its deadline: %v", err)
	}
}

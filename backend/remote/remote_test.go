package remote_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/remote"
	"github.com/sema-dev/sema/backendtest"
	"github.com/sema-dev/sema/internal/testenv"
)

func TestConformance(t *testing.T) {
	srv := startServer(t)
	open := func(t *testing.T) sema.Backend {
		b, err := remote.New(remote.Config{URL: srv.URL})
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
			srv.Restart(t, false) // kill -9 is TestKillRestartUnderLoad's
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
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
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
	testenv.WaitFor(t, "the waiter queued", func() bool {
		st, err := b.Describe(ctx, "restart")
		return err == nil && len(st.Waiters) == 1
	})
	srv.Restart(t, true)
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
// polls again with the same lease ID and still gets the grant, over
// sema-mux and over HTTP (where the server heartbeats every 50ms, so a
// poll that ends at the cap may end as an error in a 200 after spaces).
// The release waits until the server has answered three polls "not
// acquired".
func TestLongPollCapRepolls(t *testing.T) {
	srv := startServer(t, "--heartbeat=50ms")
	for _, transport := range []string{"sema-mux", "http"} {
		t.Run(transport, func(t *testing.T) {
			b := newBackend(t, srv, func(c *remote.Config) { c.MaxWait = 200 * time.Millisecond })
			if transport == "http" {
				remote.NoMux(b)
			}
			ctx := context.Background()
			name := "cap/" + transport
			h, err := b.TryAcquire(ctx, sema.Request{Name: name, ID: "holder", Limit: 1, Weight: 1, TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			const ended = `sema_http_requests_total{code="not_acquired",route="acquire"}`
			before := metric(t, srv, ended)
			type result struct {
				g   sema.Grant
				err error
			}
			done := make(chan result, 1)
			go func() {
				g, err := b.Acquire(ctx, sema.Request{Name: name, ID: "waiter", Limit: 1, Weight: 1, TTL: time.Minute})
				done <- result{g, err}
			}()
			testenv.WaitFor(t, "three polls ended at the cap", func() bool {
				return metric(t, srv, ended) >= before+3 || len(done) > 0
			})
			select {
			case r := <-done:
				t.Fatalf("Acquire returned while held: %+v %v", r.g, r.err)
			default:
			}
			if err := b.Release(ctx, name, h.ID); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil || r.g.ID != "waiter" || r.g.Token <= h.Token {
				t.Fatalf("Acquire: %+v %v", r.g, r.err)
			}
		})
	}
}

// metric reads one series of the server's /metrics (0 if absent).
func metric(t *testing.T, srv *testenv.Sema, series string) float64 {
	t.Helper()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", series, err)
			}
			return f
		}
	}
	return 0
}

// TestStalledServer: a server that stops answering (SIGSTOP) cannot hang
// a lease: it ends on its own local deadline, with ErrLeaseLost, while
// nobody can have the permit (the frozen server grants nothing). Thawed,
// the server grants the queued waiter, only once its own clock has passed
// the old lease's expiry. A Renew against the frozen server returns by
// its context: the client's RequestTimeout is far longer, so nothing else
// could end it. Timing is observed by ordering, never against a clock
// read by a test goroutine that a loaded machine may run late.
func TestStalledServer(t *testing.T) {
	srv := startServer(t)
	slow := func(c *remote.Config) { c.RequestTimeout = time.Hour }
	c := sema.New(newBackend(t, srv, slow))
	const ttl = 1500 * time.Millisecond
	l, err := c.Mutex("stall").Acquire(context.Background(), sema.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	waiter := sema.New(newBackend(t, srv))
	granted := make(chan *sema.Lease, 1)
	go func() {
		w, err := waiter.Mutex("stall").Acquire(context.Background())
		if err != nil {
			t.Errorf("the waiter: %v", err)
		}
		granted <- w
	}()
	peer := newBackend(t, srv)
	testenv.WaitFor(t, "the waiter queued", func() bool {
		st, err := peer.Describe(context.Background(), "stall")
		return err == nil && len(st.Waiters) == 1
	})
	srv.Freeze()
	testenv.WaitFor(t, "the server stopped", srv.Stopped)
	testenv.Await(t, "the lease ending while the server is frozen", l.Done()) // on its own: the server answers nothing now
	if !errors.Is(l.Err(), sema.ErrLeaseLost) {
		t.Fatalf("lease error %v", l.Err())
	}
	select {
	case w := <-granted:
		t.Fatalf("a frozen server granted %v", w)
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	renewed := make(chan error, 1)
	go func() { _, err := newBackend(t, srv, slow).Renew(ctx, "stall", l.ID(), ttl); renewed <- err }()
	if err := testenv.Await(t, "a Renew against a frozen server", renewed); !errors.Is(err, sema.ErrUnavailable) {
		t.Fatalf("Renew against a frozen server: %v", err)
	}
	srv.Thaw()
	w := <-granted
	if w == nil {
		t.FailNow()
	}
	defer w.Release(context.Background())
	if w.Token() <= l.Token() || w.AcquiredAt().Before(l.ExpiresAt()) {
		t.Fatalf("the waiter got token %d at %v; the lost lease had token %d and expired at %v (server clock)",
			w.Token(), w.AcquiredAt(), l.Token(), l.ExpiresAt())
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

// TestReleasedWaiterIDIsRefused: a client releases the lease ID of its own
// acquire that is still waiting (as it does when it gives the wait up).
// The server withdraws the request; the client's acquire, polling again
// with that ID, is refused for good (ErrInvalidArgument), rather than
// polling on until the server forgets the release and grants it.
func TestReleasedWaiterIDIsRefused(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder := sema.Request{Name: "withdrawn", ID: "holder", Limit: 1, Weight: 1, TTL: time.Minute}
	waiter := holder
	waiter.ID = "waiter"
	if _, err := b.TryAcquire(ctx, holder); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, waiter)
		got <- err
	}()
	for {
		st, err := b.Describe(ctx, "withdrawn")
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Waiters) == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := b.Release(ctx, "withdrawn", waiter.ID); !errors.Is(err, sema.ErrNotHeld) {
		t.Fatalf("Release of the queued ID: %v, want ErrNotHeld", err)
	}
	if err := b.Release(ctx, "withdrawn", holder.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, sema.ErrInvalidArgument) {
		t.Fatalf("the acquire whose ID was released: %v, want ErrInvalidArgument", err)
	}
}

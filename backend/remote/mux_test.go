package remote_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/remote"
	"github.com/sema-dev/sema/backendtest"
	semaserver "github.com/sema-dev/sema/internal/server"
	"github.com/sema-dev/sema/internal/store"
	"github.com/sema-dev/sema/internal/testenv"
	"github.com/sema-dev/sema/internal/wire"
)

// TestMuxConcurrentCalls: concurrent acquires and releases share one
// sema-mux connection and each caller gets its own answer: releases of
// held leases succeed, releases by a wrong ID fail with ErrNotHeld, in any
// interleaving; waiting acquires on one name are handed over in turn.
func TestMuxConcurrentCalls(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv)
	ctx := context.Background()
	const n = 64
	for round := range 20 {
		ids := make([]string, n)
		for i := range n {
			ids[i] = fmt.Sprintf("r%d-%d", round, i)
			req := sema.Request{Name: fmt.Sprintf("mux/%d", i), ID: ids[i], Limit: 1, Weight: 1, TTL: time.Minute}
			if _, err := b.TryAcquire(ctx, req); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				id := ids[i]
				if i%5 == 4 {
					id = "not-" + id
				}
				errs[i] = b.ReleaseBy(ctx, fmt.Sprintf("mux/%d", i), id, time.Now().Add(testenv.HangGuard))
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if i%5 == 4 {
				if !errors.Is(err, sema.ErrNotHeld) {
					t.Fatalf("round %d: release %d by a wrong id: %v", round, i, err)
				}
				if err := b.Release(ctx, fmt.Sprintf("mux/%d", i), ids[i]); err != nil {
					t.Fatal(err)
				}
			} else if err != nil {
				t.Fatalf("round %d: release %d: %v", round, i, err)
			}
		}
	}
	// Waiters on one name, each holding it in turn.
	var holders, most atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for j := range 10 {
				req := sema.Request{Name: "mux/hot", ID: fmt.Sprintf("h%d-%d", i, j), Limit: 1, Weight: 1, TTL: time.Minute}
				if _, err := b.Acquire(ctx, req); err != nil {
					t.Error(err)
					return
				}
				h := holders.Add(1)
				if h > most.Load() {
					most.Store(h)
				}
				holders.Add(-1)
				if err := b.Release(ctx, req.Name, req.ID); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d holders at once", most.Load())
	}
	if got := remote.MuxDialed(b); got != 1 {
		t.Fatalf("sema-mux connections dialed: %d; want 1", got)
	}
	for i := range n {
		if st, err := b.Describe(ctx, fmt.Sprintf("mux/%d", i)); err != nil || len(st.Holders) != 0 {
			t.Fatalf("mux/%d: %+v, %v", i, st, err)
		}
	}
}

// TestMuxCancelledAcquire: a waiting acquire whose context ends is
// withdrawn from the server's queue by the cancellation (the server
// answers its poll cancelled: client_gone in its metrics) and leaves no
// waiter or holder behind; the connection serves on. The client's polls
// wait up to an hour: only the cancellation can end them.
func TestMuxCancelledAcquire(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv, func(c *remote.Config) { c.MaxWait = time.Hour })
	ctx := context.Background()
	const gone = `sema_http_requests_total{code="client_gone",route="acquire"}`
	before := metric(t, srv, gone)
	req := sema.Request{Name: "mux/cancel", ID: "holder", Limit: 1, Weight: 1, TTL: time.Minute}
	if _, err := b.TryAcquire(ctx, req); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		// Even rounds cancel once the poll is queued on the server; odd
		// ones at varying moments, maybe before the poll is sent.
		wctx, cancel := context.WithCancel(ctx)
		w := sema.Request{Name: req.Name, ID: fmt.Sprintf("w%d", i), Limit: 1, Weight: 1, TTL: time.Minute}
		errc := make(chan error, 1)
		go func() { _, err := b.Acquire(wctx, w); errc <- err }()
		if i%2 == 0 {
			testenv.WaitFor(t, "the waiter queued", func() bool {
				st, err := b.Describe(ctx, req.Name)
				return err == nil && len(st.Waiters) == 1
			})
			cancel()
		} else {
			time.AfterFunc(time.Duration(i)*time.Millisecond, cancel)
		}
		err := <-errc
		cancel()
		if !errors.Is(err, sema.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled acquire: %v", err)
		}
		if st, err := b.Describe(ctx, req.Name); err != nil || len(st.Waiters) != 0 || len(st.Holders) != 1 {
			t.Fatalf("after cancelled acquire %d: %+v, %v", i, st, err)
		}
	}
	if n := metric(t, srv, gone) - before; n < 10 || n > 20 {
		t.Fatalf("the server answered %v polls cancelled, want 10 to 20", n)
	}
	if err := b.Release(ctx, req.Name, req.ID); err != nil {
		t.Fatal(err)
	}
	if got := remote.MuxDialed(b); got != 1 {
		t.Fatalf("sema-mux connections dialed: %d; want 1", got)
	}
}

// TestMuxStalledServer: a call with a deadline to a frozen server fails at
// its deadline instead of hanging (the client's RequestTimeout is an hour:
// nothing else could end it); once the server runs again the connection
// serves on.
func TestMuxStalledServer(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv, func(c *remote.Config) { c.RequestTimeout = time.Hour })
	ctx := context.Background()
	req := sema.Request{Name: "mux/stall", ID: "s1", Limit: 1, Weight: 1, TTL: time.Minute}
	if _, err := b.TryAcquire(ctx, req); err != nil {
		t.Fatal(err)
	}
	srv.Freeze()
	testenv.WaitFor(t, "the server stopped", srv.Stopped) // kill(2) returns before the process stops
	released := make(chan error, 1)
	go func() { released <- b.ReleaseBy(ctx, req.Name, req.ID, time.Now().Add(300*time.Millisecond)) }()
	if err := testenv.Await(t, "a release against a frozen server", released); !errors.Is(err, sema.ErrUnavailable) {
		t.Fatalf("release against a frozen server: %v", err)
	}
	srv.Thaw()
	// The frozen server reads that release once it runs: the lease is
	// released, or a second release does it.
	if err := b.ReleaseBy(ctx, req.Name, req.ID, time.Now().Add(testenv.HangGuard)); err != nil && !errors.Is(err, sema.ErrNotHeld) {
		t.Fatalf("release after the server resumed: %v", err)
	}
	if st, err := b.Describe(ctx, req.Name); err != nil || len(st.Holders) != 0 {
		t.Fatalf("after release: %+v, %v", st, err)
	}
	if got := remote.MuxDialed(b); got != 1 {
		t.Fatalf("sema-mux connections dialed: %d; want 1", got)
	}
}

// TestMuxServerRestart: after the server dies (kill -9) and comes back,
// calls go out on a new connection (a call that got no answer from the
// dead one is sent again); a waiting acquire survives the restart.
func TestMuxServerRestart(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv)
	ctx := context.Background()
	for i := range 3 {
		// A name per round: a release answered just before a kill -9 is
		// not durable (the lease may be held again after the restart,
		// until its TTL; never granted twice).
		req := sema.Request{Name: fmt.Sprintf("mux/restart%d", i), ID: "k", Limit: 1, Weight: 1, TTL: time.Minute}
		if _, err := b.TryAcquire(ctx, req); err != nil {
			t.Fatal(err)
		}
		if err := b.ReleaseBy(ctx, req.Name, req.ID, time.Now().Add(testenv.HangGuard)); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
		srv.Restart(t, true)
	}
	if _, err := b.TryAcquire(ctx, sema.Request{Name: "mux/after", ID: "a", Limit: 1, Weight: 1, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if got := remote.MuxDialed(b); got < 3 {
		t.Fatalf("sema-mux connections dialed: %d; want one per server life", got)
	}
}

// TestHTTP11Only: the conformance suite's hot calls also work over plain
// HTTP (a server or proxy that refuses the upgrade).
func TestHTTP11Only(t *testing.T) {
	srv := startServer(t)
	open := func(t *testing.T) sema.Backend {
		b, err := remote.New(remote.Config{URL: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		remote.NoMux(b)
		return b
	}
	backendtest.Run(t, backendtest.Config{
		New:  open,
		Peer: func(t *testing.T, _ sema.Backend) sema.Backend { return open(t) },
		// Notices come on the sema-mux connection only.
		NoForceNotice: true,
	})
}

// TestMuxRefused: a server that refuses the upgrade (here a handler that
// answers 404 on /v1/mux, as a proxy might) is spoken to in HTTP.
func TestMuxRefused(t *testing.T) {
	st, err := store.Open(store.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := semaserver.New(semaserver.Config{Backend: st})
	if err != nil {
		t.Fatal(err)
	}
	var upgrades atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == wire.PathMux {
			upgrades.Add(1)
			http.NotFound(w, r)
			return
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.Close(); hs.Close(); st.Close() })
	b, err := remote.New(remote.Config{URL: hs.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	for i := range 5 {
		req := sema.Request{Name: "refused", ID: fmt.Sprintf("id%d", i), Limit: 1, Weight: 1, TTL: time.Minute}
		if _, err := b.Acquire(ctx, req); err != nil {
			t.Fatal(err)
		}
		if err := b.Release(ctx, req.Name, req.ID); err != nil {
			t.Fatal(err)
		}
	}
	if n := upgrades.Load(); n != 1 {
		t.Fatalf("upgrade asked %d times; want once (then HTTP for a while)", n)
	}
	if got := remote.MuxDialed(b); got != 0 {
		t.Fatalf("sema-mux connections: %d", got)
	}
}

package remote_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/remote"
)

// TestPipelinedReleases: releases that overlap share the backend's few
// pipelined connections, and each caller gets its own answer: releases of
// held leases succeed, releases by a wrong ID fail with ErrNotHeld, in
// any interleaving. (A lone release takes a pooled connection.)
func TestPipelinedReleases(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv)
	ctx := context.Background()
	for i := range 5 { // one at a time: no pipe
		req := sema.Request{Name: "pipe/lone", ID: fmt.Sprintf("l%d", i), Limit: 1, Weight: 1, TTL: time.Minute}
		if _, err := b.TryAcquire(ctx, req); err != nil {
			t.Fatal(err)
		}
		if err := b.ReleaseBy(ctx, req.Name, req.ID, time.Now().Add(10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if got := remote.PipesDialed(b); got != 0 {
		t.Fatalf("lone releases dialed %d pipes", got)
	}
	const n = 64
	for round := range 20 {
		ids := make([]string, n)
		for i := range n {
			ids[i] = fmt.Sprintf("r%d-%d", round, i)
			req := sema.Request{Name: fmt.Sprintf("pipe/%d", i), ID: ids[i], Limit: 1, Weight: 1, TTL: time.Minute}
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
				errs[i] = b.ReleaseBy(ctx, fmt.Sprintf("pipe/%d", i), id, time.Now().Add(10*time.Second))
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if i%5 == 4 {
				if !errors.Is(err, sema.ErrNotHeld) {
					t.Fatalf("round %d: release %d by a wrong id: %v", round, i, err)
				}
				if err := b.Release(ctx, fmt.Sprintf("pipe/%d", i), ids[i]); err != nil {
					t.Fatal(err)
				}
			} else if err != nil {
				t.Fatalf("round %d: release %d: %v", round, i, err)
			}
		}
	}
	if got := remote.PipesDialed(b); got < 1 || got > 2 {
		t.Fatalf("pipes dialed %d connections; want 1 or 2", got)
	}
	for i := range n {
		if st, err := b.Describe(ctx, fmt.Sprintf("pipe/%d", i)); err != nil || len(st.Holders) != 0 {
			t.Fatalf("pipe/%d: %+v, %v", i, st, err)
		}
	}
}

// TestPipeStalledServer: a pipelined release to a frozen server fails at
// its deadline instead of hanging, and the next one, once the server
// runs again, goes out on a new connection.
func TestPipeStalledServer(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv)
	remote.PipeAlways(b)
	ctx := context.Background()
	req := sema.Request{Name: "pipe/stall", ID: "s1", Limit: 1, Weight: 1, TTL: time.Minute}
	if _, err := b.TryAcquire(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := b.ReleaseBy(ctx, "pipe/other", "x", time.Now().Add(5*time.Second)); !errors.Is(err, sema.ErrNotHeld) {
		t.Fatalf("first release: %v", err) // the pipe is open
	}
	srv.signal(syscall.SIGSTOP)
	waitStopped(t, srv.pid()) // kill(2) returns before the process stops
	start := time.Now()
	err := b.ReleaseBy(ctx, req.Name, req.ID, time.Now().Add(300*time.Millisecond))
	srv.signal(syscall.SIGCONT)
	if !errors.Is(err, sema.ErrUnavailable) {
		t.Fatalf("release against a frozen server: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("release hung for %v", d)
	}
	// The frozen server may have read that release before the pipe broke:
	// the lease is held or released; a second release settles it.
	if err := b.ReleaseBy(ctx, req.Name, req.ID, time.Now().Add(5*time.Second)); err != nil && !errors.Is(err, sema.ErrNotHeld) {
		t.Fatalf("release after the server resumed: %v", err)
	}
	if got := remote.PipesDialed(b); got < 2 {
		t.Fatalf("pipes dialed %d connections; want a new one after the stall", got)
	}
	if st, err := b.Describe(ctx, req.Name); err != nil || len(st.Holders) != 0 {
		t.Fatalf("after release: %+v, %v", st, err)
	}
}

// TestPipeServerRestart: after the server dies (kill -9) and comes back,
// releases go out on a new pipe (the old one's EOF is noticed, or the
// release is sent again on a new one: it got no answer byte).
func TestPipeServerRestart(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv)
	remote.PipeAlways(b)
	ctx := context.Background()
	for i := range 3 {
		// A name per round: a release answered just before a kill -9 is
		// not durable (the lease may be held again after the restart,
		// until its TTL; never granted twice).
		req := sema.Request{Name: fmt.Sprintf("pipe/restart%d", i), ID: "k", Limit: 1, Weight: 1, TTL: time.Minute}
		if _, err := b.TryAcquire(ctx, req); err != nil {
			t.Fatal(err)
		}
		if err := b.ReleaseBy(ctx, req.Name, req.ID, time.Now().Add(5*time.Second)); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
		srv.kill9()
		srv.restart()
	}
	if got := remote.PipesDialed(b); got < 3 {
		t.Fatalf("pipes dialed %d connections; want one per server life", got)
	}
}

// waitStopped waits until process pid is stopped (state T in /proc).
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	waitFor(t, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		// pid (comm) state ...: the state follows the last ')'.
		i := strings.LastIndexByte(string(b), ')')
		return i > 0 && i+2 < len(b) && b[i+2] == 'T'
	})
}

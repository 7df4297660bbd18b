package remote_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/remote"
	"github.com/sema-dev/sema/internal/testenv"
)

// TestClosedBackend: Close ends a waiting Acquire with ErrClosed and later
// calls fail with ErrClosed, over sema-mux and over net/http (a caller's
// http.Client).
func TestClosedBackend(t *testing.T) {
	srv := startServer(t)
	t.Run("sema-mux", func(t *testing.T) { testClosedBackend(t, srv, newBackend(t, srv), "closed-mux") })
	t.Run("net/http", func(t *testing.T) {
		b := newBackend(t, srv, func(c *remote.Config) { c.HTTPClient = &http.Client{} })
		testClosedBackend(t, srv, b, "closed-nethttp")
	})
}

func testClosedBackend(t *testing.T, srv *testenv.Sema, b *remote.Backend, name string) {
	ctx := context.Background()
	holder, err := b.TryAcquire(ctx, sema.Request{Name: name, ID: "holder", Limit: 1, Weight: 1, TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, sema.Request{Name: name, ID: "waiter", Limit: 1, Weight: 1, TTL: 10 * time.Second})
		errc <- err
	}()
	peer := newBackend(t, srv)
	testenv.WaitFor(t, "the waiter queued", func() bool {
		st, err := peer.Describe(ctx, name)
		return err == nil && len(st.Waiters) == 1
	})
	b.Close()
	if err := testenv.Await(t, "Close ending the waiting Acquire", errc); !errors.Is(err, sema.ErrClosed) {
		t.Fatalf("waiting Acquire after Close: %v", err)
	}
	if err := b.Release(ctx, name, holder.ID); !errors.Is(err, sema.ErrClosed) {
		t.Fatalf("Release after Close: %v", err)
	}
	// The server dequeued the waiter when its poll was cut.
	testenv.WaitFor(t, "the waiter dequeued", func() bool {
		st, err := peer.Describe(ctx, name)
		return err == nil && len(st.Waiters) == 0
	})
	// A grant that a closing Acquire received (its poll was answered in the
	// drain window) is still given back after Close.
	remote.GiveBack(b, name, holder.ID)
	if st, err := peer.Describe(ctx, name); err != nil || len(st.Holders) != 0 {
		t.Fatalf("grant not given back after Close: %+v, %v", st, err)
	}
}

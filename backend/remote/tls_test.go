package remote_test

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/remote"
	"github.com/sema-dev/sema/internal/testenv"
)

// TestHTTPS: the client speaks to a TLS server (sema-mux over TLS for the
// calls every lock takes, HTTP/2 for the rest), including a long poll that
// waits for a release.
func TestHTTPS(t *testing.T) {
	cert := testenv.SelfSignedCert(t, t.TempDir())
	srv := testenv.StartSema(t, testenv.SemaOptions{TLS: &cert})
	b, err := remote.New(remote.Config{URL: srv.URL, TLSConfig: &tls.Config{RootCAs: cert.Pool}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	req := func(id string) sema.Request {
		return sema.Request{Name: "tls", ID: id, Limit: 1, Weight: 1, TTL: 10 * time.Second}
	}
	h, err := b.TryAcquire(ctx, req("holder"))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, req("waiter"))
		got <- err
	}()
	testenv.WaitFor(t, "the waiter queued", func() bool {
		st, err := b.Describe(ctx, "tls")
		return err == nil && len(st.Waiters) == 1
	})
	if err := b.Release(ctx, "tls", h.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter over https: %v", err)
	}
	if n := remote.MuxDialed(b); n != 1 {
		t.Fatalf("sema-mux connections over TLS: %d, want 1", n)
	}
	// Without the CA the server is not trusted: an error, not a grant.
	untrusted, _ := remote.New(remote.Config{URL: srv.URL, RetryTimeout: -1})
	defer untrusted.Close()
	if _, err := untrusted.TryAcquire(ctx, req("x")); err == nil {
		t.Fatal("untrusted certificate accepted")
	}
}

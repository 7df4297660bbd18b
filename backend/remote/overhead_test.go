package remote

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

// BenchmarkClientOverhead measures the client's own cost per call (bytes
// and allocations) against a canned answer; speed against the real server
// is in bench/netbench.
func BenchmarkClientOverhead(b *testing.B) {
	const answer = `{"lease":{"name":"bench/name","id":"ABCDEFGHIJKLMNOPQRSTUVWXYZ","token":12345,"owner":"host:1234","weight":1,"limit":1,` +
		`"acquired_at":"2025-01-02T03:04:05.123456789Z","expires_at":"2025-01-02T03:04:20.123456789Z","ttl_ms":15000,"waited_ms":0.25}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.HasSuffix(r.URL.Path, "/release") {
			_, _ = io.WriteString(w, "{}")
			return
		}
		_, _ = io.WriteString(w, answer)
	}))
	defer srv.Close()
	bk, err := New(Config{URL: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	req := sema.Request{Name: "bench/name", ID: "ABCDEFGHIJKLMNOPQRSTUVWXYZ", Owner: "host:1234", Limit: 1, Weight: 1, TTL: 15 * time.Second, Host: "host", PID: 1234}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := bk.Acquire(ctx, req); err != nil {
				b.Fatal(err)
			}
			if err := bk.Release(ctx, req.Name, req.ID); err != nil {
				b.Fatal(err)
			}
		}
	})
}

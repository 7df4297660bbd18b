package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/redis"
	"github.com/sema-dev/sema/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// open opens a backend on rawURL, closed when the test ends.
func open(t testing.TB, rawURL string) *redis.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := redis.Open(ctx, rawURL)
	if err != nil {
		t.Fatalf("Open(%s): %v", rawURL, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func bg(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// req is a request for name with the given ID, limit 1, weight 1.
func req(name, id string) sema.Request {
	return sema.Request{Name: name, ID: id, Owner: "test", Limit: 1, Weight: 1, TTL: 10 * time.Second}
}

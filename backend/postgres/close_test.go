package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/sema-dev/sema/internal/testenv"
)

// A server that stops answering does not hold up Close, even with a
// connection whose call was cut short: pgx asks the server to cancel that
// call, for up to 15 s, before it closes the connection.
func TestCloseFrozenServer(t *testing.T) {
	pg := testenv.StartPostgres(t)
	b := open(t, postgresConfig(pg.URL()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := req("frozen", "f1")
	if _, err := b.TryAcquire(ctx, r); err != nil {
		t.Fatal(err)
	}
	pg.Freeze()
	defer pg.Thaw()
	rctx, rcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer rcancel()
	if _, err := b.Renew(rctx, r.Name, r.ID, r.TTL); err == nil {
		t.Fatal("renewed on a frozen server")
	}
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waits for the frozen server")
	}
}

package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/postgres"
	"github.com/sema-dev/sema/internal/testenv"
)

// Through PgBouncer in transaction mode: every step is one statement, so
// the whole suite passes with the pool on the pooler; only the listen
// connection goes to the database directly.
func TestConformanceThroughPgBouncer(t *testing.T) {
	pg := testenv.SharedPostgres(t)
	bouncer := testenv.StartPgBouncer(t, pg)
	conformance(t, func(t *testing.T) postgres.Config {
		return postgres.Config{URL: bouncer.URL(), ListenURL: pg.URL()}
	})
}

// A listen connection through a transaction-mode pooler cannot receive
// notifications: waiting says so instead of silently polling.
func TestListenThroughPoolerRefused(t *testing.T) {
	pg := testenv.SharedPostgres(t)
	bouncer := testenv.StartPgBouncer(t, pg)
	// Unnamed statements, so that only the listen connection suffers from
	// the pooler (prepared statements would too: errors_test.go).
	b := open(t, postgres.Config{URL: bouncer.URL() + "&default_query_exec_mode=exec"})
	c := sema.New(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held, err := c.Mutex("pooler/listen").Acquire(ctx)
	if err != nil {
		t.Fatalf("acquire through the pooler: %v", err)
	}
	defer held.Release(ctx)
	start := time.Now()
	_, err = c.Mutex("pooler/listen").Acquire(ctx)
	if !errors.Is(err, sema.ErrUnavailable) || !errorsContain(err, "transaction-mode pooler") {
		t.Fatalf("waiting with the listen connection on the pooler: %v; want ErrUnavailable naming the pooler", err)
	}
	t.Logf("refused after %v: %v", time.Since(start).Round(time.Millisecond), err)
}

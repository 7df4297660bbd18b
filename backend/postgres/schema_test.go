package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sema-dev/sema"
)

// A schema of its own is created on first use, and the tables live there.
func TestCustomSchema(t *testing.T) {
	cfg := shared(t)
	cfg.Schema = "Locks_" + strings.TrimSuffix(freshPrefix(), "_")
	b := open(t, cfg)
	ctx := context.Background()
	l, err := sema.New(b).Semaphore("schema/s", 2).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := admin(t).QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename LIKE 'sema\_%'`,
		cfg.Schema).Scan(&n); err != nil || n != 4 {
		t.Fatalf("tables in schema %q: %d, %v; want 4", cfg.Schema, n, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Opened again: the version is read, nothing created.
	open(t, cfg)
}

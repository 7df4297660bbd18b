package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/postgres"
	"github.com/sema-dev/sema/internal/testenv"
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

// Tables of version 1 (no holds column, a force_release of three
// arguments) are upgraded in place when opened, and a force-release then
// keeps the permits taken until the lease's expiry.
func TestUpgradeFromVersion1(t *testing.T) {
	prefix := freshPrefix()
	cfg := postgres.Config{URL: testenv.SharedPostgres(t).URL(), TablePrefix: prefix}
	ctx := context.Background()
	l, err := sema.New(open(t, cfg)).Mutex("upgrade/m").Acquire(ctx, sema.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	c := admin(t)
	sqlExec(t, c, "ALTER TABLE "+prefix+"leases DROP COLUMN holds")
	sqlExec(t, c, "DROP FUNCTION "+prefix+"force_release(text, text, text, boolean)")
	sqlExec(t, c, "CREATE FUNCTION "+prefix+"force_release(p_name text, p_id text, p_channel text) RETURNS integer LANGUAGE sql AS 'SELECT 1'")
	sqlExec(t, c, "UPDATE "+prefix+"version SET version = 1")

	b := open(t, cfg)
	var version int
	if err := c.QueryRow(ctx, "SELECT max(version) FROM "+prefix+"version").Scan(&version); err != nil || version != 2 {
		t.Fatalf("version after the upgrade: %d, %v", version, err)
	}
	if hs, err := b.ForceRelease(ctx, "upgrade/m", "", sema.ForceOptions{}); err != nil || len(hs) != 1 || hs[0].Token != l.Token() {
		t.Fatalf("ForceRelease after the upgrade = %+v, %v", hs, err)
	}
	if st, err := b.Describe(ctx, "upgrade/m"); err != nil || len(st.Holders) != 1 || !st.Holders[0].ForceReleased || st.Used != 1 {
		t.Fatalf("Describe after a force-release = %+v, %v; want the holder, force-released, its permit taken", st, err)
	}
	req := sema.Request{Name: "upgrade/m", ID: "upgradeprobe", Owner: "probe", Limit: 1, Weight: 1, TTL: time.Minute}
	if _, err := b.TryAcquire(ctx, req); !errors.Is(err, sema.ErrNotAcquired) {
		t.Fatalf("TryAcquire before the force-released lease's expiry: %v, want ErrNotAcquired", err)
	}
	if err := l.Release(ctx); !errors.Is(err, sema.ErrForceReleased) {
		t.Fatalf("the old holder's Release: %v, want ErrForceReleased", err)
	}
	if _, err := b.TryAcquire(ctx, req); err != nil {
		t.Fatalf("TryAcquire after the old holder released: %v", err)
	}
}

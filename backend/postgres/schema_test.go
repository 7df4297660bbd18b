package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
	asVersion2(t, c, prefix)
	sqlExec(t, c, "ALTER TABLE "+prefix+"leases DROP COLUMN holds")
	sqlExec(t, c, "DROP FUNCTION "+prefix+"force_release(text, text, text, boolean)")
	sqlExec(t, c, "CREATE FUNCTION "+prefix+"force_release(p_name text, p_id text, p_channel text) RETURNS integer LANGUAGE sql AS 'SELECT 1'")
	sqlExec(t, c, "UPDATE "+prefix+"version SET version = 1")

	b := open(t, cfg)
	var version int
	if err := c.QueryRow(ctx, "SELECT max(version) FROM "+prefix+"version").Scan(&version); err != nil || version != 3 {
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

// Tables of version 2 (CHECK constraints instead of domains, requests
// queued without a channel) are upgraded in place when opened: the leases
// taken before stay, a request queued before is granted after (found at
// its next look), the constraints become domains, and a count the
// functions would never write is refused.
func TestUpgradeFromVersion2(t *testing.T) {
	prefix := freshPrefix()
	cfg := postgres.Config{URL: testenv.SharedPostgres(t).URL(), TablePrefix: prefix, Recheck: 200 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c0 := sema.New(open(t, cfg))
	s := c0.Semaphore("upgrade/s", 2)
	l1, err := s.Acquire(ctx, sema.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	l2, err := s.Acquire(ctx, sema.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		l, err := s.Acquire(ctx, sema.WithTTL(time.Minute))
		if err == nil {
			err = l.Release(ctx)
		}
		waited <- err
	}()
	for st, err := s.Describe(ctx); len(st.Waiters) == 0; st, err = s.Describe(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	c := admin(t)
	asVersion2(t, c, prefix)

	b := open(t, cfg)
	var version, checks int
	if err := c.QueryRow(ctx, "SELECT max(version) FROM "+prefix+"version").Scan(&version); err != nil || version != 3 {
		t.Fatalf("version after the upgrade: %d, %v", version, err)
	}
	if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_constraint WHERE contype = 'c' AND conrelid IN ($1::regclass, $2::regclass, $3::regclass)`,
		prefix+"names", prefix+"leases", prefix+"waiters").Scan(&checks); err != nil || checks != 0 {
		t.Fatalf("CHECK constraints left after the upgrade: %d, %v", checks, err)
	}
	if _, err := c.Exec(ctx, "UPDATE "+prefix+"names SET used = -1"); err == nil || !strings.Contains(err.Error(), prefix+"count") {
		t.Fatalf("a negative count after the upgrade: %v, want the domain's check to refuse it", err)
	}
	if st, err := b.Describe(ctx, "upgrade/s"); err != nil || len(st.Holders) != 2 || st.Holders[0].Token != l1.Token() || len(st.Waiters) != 1 {
		t.Fatalf("Describe after the upgrade = %+v, %v; want the two leases and the request taken before", st, err)
	}
	if err := b.Release(ctx, "upgrade/s", l1.ID()); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("the request queued before the upgrade: %v", err)
	}
	l3, err := sema.New(b).Semaphore("upgrade/s", 2).TryAcquire(ctx)
	if err != nil || l3.Token() <= l2.Token() {
		t.Fatalf("TryAcquire after the upgrade = %v, %v; want a permit, a later token", l3, err)
	}
	for _, l := range []*sema.Lease{l2, l3} {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// asVersion2 turns the tables of prefix back into those of version 2,
// which checked their counts, limits and weights with CHECK constraints.
func asVersion2(t *testing.T, c *pgx.Conn, prefix string) {
	t.Helper()
	sqlExec(t, c, "ALTER TABLE "+prefix+"names ALTER lim TYPE bigint, ALTER used TYPE bigint, ALTER waiting TYPE bigint, "+
		"ADD CHECK (lim >= 1), ADD CHECK (used >= 0), ADD CHECK (waiting >= 0)")
	for _, table := range []string{"leases", "waiters"} {
		sqlExec(t, c, "ALTER TABLE "+prefix+table+" ALTER weight TYPE bigint, ADD CHECK (weight >= 1)")
	}
	sqlExec(t, c, "DROP DOMAIN "+prefix+"count, "+prefix+"positive")
	sqlExec(t, c, "ALTER TABLE "+prefix+"waiters DROP COLUMN channel")
	sqlExec(t, c, "UPDATE "+prefix+"version SET version = 2")
}

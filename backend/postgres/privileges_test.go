package postgres_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/postgres"
	"github.com/sema-dev/sema/internal/testenv"
)

// A role that may not create the tables uses the ones another role made,
// with the rights the package documentation lists and no others: every
// step, a waiter's hand-off, a force-release and the sweep.
func TestLeastPrivilegeRole(t *testing.T) {
	pg := testenv.SharedPostgres(t)
	prefix := freshPrefix()
	open(t, postgres.Config{URL: pg.URL(), TablePrefix: prefix}) // the owner creates them
	a := admin(t)
	role := prefix + "user"
	sqlExec(t, a, "CREATE ROLE "+role+" LOGIN")
	t.Cleanup(func() {
		c := admin(t)
		sqlExec(t, c, "DROP OWNED BY "+role)
		sqlExec(t, c, "DROP ROLE "+role)
	})
	obj := func(names ...string) string {
		ids := make([]string, len(names))
		for i, n := range names {
			ids[i] = pgx.Identifier{"public", prefix + n}.Sanitize()
		}
		return strings.Join(ids, ", ")
	}
	sqlExec(t, a, "GRANT SELECT, INSERT, UPDATE, DELETE ON "+obj("names", "leases", "waiters")+" TO "+role)
	sqlExec(t, a, "GRANT SELECT ON "+obj("version")+" TO "+role)
	sqlExec(t, a, "GRANT USAGE ON SEQUENCE "+obj("tokens")+" TO "+role)

	var warnings lockedBuffer
	b := open(t, postgres.Config{URL: strings.Replace(pg.URL(), "postgres://postgres@", "postgres://"+role+"@", 1),
		TablePrefix: prefix, Sweep: time.Second,
		Logger: slog.New(slog.NewTextHandler(&warnings, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	c := sema.New(b)
	ctx := context.Background()
	mu := c.Mutex("job")
	held, err := mu.Acquire(ctx)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := mu.Acquire(ctx)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	waitQueued(t, b, "job", 1) // Describe shows it
	if err := held.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
	// A short lease: a force-released one stays, revoked, until its expiry.
	if held, err = mu.Acquire(ctx, sema.WithTTL(sema.MinTTL)); err != nil {
		t.Fatal(err)
	}
	if hs, err := c.ForceRelease(ctx, "job", "", sema.ForceNow()); err != nil || len(hs) != 1 {
		t.Fatalf("ForceRelease: %v, %v; want one holder", hs, err)
	}
	// The sweep takes the rows of the name nobody uses any more.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var n int
		if err := a.QueryRow(ctx, "SELECT count(*) FROM "+obj("names")).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s the name's row is still there (warnings: %s)", warnings.String())
		}
	}
	if w := warnings.String(); w != "" {
		t.Errorf("warnings: %s", w)
	}
}

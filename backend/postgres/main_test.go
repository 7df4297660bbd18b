package postgres_test

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sema-dev/sema/backend/postgres"
	"github.com/sema-dev/sema/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// quiet drops the backend's warnings (lost connections are expected in
// the fault tests).
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// open opens cfg (Logger quiet unless set) or fails the test; the backend
// is closed when the test ends.
func open(t testing.TB, cfg postgres.Config) *postgres.Backend {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := postgres.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// shared returns a config of the test binary's PostgreSQL with the
// default tables.
func shared(t testing.TB) postgres.Config {
	return postgres.Config{URL: testenv.SharedPostgres(t).URL()}
}

// freshPrefix is a table prefix of its own, for tests that must not meet
// other tests' tables (or that damage them).
func freshPrefix() string { return "t" + strings.ToLower(rand.Text()[:10]) + "_" }

func errorsContain(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }

// postgresConfig is a config of url with the default tables.
func postgresConfig(url string) postgres.Config { return postgres.Config{URL: url} }

func cfgWithPrefix(t testing.TB, prefix string) postgres.Config {
	cfg := shared(t)
	cfg.TablePrefix = prefix
	return cfg
}

// checkSums checks that the sums kept on each name's row (used, waiting)
// match the name's leases and waiters, in the tables of prefix.
func checkSums(t *testing.T, url, prefix string) {
	t.Helper()
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	rows, err := c.Query(context.Background(), strings.ReplaceAll(`
		SELECT n.name, n.used, n.waiting,
			(SELECT coalesce(sum(l.weight), 0) FROM P_leases l WHERE l.name = n.name AND NOT l.revoked),
			(SELECT count(*) FROM P_waiters q WHERE q.name = n.name)
		FROM P_names n`, "P_", prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	names := 0
	for rows.Next() {
		var name string
		var used, waiting, leases, waiters int64
		if err := rows.Scan(&name, &used, &waiting, &leases, &waiters); err != nil {
			t.Fatal(err)
		}
		names++
		if used != leases || waiting != waiters {
			t.Errorf("%q: row says used %d, waiting %d; its rows: leases %d, waiters %d", name, used, waiting, leases, waiters)
		}
	}
	t.Logf("sums of %d names checked", names)
}

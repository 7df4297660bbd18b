package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/postgres"
	"github.com/sema-dev/sema/internal/testenv"
)

// admin is a plain connection to the shared PostgreSQL, for what the tests
// do behind the backend's back.
func admin(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, testenv.SharedPostgres(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func sqlExec(t testing.TB, c *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := c.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func openErr(cfg postgres.Config) error {
	cfg.Logger = quiet
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := postgres.Open(ctx, cfg)
	if err == nil {
		b.Close()
	}
	return err
}

func req(name, id string) sema.Request {
	return sema.Request{Name: name, ID: id, Owner: "o", Limit: 1, Weight: 1, TTL: 10 * time.Second}
}

func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nobody listens there now
	start := time.Now()
	err = openErr(postgres.Config{URL: "postgres://postgres:secret@" + addr + "/postgres?sslmode=disable"})
	if !errors.Is(err, sema.ErrUnavailable) || strings.Contains(err.Error(), "secret") {
		t.Fatalf("Open of a closed port: %v; want ErrUnavailable without the password", err)
	}
	if !strings.Contains(err.Error(), "connect") {
		t.Errorf("the error should say it cannot connect: %v", err)
	}
	t.Logf("%v after %v", err, time.Since(start).Round(time.Millisecond))
}

func TestNoSuchDatabase(t *testing.T) {
	u := strings.Replace(testenv.SharedPostgres(t).URL(), "/postgres?", "/nosuchdb?", 1)
	if err := openErr(postgres.Config{URL: u}); !errors.Is(err, sema.ErrUnavailable) || !strings.Contains(err.Error(), "nosuchdb") {
		t.Fatalf("Open of a missing database: %v", err)
	}
}

// A URL parameter that is neither sema's nor pgx's goes to the server as a
// setting; one the server refuses is bad input, named as such.
func TestURLSettingRefused(t *testing.T) {
	for _, p := range []string{"schema=other", "statement_timeout=soon", "wal_level=minimal"} {
		err := openErr(postgres.Config{URL: testenv.SharedPostgres(t).URL() + "&" + p})
		if !errors.Is(err, sema.ErrInvalidArgument) || !strings.Contains(err.Error(), "refused a setting of the URL") ||
			!strings.Contains(err.Error(), "sema_schema") {
			t.Errorf("Open with %s: %v; want ErrInvalidArgument naming sema's own parameters", p, err)
		}
	}
}

func TestWrongCredentials(t *testing.T) {
	pg := testenv.SharedPostgres(t)
	a := admin(t)
	sqlExec(t, a, "DROP ROLE IF EXISTS sema_pw")
	sqlExec(t, a, "CREATE ROLE sema_pw LOGIN PASSWORD 'right'")
	pg.RequirePassword(t, "sema_pw")
	addr := strings.TrimPrefix(strings.Split(pg.URL(), "/postgres?")[0], "postgres://postgres@")
	url := func(pw string) string { return "postgres://sema_pw:" + pw + "@" + addr + "/postgres?sslmode=disable" }
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err = openErr(postgres.Config{URL: url("wrong")}); errors.Is(err, sema.ErrPermission) {
			break // the reload has taken effect
		}
	}
	if !errors.Is(err, sema.ErrPermission) || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("wrong password: %v; want ErrPermission, without the password", err)
	}
	t.Log(err)
	// An unknown role, too.
	if err := openErr(postgres.Config{URL: strings.Replace(pg.URL(), "postgres://postgres@", "postgres://nosuchrole@", 1)}); !errors.Is(err, sema.ErrPermission) {
		t.Fatalf("unknown role: %v; want ErrPermission", err)
	}
	// The right password, but no right to create tables in public.
	err = openErr(postgres.Config{URL: url("right"), TablePrefix: freshPrefix()})
	if !errors.Is(err, sema.ErrPermission) || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("a role that may not create the tables: %v; want ErrPermission", err)
	}
}

// readOnly is the URL of the shared database with every transaction
// read-only, as on a standby.
func readOnly(t testing.TB) string {
	return testenv.SharedPostgres(t).URL() + "&options=-c%20default_transaction_read_only%3Don"
}

func TestReadOnlyDatabase(t *testing.T) {
	// Tables to create: refused at Open.
	err := openErr(postgres.Config{URL: readOnly(t), TablePrefix: freshPrefix()})
	if !errors.Is(err, sema.ErrUnavailable) || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("Open on a read-only database without the tables: %v", err)
	}
	// Tables in place: opens, and every step that writes says why it fails.
	prefix := freshPrefix()
	open(t, postgres.Config{URL: testenv.SharedPostgres(t).URL(), TablePrefix: prefix})
	b := open(t, postgres.Config{URL: readOnly(t), TablePrefix: prefix})
	ctx := context.Background()
	_, err = b.TryAcquire(ctx, req("ro", "lease1"))
	if !errors.Is(err, sema.ErrUnavailable) || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("TryAcquire on a read-only database: %v", err)
	}
	t.Log(err)
	if _, err := b.Acquire(ctx, req("ro", "lease2")); !errors.Is(err, sema.ErrUnavailable) {
		t.Fatalf("Acquire on a read-only database: %v", err)
	}
	if _, err := b.Renew(ctx, "ro", "lease1", time.Second); !errors.Is(err, sema.ErrUnavailable) {
		t.Fatalf("Renew on a read-only database: %v", err)
	}
	if st, err := b.Describe(ctx, "ro"); err != nil || len(st.Holders) != 0 {
		t.Fatalf("Describe on a read-only database: %+v, %v (reading works)", st, err)
	}
}

// Tables someone altered or dropped: each step fails with a clear error,
// never a panic or a wrong answer.
func TestAlteredTables(t *testing.T) {
	a := admin(t)
	cases := []struct{ name, sql string }{
		{"dropped column", "ALTER TABLE %[1]sleases DROP COLUMN owner CASCADE"},
		{"renamed column", "ALTER TABLE %[1]sleases RENAME COLUMN expires_at TO expires"},
		{"added column", "ALTER TABLE %[1]sleases ADD COLUMN note text NOT NULL"},
		{"dropped table", "DROP TABLE %[1]sleases CASCADE"},
		{"dropped function", "DROP FUNCTION %[1]sacquire"},
		{"replaced function", `CREATE OR REPLACE FUNCTION %[1]sacquire(p_name text, p_id text, p_owner text, p_host text, p_pid integer,
			p_limit bigint, p_weight bigint, p_ttl_us bigint, p_queue boolean, p_channel text, p_wttl_us bigint)
			RETURNS SETOF %[1]srow LANGUAGE sql AS $$ SELECT 'granted', p_name, 'other', '', '', 0, 1::bigint, 1::bigint, 1::bigint, 0::bigint, 1::bigint, 0::bigint, 2::bigint $$`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prefix := freshPrefix()
			b := open(t, postgres.Config{URL: testenv.SharedPostgres(t).URL(), TablePrefix: prefix})
			sqlExec(t, a, fmt.Sprintf(tc.sql, prefix))
			ctx := context.Background()
			_, err := b.TryAcquire(ctx, req("altered", "lease1"))
			if !errors.Is(err, sema.ErrUnavailable) {
				t.Fatalf("TryAcquire: %v; want ErrUnavailable", err)
			}
			t.Log(err)
			if _, err := b.Acquire(ctx, req("altered", "lease2")); !errors.Is(err, sema.ErrUnavailable) {
				t.Fatalf("Acquire: %v; want ErrUnavailable", err)
			}
			if err := b.Release(ctx, "altered", "lease1"); !errors.Is(err, sema.ErrUnavailable) && !errors.Is(err, sema.ErrNotHeld) {
				t.Fatalf("Release: %v", err)
			}
		})
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	prefix := freshPrefix()
	open(t, postgres.Config{URL: testenv.SharedPostgres(t).URL(), TablePrefix: prefix})
	sqlExec(t, admin(t), "UPDATE "+prefix+"version SET version = 99")
	err := openErr(postgres.Config{URL: testenv.SharedPostgres(t).URL(), TablePrefix: prefix})
	if !errors.Is(err, sema.ErrUnavailable) || !strings.Contains(err.Error(), "version 99") {
		t.Fatalf("Open of tables from a newer sema: %v", err)
	}
}

// A request repeated after its lease expired gets a new lease, never the
// expired one back.
func TestRetryAfterExpiry(t *testing.T) {
	b := open(t, shared(t))
	ctx := context.Background()
	r := req(uniqueName("retry/expired"), "retried")
	r.TTL = sema.MinTTL
	g1, err := b.TryAcquire(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * sema.MinTTL)
	for _, acquire := range []func(context.Context, sema.Request) (sema.Grant, error){b.TryAcquire, b.Acquire} {
		g2, err := acquire(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if g2.Token <= g1.Token || !g2.ExpiresAt.After(g1.ExpiresAt) {
			t.Fatalf("retry after expiry: %+v, first %+v", g2, g1)
		}
		g1 = g2
		time.Sleep(2 * sema.MinTTL)
	}
}

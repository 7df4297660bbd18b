package testenv

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Postgres is a PostgreSQL server on 127.0.0.1 with trust authentication
// for the user "postgres", fsync on (as in production).
type Postgres struct {
	*Proc
	Addr   string
	bindir string
}

// URL is a postgres:// URL of the database "postgres".
func (p *Postgres) URL() string {
	return "postgres://postgres@" + p.Addr + "/postgres?sslmode=disable"
}

// StartPostgres initialises and starts a PostgreSQL of its own for the
// calling test; it is stopped when the test ends.
func StartPostgres(tb testing.TB) *Postgres {
	tb.Helper()
	p := startPostgres(tb)
	tb.Cleanup(func() { p.Stop(0); removeAll(p.Dir) })
	return p
}

func pgBin(tb testing.TB, name string) string {
	return lookBin(tb, name, "postgresql", "/usr/lib/postgresql/*/bin")
}

func startPostgres(tb testing.TB) *Postgres {
	tb.Helper()
	initdb := pgBin(tb, "initdb")
	if real, err := filepath.EvalSymlinks(initdb); err == nil {
		initdb = real // /usr/local/bin/initdb → /usr/lib/postgresql/N/bin, where the others are
	}
	postgres := filepath.Join(filepath.Dir(initdb), "postgres")
	dir := tempDir(tb, "postgres")
	data := filepath.Join(dir, "data")
	cred := unprivileged(tb, dir)
	if err := run(cred, dir, initdb, "-D", data, "-U", "postgres", "--auth=trust", "--no-sync",
		"-E", "UTF8", "--no-locale"); err != nil {
		removeAll(dir)
		tb.Fatalf("testenv: initdb: %v", err)
	}
	var lastErr error
	for range 3 {
		port, err := freePort(false)
		if err != nil {
			tb.Fatal(err)
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		args := []string{"-D", data, "-p", strconv.Itoa(port), "-c", "listen_addresses=127.0.0.1",
			"-c", "unix_socket_directories=" + dir, "-c", "max_connections=300", "-c", "fsync=on",
			"-c", "shared_buffers=64MB"}
		p := &Postgres{Proc: newProc("postgres "+addr, dir, postgres, args), Addr: addr, bindir: filepath.Dir(initdb)}
		p.cred = cred
		if lastErr = p.Start(); lastErr != nil {
			continue
		}
		if lastErr = p.waitReady(p.readyErr); lastErr == nil {
			return p
		}
		p.Stop(0)
	}
	removeAll(dir)
	tb.Fatalf("testenv: postgres did not start: %v", lastErr)
	return nil
}

// readyErr asks pg_isready whether the server accepts connections.
func (p *Postgres) readyErr() error {
	host, port, _ := net.SplitHostPort(p.Addr)
	return run(nil, p.Dir, filepath.Join(p.bindir, "pg_isready"), "-q", "-h", host, "-p", port, "-U", "postgres")
}

// Restart is RestartErr for a test: it fails the test if the server does
// not come back.
func (p *Postgres) Restart(tb testing.TB, crash bool) {
	tb.Helper()
	if err := p.RestartErr(crash); err != nil {
		tb.Fatal(err)
	}
}

// PgBouncer is a PgBouncer in transaction pooling mode in front of a
// Postgres: every transaction may run on a different server connection,
// as behind the poolers users run in production.
type PgBouncer struct {
	*Proc
	Addr string
}

// URL is a postgres:// URL of the database "postgres" through the pooler.
func (b *PgBouncer) URL() string {
	return "postgres://postgres@" + b.Addr + "/postgres?sslmode=disable"
}

// StartPgBouncer starts a PgBouncer (pool_mode=transaction) in front of pg
// for the calling test; it is stopped when the test ends.
func StartPgBouncer(tb testing.TB, pg *Postgres) *PgBouncer {
	tb.Helper()
	bin := lookBin(tb, "pgbouncer", "pgbouncer")
	dir := tempDir(tb, "pgbouncer")
	pgHost, pgPort, _ := net.SplitHostPort(pg.Addr)
	var lastErr error
	for range 3 {
		port, err := freePort(false)
		if err != nil {
			tb.Fatal(err)
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		ini := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s/users.txt
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 20
logfile = %s/log
pidfile =
ignore_startup_parameters = extra_float_digits
`, pgHost, pgPort, port, dir, dir)
		if err := os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(ini), 0o644); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "users.txt"), []byte(`"postgres" ""`+"\n"), 0o644); err != nil {
			tb.Fatal(err)
		}
		b := &PgBouncer{Proc: newProc("pgbouncer "+addr, dir, bin, []string{filepath.Join(dir, "pgbouncer.ini")}), Addr: addr}
		b.cred = unprivileged(tb, dir)
		if lastErr = b.Start(); lastErr != nil {
			continue
		}
		if lastErr = b.waitReady(func() error {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
			}
			return err
		}); lastErr == nil {
			tb.Cleanup(func() { b.Stop(0); removeAll(dir) })
			return b
		}
		b.Stop(0)
	}
	removeAll(dir)
	tb.Fatalf("testenv: pgbouncer did not start: %v", lastErr)
	return nil
}

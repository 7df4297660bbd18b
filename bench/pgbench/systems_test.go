package pgbench

import (
	"context"
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/postgres"
)

// locker is one contender's way to take and release a named lock.
type locker interface {
	lock(ctx context.Context, name string) error
	unlock(ctx context.Context, name string) error
}

// semaPool is the size of each sema client's pool.
const semaPool = 16

// semaClients opens n sema clients on the database, with extra URL
// parameters; contenders use them round robin. Each opens all the
// connections of its pool now, as the other systems do before the timed
// part.
func semaClients(b *testing.B, n int, params string) []*sema.Client {
	b.Helper()
	cfg, err := postgres.ParseURL(fmt.Sprintf("%s&pool_max_conns=%d&pool_min_conns=%[2]d%s", database(b), semaPool, params))
	if err != nil {
		b.Fatal(err)
	}
	since := dbNow(b)
	var cs []*sema.Client
	for range n {
		pb, err := postgres.Open(bg, cfg)
		if err != nil {
			b.Fatal(err)
		}
		c := sema.New(pb)
		b.Cleanup(func() { _ = c.Close() })
		warmUp(b, c)
		cs = append(cs, c)
	}
	waitSessions(b, "sema", since, n*semaPool)
	return cs
}

// dbNow is the database's clock.
func dbNow(b *testing.B) time.Time {
	b.Helper()
	c, err := pgx.Connect(bg, database(b))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(bg)
	var t time.Time
	if err := c.QueryRow(bg, "SELECT now()").Scan(&t); err != nil {
		b.Fatal(err)
	}
	return t
}

// waitSessions waits until at least n sessions of the application that
// started after since are open and idle: a pool opens its minimum of
// connections in the background.
func waitSessions(b *testing.B, app string, since time.Time, n int) {
	b.Helper()
	c, err := pgx.Connect(bg, database(b))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(bg)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var open int
		err := c.QueryRow(bg, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle' AND backend_start >= $2",
			app, since).Scan(&open)
		if err != nil {
			b.Fatal(err)
		}
		if open >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d connections of %s open after 30s", open, n, app)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// warmUp opens what a client opens on first use, as the other systems'
// connections are opened before the timed part: pooled connections, and
// the listen connection (by one wait for a lock).
func warmUp(b *testing.B, c *sema.Client) {
	b.Helper()
	mu := c.Mutex("bench/warm/" + runID())
	held, err := mu.Acquire(bg)
	if err != nil {
		b.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := mu.Acquire(bg)
		if err == nil {
			err = l.Release(bg)
		}
		got <- err
	}()
	for {
		st, err := mu.Describe(bg)
		if err != nil {
			b.Fatal(err)
		}
		if len(st.Waiters) > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := held.Release(bg); err != nil {
		b.Fatal(err)
	}
	if err := <-got; err != nil {
		b.Fatal(err)
	}
}

// conflicts sums the backends' retried steps.
func conflicts(cs []*sema.Client) int64 {
	var n int64
	for _, c := range cs {
		n += c.Backend().(*postgres.Backend).Stats().Conflicts
	}
	return n
}

// semaLocker holds the leases of one contender.
type semaLocker struct {
	c      *sema.Client
	leases map[string]*sema.Lease
}

func (s *semaLocker) lock(ctx context.Context, name string) error {
	l, err := s.c.Mutex(name).Acquire(ctx)
	if err == nil {
		s.leases[name] = l
	}
	return err
}

func (s *semaLocker) unlock(ctx context.Context, name string) error {
	l := s.leases[name]
	delete(s.leases, name)
	return l.Release(ctx)
}

type polledLocker struct{ d *drupalLock }

func (p polledLocker) lock(ctx context.Context, name string) error   { return p.d.lock(ctx, name) }
func (p polledLocker) unlock(ctx context.Context, name string) error { return p.d.release(ctx, name) }

// advisoryLocker takes pg_advisory_lock on a connection of the pool, which
// it keeps until the unlock: a session lock lives on its connection.
type advisoryLocker struct {
	pool *pgxpool.Pool
	held map[string]*pgxpool.Conn
}

func advisoryKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64())
}

func (a *advisoryLocker) lock(ctx context.Context, name string) error {
	c, err := a.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	if _, err := c.Exec(ctx, "SELECT pg_advisory_lock($1)", advisoryKey(name)); err != nil {
		c.Release()
		return err
	}
	a.held[name] = c
	return nil
}

func (a *advisoryLocker) unlock(ctx context.Context, name string) error {
	c := a.held[name]
	delete(a.held, name)
	defer c.Release()
	_, err := c.Exec(ctx, "SELECT pg_advisory_unlock($1)", advisoryKey(name))
	return err
}

// system is one of the compared ways to lock.
type system struct {
	name string
	// make returns n contenders, and a function that ends their sessions
	// (so that PostgreSQL counts their deadlocks) and reports extra
	// metrics.
	make func(b *testing.B, n int) ([]locker, func(b *testing.B))
}

var systems = []system{
	{"sema", func(b *testing.B, n int) ([]locker, func(*testing.B)) { return semaLockers(b, n, 1, "") }},
	{"sema-exec", func(b *testing.B, n int) ([]locker, func(*testing.B)) {
		return semaLockers(b, n, 1, "&default_query_exec_mode=exec")
	}},
	{"sema-8", func(b *testing.B, n int) ([]locker, func(*testing.B)) { return semaLockers(b, n, 8, "") }},
	{"polled", func(b *testing.B, n int) ([]locker, func(*testing.B)) {
		pool := conns(b, n)
		if _, err := pool.Exec(bg, drupalTable); err != nil {
			b.Fatal(err)
		}
		ls := make([]locker, n)
		for i := range ls {
			ls[i] = polledLocker{newDrupalLock(pool)}
		}
		return ls, func(*testing.B) { pool.Close() }
	}},
	{"advisory", func(b *testing.B, n int) ([]locker, func(*testing.B)) {
		pool := conns(b, n)
		ls := make([]locker, n)
		for i := range ls {
			ls[i] = &advisoryLocker{pool: pool, held: map[string]*pgxpool.Conn{}}
		}
		return ls, func(*testing.B) { pool.Close() }
	}},
}

// semaLockers makes n contenders over k sema clients.
func semaLockers(b *testing.B, n, k int, params string) ([]locker, func(*testing.B)) {
	cs := semaClients(b, k, params)
	ls := make([]locker, n)
	for i := range ls {
		ls[i] = &semaLocker{c: cs[i%k], leases: map[string]*sema.Lease{}}
	}
	return ls, func(b *testing.B) {
		for _, c := range cs {
			_ = c.Close()
		}
		b.ReportMetric(float64(conflicts(cs)), "conflicts")
	}
}

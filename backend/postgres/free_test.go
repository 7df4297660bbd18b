package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/postgres"
	"github.com/sema-dev/sema/internal/testenv"
)

// The statements of the common cases of acquire and release answer
// nothing, and change nothing, where they do not apply, so that the
// functions can answer; a retried request fails the acquire statement as
// a whole, its update of the name's sums included.
func TestFreeStatementsStepAside(t *testing.T) {
	prefix := freshPrefix()
	b := open(t, postgres.Config{URL: testenv.SharedPostgres(t).URL(), TablePrefix: prefix})
	c := admin(t)
	ctx := context.Background()
	acquireFree, releaseFree := postgres.FreeStatements("public", prefix)
	acquire := func(name, id string, limit int64) (kinds []string, err error) {
		rows, _ := c.Query(ctx, acquireFree, name, id, "owner", "host", int32(1), limit, int64(1), int64(60000000))
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				return nil, err
			}
			kinds = append(kinds, vals[0].(string))
		}
		return kinds, rows.Err()
	}
	request := func(name, id string, limit int64) sema.Request {
		r := req(name, id)
		r.Limit = limit
		return r
	}
	sums := func(name string) (used, waiting int64) {
		t.Helper()
		err := c.QueryRow(ctx, "SELECT used, waiting FROM "+prefix+"names WHERE name = $1", name).Scan(&used, &waiting)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		return used, waiting
	}
	want := func(what string, kinds []string, err error, n int) {
		t.Helper()
		if err != nil || len(kinds) != n {
			t.Fatalf("%s: answered %q, %v; want %d rows", what, kinds, err, n)
		}
	}

	kinds, err := acquire("free/a", "first", 2)
	want("a name not in use", kinds, err, 0)
	if _, err := b.TryAcquire(ctx, request("free/a", "first", 2)); err != nil {
		t.Fatal(err)
	}
	kinds, err = acquire("free/a", "second", 2)
	want("a second permit", kinds, err, 1)
	kinds, err = acquire("free/a", "third", 3)
	want("another limit", kinds, err, 0)
	kinds, err = acquire("free/a", "third", 2)
	want("no permit free", kinds, err, 0)

	if err := b.Release(ctx, "free/a", "first"); err != nil {
		t.Fatal(err)
	}
	_, err = acquire("free/a", "second", 2)
	if used, _ := sums("free/a"); used != 1 {
		t.Errorf("after a retried request (%v) the name's used = %d, want 1", err, used)
	}
	if err == nil {
		t.Error("a retried request: the statement did not fail")
	}
	if g, err := b.TryAcquire(ctx, request("free/a", "second", 2)); err != nil || g.ID != "second" {
		t.Errorf("a retried request: acquire answered %+v, %v; want its lease", g, err)
	}
	kinds, err = acquire("free/a", "first", 2)
	want("a permit free again", kinds, err, 1)

	if _, err := c.Exec(ctx, releaseFree, "free/a", "nobody"); err != nil {
		t.Fatal(err)
	}
	if used, _ := sums("free/a"); used != 2 {
		t.Errorf("after releasing an unknown lease the name's used = %d, want 2", used)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _, _ = b.Acquire(wctx, request("free/a", "waiter", 2)) }()
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		if _, waiting := sums("free/a"); waiting > 0 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the waiter was not queued within 10s")
		}
	}
	tag, err := c.Exec(ctx, releaseFree, "free/a", "first")
	if err != nil || tag.RowsAffected() != 0 {
		t.Fatalf("a release while someone waits: %v, %d rows; want none", err, tag.RowsAffected())
	}
	if used, _ := sums("free/a"); used != 2 {
		t.Errorf("after a release while someone waits the name's used = %d, want 2", used)
	}
}

package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sema-dev/sema/backend/postgres"
	"github.com/sema-dev/sema/internal/testenv"
)

// A step that grants commits durably even in a session whose default is
// synchronous_commit = off, and one that only queues or gives back
// commits lazily: each step sets its transaction's commit mode itself.
// So do the statements of the common cases of acquire and release.
func TestCommitModes(t *testing.T) {
	prefix := freshPrefix()
	open(t, postgres.Config{URL: testenv.SharedPostgres(t).URL(), TablePrefix: prefix})
	c := admin(t)
	ctx := context.Background()
	acquire := "SELECT * FROM " + prefix + "acquire($1, $2, 'owner', 'host', 1, 1, 1, 60000000, $3, 'sema_commit_test', 15000000)"
	release := "SELECT * FROM " + prefix + "release($1, $2, 'sema_commit_test')"
	acquireFree, releaseFree := postgres.FreeStatements("public", prefix)
	free := func(id string) []any {
		return []any{"commit/m", id, "owner", "host", int32(1), int64(1), int64(1), int64(60000000)}
	}
	// step runs one step in a transaction of its own, in a session that
	// commits lazily by default, and returns its first row's kind and the
	// commit mode it left.
	step := func(sql string, args ...any) (kind, mode string) {
		t.Helper()
		err := pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
				return err
			}
			rows, _ := tx.Query(ctx, sql, args...)
			for rows.Next() {
				if kind == "" {
					vals, err := rows.Values()
					if err != nil {
						return err
					}
					kind, _ = vals[0].(string)
				}
			}
			if err := rows.Err(); err != nil {
				return err
			}
			return tx.QueryRow(ctx, "SELECT current_setting('synchronous_commit')").Scan(&mode)
		})
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return kind, mode
	}
	for _, tc := range []struct {
		what, sql  string
		args       []any
		kind, mode string
	}{
		{"a grant", acquire, []any{"commit/m", "first", false}, "granted", "on"},
		{"a request refused", acquire, []any{"commit/m", "second", false}, "held", "off"},
		{"a request queued", acquire, []any{"commit/m", "second", true}, "queued", "off"},
		{"a release that hands the lock on", release, []any{"commit/m", "first"}, "grant", "on"},
		{"a release with nobody waiting", release, []any{"commit/m", "second"}, "released", "off"},
		{"a grant by the common case's statement", acquireFree, free("first"), "granted", "on"},
		{"a release by the common case's statement", releaseFree, []any{"commit/m", "first"}, "released", "off"},
	} {
		if kind, mode := step(tc.sql, tc.args...); kind != tc.kind || mode != tc.mode {
			t.Errorf("%s: answered %q, commit mode %q; want %q, %q", tc.what, kind, mode, tc.kind, tc.mode)
		}
	}
}

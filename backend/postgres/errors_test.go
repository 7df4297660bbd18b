package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/testenv"
)

// Server errors, produced by a real server, come out as sema sentinels
// with a message that says what to do.
func TestServerErrorsWrapped(t *testing.T) {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, testenv.SharedPostgres(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	b := &Backend{}
	cases := []struct {
		sql  string
		want error
		says string
	}{
		// What a transaction-mode pooler does to prepared statements.
		{"EXECUTE no_such_statement", sema.ErrUnavailable, "transaction-mode pooler"},
		{"PREPARE twice AS SELECT 1; PREPARE twice AS SELECT 1", sema.ErrUnavailable, "transaction-mode pooler"},
		{"SELECT * FROM no_such_table", sema.ErrUnavailable, "altered or dropped"},
		{"SET ROLE no_such_role", sema.ErrUnavailable, ""},
		{"BEGIN READ ONLY; CREATE TABLE ro (x int); COMMIT", sema.ErrUnavailable, "read-only"},
		{"SELECT 1/0", sema.ErrUnavailable, ""},
	}
	for _, tc := range cases {
		_, err := c.Exec(ctx, tc.sql)
		c.Exec(ctx, "ROLLBACK")
		c.Exec(ctx, "DEALLOCATE ALL")
		if err == nil {
			t.Fatalf("%s: no error", tc.sql)
		}
		got := b.wrap("acquire", "n", err)
		if !errors.Is(got, tc.want) || !strings.Contains(got.Error(), tc.says) || transient(got) {
			t.Errorf("%s: %v; want %v saying %q, not transient", tc.sql, got, tc.want, tc.says)
		}
		if strings.Count(got.Error(), "sema:") != 1 {
			t.Errorf("%s: %q says sema: more or less than once", tc.sql, got)
		}
	}
}

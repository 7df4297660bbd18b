package postgres

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sema-dev/sema"
)

// The server-side code: tables (schema.sql, version 3), the functions
// every step calls (functions.sql) and the statements of the common cases
// of acquire and release (acquire_free.sql, release_free.sql). {{object}}
// marks the name of one of the backend's objects; see objectNames.
var (
	//go:embed sql/schema.sql
	schemaSQL string
	//go:embed sql/functions.sql
	functionsSQL string
	//go:embed sql/acquire_free.sql
	acquireFreeSQL string
	//go:embed sql/release_free.sql
	releaseFreeSQL string
)

// schemaVersion is the version of the tables and functions this code
// needs, kept in the version table.
const schemaVersion = 3

// objects are the backend's domains, tables, sequence, type and functions
// (and lock_name, which the upgrade to version 3 drops); each is called
// Config.TablePrefix + its name, in Config.Schema.
var objects = []string{
	"count", "positive", "names", "leases", "leases_expiry", "waiters", "waiters_order", "tokens", "row", "version",
	"durable", "lazy", "us", "lease_row", "status_row", "queued_row", "expire", "lock_name", "grant_waiters",
	"acquire", "check", "poll", "leave", "release", "renew", "force_release", "inspect", "sweep",
}

var placeholder = regexp.MustCompile(`\{\{[a-z_]+\}\}`)

// sqlText fills the placeholders of text with quoted identifiers. An index
// name cannot take a schema; {{next_token}} takes the next token. The
// identifiers are letters, digits and underscores (Config.Validate), quoted
// by pgx.Identifier.Sanitize.
func sqlText(schema, prefix, text string) string {
	var pairs []string
	for _, o := range objects {
		id := pgx.Identifier{schema, prefix + o}.Sanitize()
		switch o {
		case "waiters_order", "leases_expiry":
			id = pgx.Identifier{prefix + o}.Sanitize()
		case "tokens":
			pairs = append(pairs, "{{next_token}}", "nextval('"+id+"'::regclass)")
		}
		pairs = append(pairs, "{{"+o+"}}", id)
	}
	out := strings.NewReplacer(pairs...).Replace(text)
	if left := placeholder.FindString(out); left != "" {
		panic("postgres: unknown placeholder " + left) // a bug in the embedded SQL
	}
	return out
}

// lockKey is the advisory lock that serializes the migrations of one
// schema and prefix.
func lockKey(schema, prefix string) int64 {
	h := fnv.New64a()
	h.Write([]byte("sema migrate\x00" + schema + "\x00" + prefix))
	return int64(h.Sum64())
}

// migrate makes sure the tables and functions exist at schemaVersion. It
// reads the version first (one statement); only if the tables are missing
// or older does it take a transaction-scoped advisory lock, which works
// through a transaction-mode pooler, and create or upgrade them, so that
// many processes starting at once do it once.
func (b *Backend) migrate(ctx context.Context) error {
	v, err := b.readVersion(ctx, b.pool)
	switch {
	case err == nil && v == schemaVersion:
		return nil
	case err == nil && v > schemaVersion:
		return b.newerSchema(v)
	case err != nil && !isUndefinedTable(err):
		return b.wrap("open", "", err)
	}
	if err := b.checkEncoding(ctx); err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey(b.cfg.Schema, b.cfg.TablePrefix)); err != nil {
			return err
		}
		// Only a missing schema is created: CREATE SCHEMA IF NOT EXISTS
		// needs the right to create schemas even when it exists.
		var missing bool
		if err := tx.QueryRow(ctx, "SELECT to_regnamespace($1) IS NULL", pgx.Identifier{b.cfg.Schema}.Sanitize()).Scan(&missing); err != nil {
			return err
		}
		if missing {
			if _, err := tx.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{b.cfg.Schema}.Sanitize()); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, b.sql("CREATE TABLE IF NOT EXISTS {{version}} (version integer NOT NULL)")); err != nil {
			return err
		}
		v, err := b.readVersion(ctx, tx)
		if err != nil {
			return err
		}
		switch {
		case v == 0:
			for _, text := range []string{schemaSQL, functionsSQL} {
				if _, err := tx.Exec(ctx, b.sql(text)); err != nil {
					return err
				}
			}
			_, err = tx.Exec(ctx, b.sql("INSERT INTO {{version}} (version) VALUES ($1)"), int32(schemaVersion))
			return err
		case v < 0:
			return fmt.Errorf("%w: the version table holds %d", errAnswer, v)
		case v < schemaVersion:
			return b.upgrade(ctx, tx, v)
		case v > schemaVersion:
			return errNewerSchema(v)
		}
		return nil // another process did it meanwhile
	})
	if v, ok := errors.AsType[errNewerSchema](err); ok {
		return b.newerSchema(int(v))
	}
	if err != nil {
		return b.wrap("create the tables", "", err)
	}
	return nil
}

// upgrades[v-1] are the statements that bring tables of version v to
// version v+1, before the functions are created again.
var upgrades = [][]string{
	// 1 to 2: force-released leases may keep their permits (holds), and
	// force_release takes whether to free them now. Processes still running
	// the version 1 code fail their force-releases until they are upgraded
	// too.
	{
		"ALTER TABLE {{leases}} ADD COLUMN IF NOT EXISTS holds boolean NOT NULL DEFAULT false",
		"DROP FUNCTION IF EXISTS {{force_release}}(text, text, text)",
	},
	// 2 to 3: domains check the counts, limits and weights instead of the
	// tables' CHECK constraints (see schema.sql), acquire makes a missing
	// name's row itself (lock_name is gone), and a request is queued with
	// the NOTIFY channel of its process. Requests queued before have
	// none: their grants are announced on the channel of the step that
	// makes them, which is theirs when an older sema makes it, and else
	// they find their grant at their next look (Config.Recheck).
	{
		"DROP FUNCTION IF EXISTS {{lock_name}}(text, bigint)",
		"ALTER TABLE {{waiters}} ADD COLUMN channel text NOT NULL DEFAULT ''",
		"ALTER TABLE {{waiters}} ALTER COLUMN channel DROP DEFAULT",
		"CREATE DOMAIN {{count}} AS bigint CHECK (VALUE >= 0)",
		"CREATE DOMAIN {{positive}} AS bigint CHECK (VALUE >= 1)",
		dropChecks,
		"ALTER TABLE {{names}} ALTER lim TYPE {{positive}}, ALTER used TYPE {{count}}, ALTER waiting TYPE {{count}}",
		"ALTER TABLE {{leases}} ALTER weight TYPE {{positive}}",
		"ALTER TABLE {{waiters}} ALTER weight TYPE {{positive}}",
	},
}

// dropChecks drops the CHECK constraints that version 2 tables were
// created with, found by what they check: PostgreSQL chose their names.
const dropChecks = `DO $sema$
DECLARE
	c record;
BEGIN
	FOR c IN SELECT x.conrelid::regclass AS t, x.conname FROM pg_constraint x
		WHERE x.contype = 'c'
			AND x.conrelid IN ('{{names}}'::regclass, '{{leases}}'::regclass, '{{waiters}}'::regclass)
			AND pg_get_constraintdef(x.oid) IN
				('CHECK ((lim >= 1))', 'CHECK ((used >= 0))', 'CHECK ((waiting >= 0))', 'CHECK ((weight >= 1))')
	LOOP
		EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', c.t, c.conname);
	END LOOP;
END
$sema$`

// upgrade brings tables of version v to schemaVersion and creates the
// functions again.
func (b *Backend) upgrade(ctx context.Context, tx pgx.Tx, v int) error {
	var texts []string
	for _, u := range upgrades[v-1:] {
		texts = append(texts, u...)
	}
	texts = append(texts, functionsSQL, fmt.Sprintf("UPDATE {{version}} SET version = %d", schemaVersion))
	for _, text := range texts {
		if _, err := tx.Exec(ctx, b.sql(text)); err != nil {
			return err
		}
	}
	return nil
}

type errNewerSchema int

func (e errNewerSchema) Error() string { return fmt.Sprintf("schema version %d", int(e)) }

func (b *Backend) newerSchema(v int) error {
	return fmt.Errorf("postgres: %w: the sema tables in schema %q (prefix %q) are at version %d, newer than this sema knows (%d): upgrade sema",
		sema.ErrUnavailable, b.cfg.Schema, b.cfg.TablePrefix, v, schemaVersion)
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// readVersion reads the version of the tables: 0 if the version table is
// empty; an undefined-table error if there is none.
func (b *Backend) readVersion(ctx context.Context, q querier) (int, error) {
	var v int32
	err := q.QueryRow(ctx, b.sql("SELECT coalesce(max(version), 0) FROM {{version}}")).Scan(&v)
	return int(v), err
}

// checkEncoding refuses a database whose encoding cannot hold every name:
// names are any UTF-8.
func (b *Backend) checkEncoding(ctx context.Context) error {
	var enc string
	if err := b.pool.QueryRow(ctx, "SELECT current_setting('server_encoding')").Scan(&enc); err != nil {
		return b.wrap("open", "", err)
	}
	if enc != "UTF8" && enc != "SQL_ASCII" {
		return fmt.Errorf("postgres: %w: the database's encoding is %s; sema names are UTF-8 (create the database WITH ENCODING 'UTF8')",
			sema.ErrUnavailable, enc)
	}
	return nil
}

func isUndefinedTable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42P01"
}

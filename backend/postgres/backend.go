package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/forced"
)

// Backend is the PostgreSQL backend. Make one with [Open]; it is safe for
// concurrent use.
type Backend struct {
	cfg  Config
	pool *pgxpool.Pool
	lis  *listener
	stmt statements
	free freeGrants // see free.go

	forced   string         // the channel force-releases are announced on
	notices  forced.Notices // told of force-releases (see NotifyForced)
	noticing atomic.Bool    // a client registered with NotifyForced
	lisUp    atomic.Bool    // holding started the listen connection

	done    chan struct{} // closed by Close
	closed  atomic.Bool
	closing sync.RWMutex // held (read) by waiting Acquires, so Close can wait for them

	conflicts atomic.Int64 // transactions retried after a deadlock or serialization failure
	log       *slog.Logger
}

// Interface guards.
var (
	_ sema.Backend       = (*Backend)(nil)
	_ sema.Blocker       = (*Backend)(nil)
	_ sema.Inspector     = (*Backend)(nil)
	_ sema.ForceReleaser = (*Backend)(nil)
	_ sema.ForceNotifier = (*Backend)(nil)
	_ sema.Declarer      = (*Backend)(nil)
)

// statements are the calls of the server-side functions, and the
// statements of the common cases of acquire and release (acquireFree,
// releaseFree: "" unless statements are prepared, see Open and free.go).
type statements struct {
	acquire, check, poll, leave, release, renew, forceRelease, inspect, sweep string
	acquireFree, releaseFree                                                  string
}

// Call timeouts: a database that stops answering (frozen, or a table
// locked by someone else) fails a call instead of hanging it.
const (
	connectTimeout = 10 * time.Second
	callTimeout    = 30 * time.Second
	leaveTimeout   = 5 * time.Second
	maxConflicts   = 5 // retries of a step after a deadlock or serialization failure
)

// Open connects to the database of cfg.URL, creates or upgrades the tables
// and functions of cfg.Schema and cfg.TablePrefix if needed, and returns the
// backend. ctx bounds the connection and the migration.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// A listen URL of its own says that URL may go through a
	// transaction-mode pooler, which cannot keep prepared statements from
	// one transaction to the next: one round trip per statement with
	// unnamed statements then. Otherwise URL keeps sessions (LISTEN needs
	// one), and prepared statements save the database parsing and planning
	// each call. A URL that sets pgx's default_query_exec_mode decides.
	mode := pgx.QueryExecModeCacheStatement
	if cfg.ListenURL != "" && cfg.ListenURL != cfg.URL {
		mode = pgx.QueryExecModeExec
	}
	cfg = cfg.withDefaults()
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w: URL: %s", sema.ErrInvalidArgument, redactParse(err))
	}
	lcfg, err := pgxpool.ParseConfig(cfg.ListenURL)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w: listen URL: %s", sema.ErrInvalidArgument, redactParse(err))
	}
	for c, app := range map[*pgx.ConnConfig]string{pcfg.ConnConfig: "sema", lcfg.ConnConfig: "sema listen"} {
		if !setsExecMode(c.ConnString()) {
			c.DefaultQueryExecMode = mode
		}
		if c.ConnectTimeout == 0 {
			c.ConnectTimeout = connectTimeout
		}
		if _, ok := c.RuntimeParams["application_name"]; !ok {
			c.RuntimeParams["application_name"] = app
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w: %v", sema.ErrInvalidArgument, err)
	}
	b := &Backend{cfg: cfg, pool: pool, done: make(chan struct{}), log: cfg.Logger}
	b.forced = forcedChannel(cfg.Schema, cfg.TablePrefix)
	b.stmt = statements{
		acquire:      b.sql("SELECT * FROM {{acquire}}($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"),
		check:        b.sql("SELECT * FROM {{check}}($1, $2, $3)"),
		poll:         b.sql("SELECT * FROM {{poll}}($1, $2, $3, $4)"),
		leave:        b.sql("SELECT * FROM {{leave}}($1, $2, $3)"),
		release:      b.sql("SELECT * FROM {{release}}($1, $2, $3)"),
		renew:        b.sql("SELECT * FROM {{renew}}($1, $2, $3)"),
		forceRelease: b.sql("SELECT * FROM {{force_release}}($1, $2, $3, $4)"),
		inspect:      b.sql("SELECT * FROM {{inspect}}($1, $2)"),
		sweep:        b.sql("SELECT {{sweep}}($1)"),
	}
	// Unnamed statements are parsed and planned at every call, which costs
	// the statements of the common cases more than calling the functions.
	if pcfg.ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement {
		b.stmt.acquireFree, b.stmt.releaseFree = b.sql(acquireFreeSQL), b.sql(releaseFreeSQL)
	}
	if err := b.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	b.lis = newListener(b, lcfg.ConnConfig)
	go b.sweepLoop()
	return b, nil
}

// sql fills the object names of this backend into text.
func (b *Backend) sql(text string) string { return sqlText(b.cfg.Schema, b.cfg.TablePrefix, text) }

// forcedChannel is the NOTIFY channel of the force-releases of the tables
// of schema and prefix, the same in every process: a hash, as channel
// names are identifiers of at most 63 bytes.
func forcedChannel(schema, prefix string) string {
	tag := sha256.Sum256([]byte(schema + "\x00" + prefix))
	h := sha256.Sum256(tag[:])
	return "sema_" + hex.EncodeToString(h[:16])
}

// Guarantees declares what the PostgreSQL backend promises.
func (b *Backend) Guarantees() sema.Guarantees {
	return sema.Guarantees{
		Scope:            sema.ScopeCluster,
		FIFO:             true,
		Linearizable:     true,
		DurableFencing:   true,
		SurvivesFailover: false,
		Wakeup:           "LISTEN/NOTIFY",
		Notes: "one PostgreSQL primary; grants and renewals are committed durably before anyone learns of them " +
			"(a release that hands nothing over is not waited for); a failover keeps them only with synchronous replication",
	}
}

// Stats are counters of a Backend.
type Stats struct {
	// Conflicts counts steps retried after a deadlock or a serialization
	// failure (which the lock order should make impossible).
	Conflicts int64
	// Reconnects counts how often the listen connection was (re)opened.
	Reconnects int64
}

// Stats returns the backend's counters.
func (b *Backend) Stats() Stats {
	return Stats{Conflicts: b.conflicts.Load(), Reconnects: b.lis.reconnects.Load()}
}

// Close fails the waiting Acquires with sema.ErrClosed (taking their
// requests out of the queue), stops the listen connection and closes the
// pool, waiting at most closeWait for its connections (a server that does
// not answer cannot hold it longer). Leases stay in the database until
// released or expired.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	close(b.done)
	b.closing.Lock() // the waiting Acquires have returned
	defer b.closing.Unlock()
	b.lis.stop()
	closed := make(chan struct{})
	go func() {
		b.pool.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(closeWait):
	}
	return nil
}

// closeWait bounds how long Close waits for the pool's connections to
// close. pgx closes a connection whose call was cut short by first asking
// the server to cancel that call, for up to 15 s; a server that does not
// answer must not hold Close that long. The connections finish closing in
// the background.
const closeWait = 2 * time.Second

// sweepLoop deletes the rows of idle names, with their expired leases and
// waiters, every cfg.Sweep (with jitter, so that many clients do not sweep
// at once).
func (b *Backend) sweepLoop() {
	t := time.NewTimer(jitter(b.cfg.Sweep))
	defer t.Stop()
	for {
		select {
		case <-b.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		var n int64
		err := b.pool.QueryRow(ctx, b.stmt.sweep, int32(1000)).Scan(&n)
		cancel()
		if err != nil && !b.closed.Load() {
			b.log.Warn("postgres: sweeping idle names failed", "err", b.wrap("sweep", "", err))
		}
		t.Reset(jitter(b.cfg.Sweep))
	}
}

// jitter returns d ± 20%.
func jitter(d time.Duration) time.Duration {
	return d*4/5 + rand.N(d*2/5+1)
}

// setsExecMode reports whether a connection string chooses pgx's
// default_query_exec_mode itself.
func setsExecMode(conn string) bool {
	if u, err := url.Parse(conn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		return u.Query().Has("default_query_exec_mode")
	}
	return execModeKV.MatchString(conn)
}

var execModeKV = regexp.MustCompile(`(^|\s)default_query_exec_mode\s*=`)

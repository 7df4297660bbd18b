// Package postgres is the sema backend on PostgreSQL (URLs postgres://… and
// postgresql://…): named locks and counting semaphores in the database a
// team already runs, with durable fencing tokens, FIFO waiting and
// hand-over by LISTEN/NOTIFY.
//
//	cfg, err := postgres.ParseURL("postgres://app@db:5432/app?sslmode=require")
//	b, err := postgres.Open(ctx, cfg)
//	client := sema.New(b)
//
// # Tables
//
// Open creates, on first use, a few tables, a sequence and functions in
// Config.Schema, every name starting with Config.TablePrefix (by default
// public.sema_…), and records their version; processes that start at once
// create them once (a transaction-scoped advisory lock serializes them). A
// database with tables of a newer version is refused. The tables are:
//
//   - names: one row per name in use, with the limit its holders and waiters
//     agreed on and the sums of its leases' weights and of its waiters. The
//     row is the name's lock: every step on a name locks it first, then
//     touches only that name's rows, so steps never deadlock.
//   - leases: one row per lease (name, lease ID, fencing token, owner,
//     weight, host, pid, acquired, renewed, expires, revoked).
//   - waiters: one row per queued request, in arrival order, each with a
//     short lease of its own (Config.WaiterTTL) that its client renews
//     while it waits.
//
// The role that creates them needs the right to create in the schema once.
// Another role can then use them with no more than SELECT, INSERT, UPDATE
// and DELETE on the three tables, SELECT on the version table
// (TablePrefix + "version") and USAGE on the sequence of tokens
// (TablePrefix + "tokens"); the functions are SECURITY INVOKER, and
// callable by everyone unless the database revokes that. For the defaults:
//
//	GRANT SELECT, INSERT, UPDATE, DELETE ON sema_names, sema_leases, sema_waiters TO app;
//	GRANT SELECT ON sema_version TO app;
//	GRANT USAGE ON SEQUENCE sema_tokens TO app;
//
// Each step (acquire, renew, release, a waiter's look, force-release) is
// one call of a PL/pgSQL function (sql/functions.sql): one statement, one
// short transaction, no lock held while a client waits. When the name's
// row shows the permits free and nobody queued, an acquire is two
// statements (update the row, add the lease), and a release without waiters
// is two (lock the row, delete the lease). With prepared statements those
// common cases are sent as statements of their own instead
// (sql/acquire_free.sql, sql/release_free.sql), which take less of the
// database's time than a function call; where one does not apply it
// changes nothing and the function is called next. So an acquire skips
// its statement while another Acquire of the same Backend waits for the
// name, and a release sends its statement only for a lease that
// acquire's granted (one granted after a wait most likely has waiters
// behind it). The rows of names nobody holds or waits for are swept every
// Config.Sweep.
//
// # Waiting
//
// A request that cannot be granted is queued. The step that frees permits
// — a release, a cancelled wait, a force-release, or the head waiter's
// look when a lease it waits for expires — grants them to the head of the
// queue in its own transaction and sends a NOTIFY on the channel of the
// waiting process, which PostgreSQL delivers when that transaction
// commits: one commit per hand-off. Each Backend has a channel of its own,
// which the requests it queues carry, and one listen connection for all
// its waiters, which LISTENs on that channel and hands each grant to its
// request: a grant reaches the process that waits for it and no other.
// Without a notification a waiter looks at its request every
// Config.Recheck (a cheap look that locks nothing), and at the expiry that
// may free its turn. When the listen connection breaks it is reopened, and
// every waiter looks again.
//
// # Poolers
//
// Every step is one statement, so the pool (Config.URL) may go through a
// transaction-mode pooler such as PgBouncer. LISTEN needs a session of its
// own: then set Config.ListenURL (or sema_listen=host:port in the URL) to
// the database itself. The listen connection checks, when it opens, that a
// NOTIFY sent through the pool reaches it; if not, waiting fails with an
// error that says so. With a ListenURL of its own the backend sends
// unnamed statements (PgBouncer before 1.21 cannot keep prepared
// statements in transaction mode); otherwise it prepares them. pgx's URL
// parameter default_query_exec_mode overrides that choice.
//
// # Guarantees
//
//   - Scope: every process on every host that reaches the database
//     (sema.ScopeCluster). At every instant the weights of a name's live
//     leases sum to at most its limit: steps on a name are serialized by its
//     row lock and judge expiry on the database's clock.
//   - Linearizable on one primary: each step takes effect at its commit.
//   - FIFO: waiters are granted in arrival order; a later, smaller request
//     never overtakes an earlier one, and a TryAcquire fails while anyone
//     waits.
//   - Durable fencing: tokens come from one sequence, strictly increasing
//     per name (across all names, in fact), also after a restart or a crash
//     of the database. A grant or a renewal commits with synchronous_commit
//     on (set for that transaction if the server's default is off) before
//     the client learns of it, so it survives a crash.
//   - Expiry is judged by now(), the database's clock, at the start of each
//     step's transaction. A step deletes expired leases before it counts
//     their permits free, so a renewal racing with expiry either commits
//     first or finds its lease gone.
//   - A released lease's permits go to the queue in the release's own
//     transaction; its waiters learn of it by NOTIFY.
//   - A force-released lease is marked revoked and keeps its row until its
//     expiry, so its holder's next renewal fails with
//     sema.ErrForceReleased; its permits stay taken (holds) until then or
//     until its holder releases it, unless ForceOptions.Now hands them on
//     at once. The force-release is announced by NOTIFY on a channel of
//     its own, which a holder's listen connection LISTENs on (opened, in
//     the background, once the process holds a lease): the holder learns
//     at once, or, if the notification is missed, at its next renewal.
//   - Tables of schema versions 1 and 2 are upgraded in place when a newer
//     sema opens them. From version 1 (a holds column, a new
//     force_release), processes still running the older sema fail their
//     force-releases until they are upgraded too. From version 2 (domains
//     instead of CHECK constraints, a request queued with its process's
//     channel), a request queued before the upgrade may learn of its grant
//     at its next look (Config.Recheck) rather than by notification.
//
// # Caveats
//
//   - A release that hands nothing over, and steps that only queue, look
//     or leave, commit without waiting for the disk. If the database
//     crashes before such a release is written, the lease is back after the
//     restart until its expiry; nobody can have been granted its permits
//     meanwhile, since any later grant's durable commit writes the release
//     before itself.
//   - A failover keeps grants and tokens only with synchronous replication
//     (Guarantees.SurvivesFailover is false: sema does not check it).
//   - A waiter that dies leaves the queue within Config.WaiterTTL; if a
//     release hands it permits in that window, they stay taken until that
//     lease's TTL, as for a holder that dies.
//   - Every NOTIFY in a database wakes every listening session of that
//     database, if only for the session to find it is not for it
//     (PostgreSQL's design), so the cost of a hand-off in the database
//     grows with the number of client processes listening on it.
//   - A waiting Acquire rides out an unreachable database for up to
//     Config.WaiterTTL, then fails with sema.ErrUnavailable.
//   - An acquire statement in flight is not abandoned when its context
//     ends, only after 30 seconds: abandoned, it could still commit after
//     its caller gave the request back, and its grant would stay until its
//     TTL. The caller gives the grant back at once instead.
//   - Names are stored as UTF-8: the database's encoding must be UTF8 (or
//     SQL_ASCII).
//   - Steps that find the tables or functions altered, a read-only database
//     (a standby, default_transaction_read_only), missing rights or an
//     unreachable server fail with errors wrapping sema.ErrUnavailable or
//     sema.ErrPermission that say which.
package postgres

// Package pgbench compares the PostgreSQL backend of sema with the two ways
// applications lock on PostgreSQL today, in the same run on the same
// database: session advisory locks (pg_advisory_lock on pooled
// connections) and a lock table polled the way Drupal's DatabaseLockBackend
// does it (INSERT, and on a unique violation a check for an expired row and
// a sleep of 25 ms, growing by 25 ms up to 500 ms, before trying again).
//
// Benchmarks (each a sub-benchmark per system: sema, polled, advisory):
//
//   - BenchmarkUncontended: one client takes and releases one lock in a
//     loop; ns/op is one acquire+release pair.
//   - BenchmarkHotName: 64 contenders take turns on one lock, all
//     starting at once; the metrics are those of the turns after the first
//     128 (the warm-up, as in the Redis benchmarks: the contenders that
//     arrived at once queue, every connection runs its first statements).
//     Metrics: handoffs/s (acquisitions by another contender than the last
//     holder), acq/s, the wait for the lock (p50, p99, max, in ms), the
//     share of acquisitions by the last holder (same-pct), the deadlocks
//     PostgreSQL detected meanwhile, and the longest wait of the warm-up
//     (warmup-wait-max-ms: the last of the contenders that arrived at
//     once).
//   - BenchmarkManyNames: 64 contenders each take one of 1,000 locks at
//     random, after one untimed turn each: pairs/s and deadlocks.
//
// sema's contenders are goroutines of one sema client (one backend: a pool
// and one listen connection), as in a Go program, or spread over 8 clients
// (sema-8) as over 8 processes. On a direct connection sema uses prepared
// statements; sema-exec sends unnamed statements, as it does when its URL
// goes through a transaction-mode pooler. The advisory and polled contenders each use
// a connection of their own, as those designs need. Every system opens its
// connections before the timed part (each sema client a pool of 16:
// pool_min_conns and pool_max_conns). sema's metric conflicts counts steps
// retried after a deadlock or a serialization failure.
//
// Run them with scripts/bench-postgres.sh, which starts one PostgreSQL
// (fsync and synchronous_commit on), runs the rounds in separate
// processes, alternating, and prints the medians. By hand:
//
//	eval "$(scripts/services.sh start postgres)"
//	cd bench && go test -run '^$' -bench . -count 1 ./pgbench
//	scripts/services.sh stop "$SEMA_SERVICES_DIR"
//
// Without SEMA_TEST_POSTGRES_URL the test main starts a PostgreSQL of its
// own (internal/testenv).
package pgbench

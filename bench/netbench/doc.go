// Package netbench holds the networked comparison benchmarks of sema: a
// `sema serve` process on its embedded, durable store, reached over
// loopback through backend/remote, against a local Redis with
// github.com/bsm/redislock and a local PostgreSQL with pg_advisory_lock, in
// the same run; and the JSON API as other languages use it, over plain
// keep-alive HTTP/1.1 (BenchmarkJSON).
//
// Run them with scripts/bench.sh, which starts Redis and PostgreSQL
// (scripts/services.sh) and prints a table of medians. By hand:
//
//	eval "$(scripts/services.sh start)"
//	cd bench && go test -run '^$' -bench . -count 3 ./netbench
//	scripts/services.sh stop "$SEMA_SERVICES_DIR"
//
// Environment (read by the test main only): SEMA_TEST_REDIS_URL and
// SEMA_TEST_POSTGRES_URL (a comparison is skipped without its URL), and
// SEMA_BENCH_HEAVY=1 to run BenchmarkHeld (1,000,000 held leases and 10,000
// waiters; minutes and gigabytes), SEMA_BENCH_SERVER_ENV, extra
// environment of the sema server only (e.g. "GOGC=400 GOMAXPROCS=1"), to
// compare settings, and SEMA_BENCH_BASE_BIN, another sema binary that
// BenchmarkJSON also measures (scripts/bench.sh sets it with BASE).
//
// Besides rates, the sema benchmarks report the CPU time per operation of
// this process (client-cpu-us/op) and of the server (server-cpu-us/op),
// which are less noisy than rates on a shared machine, and the server's
// group commits per operation and their mean time (fsyncs/op, fsync-ms,
// from its /metrics).
package netbench

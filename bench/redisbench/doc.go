// Package redisbench compares sema's Redis backend with the Go Redis lock
// libraries github.com/bsm/redislock and github.com/go-redsync/redsync/v4,
// on the same redis-server in the same run (one started by the test main,
// on loopback, without persistence).
//
//   - BenchmarkUncontended: one client acquires and releases one lock, the
//     four systems interleaved operation by operation (a PING, a sema pair,
//     a redislock pair, a redsync pair), so that a change of the machine's
//     load hits all alike; and two calls of a script that does nothing
//     (noop-scripts), the least a pair of two script calls can cost.
//     Metrics: µs per PING and per pair, and each pair in PING round
//     trips.
//   - BenchmarkHotName: 64 contenders, each with its own client (as 64
//     processes would be), take turns on one lock and hold it for no time.
//     Metrics: hand-offs/s (grants to another contender than the last
//     holder), acquisitions/s, the share of acquisitions that went to the
//     last holder again while others waited, and the wait for the lock
//     (p50, p99, max).
//   - BenchmarkDistinct: 64 goroutines of one process, one client per
//     system, each goroutine on a lock of its own. Metric: pairs/s.
//
// redislock waits with LinearBackoff(100ms) and redsync with its
// defaults (a random 50–250 ms delay between tries), both retrying until
// they get the lock. Run them with scripts/bench-redis.sh, which runs
// alternating rounds (one process each) and prints the medians.
package redisbench

// Package etcdbench compares sema's etcd backend with etcd's own lock,
// go.etcd.io/etcd/client/v3/concurrency.Mutex, on the same etcd in the same
// run: each benchmark alternates the two (sema, then etcd's), and -count
// repeats the pair, so a change in the machine's load hits both sides.
//
//   - BenchmarkUncontended: one client, acquire+release pairs in a row.
//   - BenchmarkHotName: 64 clients (each its own connection, as separate
//     processes would have) take turns on one lock: hand-offs/s, the wait
//     (p50, p99, max) and the share of acquisitions that went to the last
//     holder. BenchmarkHotFew and BenchmarkHotEight: the same with 4 and
//     8 clients.
//   - BenchmarkDistinct: 64 clients, each on a name of its own.
//   - BenchmarkSemaphore3: 50 workers × 20 tasks of 2ms under a semaphore of
//     3 permits (sema), against the recipe etcd users write for lack of a
//     semaphore, a mutex per permit ("slots"). Both are checked never to
//     run more than 3 tasks at once; the metric is the time against the
//     ideal (1000 × 2ms / 3).
//
// The etcd server is started by the test main (internal/testenv: the
// Debian etcd, on loopback, in a temporary directory). Run them with
// scripts/bench-etcd.sh, which prints a table of medians.
package etcdbench

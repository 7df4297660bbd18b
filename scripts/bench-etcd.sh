#!/usr/bin/env bash
# bench-etcd.sh — sema's etcd backend against etcd's own lock
# (go.etcd.io/etcd/client/v3/concurrency.Mutex), bench/etcdbench. Each
# benchmark runs both on the same etcd, started by the test binary
# (internal/testenv: Debian's etcd on loopback, in a temporary directory);
# each round is one process per benchmark, and the order of the two sides
# alternates from round to round. Prints the raw output, then the medians.
#
# Usage: scripts/bench-etcd.sh
#   COUNT=5   rounds (the table shows medians)
#   OUT=FILE  keep the raw output in FILE (default: a temp file)
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-5}
out=${OUT:-$(mktemp "${TMPDIR:-/tmp}/sema-bench-etcd.XXXXXX")}

scripts/services.sh install >&2

run_rounds() {
	set -euo pipefail
	cd bench
	go vet ./etcdbench
	go test -c -o "$tmp/etcdbench.test" ./etcdbench
	for i in $(seq 1 "$COUNT"); do
		first=sema
		if [ $((i % 2)) = 0 ]; then export SEMA_BENCH_MUTEX_FIRST=1; first=etcd-mutex; else unset SEMA_BENCH_MUTEX_FIRST; fi
		echo "--- round $i of $COUNT ($first first); load: $(cut -d' ' -f1-3 /proc/loadavg)"
		for spec in Uncontended:1000x HotShared:1500x HotName:1500x HotFew:400x HotEight:400x Distinct:3000x Semaphore3:1x; do
			"$tmp/etcdbench.test" -test.run '^$' -test.bench "^Benchmark${spec%%:*}\$" -test.benchtime "${spec##*:}" -test.count 1 -test.timeout 30m
		done
	done
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sema-bench-etcd-bin.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
set +e
run_rounds 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
set -e
[ "$status" = 0 ] || { echo "bench-etcd.sh: benchmarks failed (exit $status); output in $out" >&2; exit "$status"; }

echo
echo "Medians of $COUNT rounds (raw output: $out; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg))"
awk -f scripts/medians.awk -f <(printf '%s\n' '
END {
	s = get("Uncontended/sema", "ms/pair"); m = get("Uncontended/etcd-mutex", "ms/pair")
	printf "\nUncontended acquire+release, one client (ms/pair; lower is better)\n"
	printf "  sema %s   etcd mutex %s   mutex/sema %s\n", fmt(s, "%.3f"), fmt(m, "%.3f"), ratio(m, s)
	w = get("Uncontended/etcd-writes-only", "ms/pair")
	if (w > 0) printf "  etcd writes only (a put and a delete) %s   writes/mutex %s\n", fmt(w, "%.3f"), ratio(w, m)

	split("HotShared HotName HotFew HotEight", hs, " ")
	label["HotShared"] = "64 goroutines sharing one connection"
	label["HotName"] = "64 clients, a connection each"
	label["HotFew"] = "4 clients, a connection each"
	label["HotEight"] = "8 clients, a connection each"
	for (h = 1; h <= 4; h++) {
		b = hs[h]
		printf "\nOne hot lock, %s\n", label[b]
		printf "  %-12s %11s %10s %10s %10s %7s %10s %10s\n", "", "handoffs/s", "p50 ms", "p99 ms", "max ms", "%same", "client us", "etcd us"
		for (side = 1; side <= 2; side++) {
			sd = (side == 1) ? "sema" : "etcd-mutex"; k = b "/" sd
			printf "  %-12s %11s %10s %10s %10s %7s %10s %10s\n", sd, fmt(get(k, "handoffs/s"), "%.0f"),
				fmt(get(k, "wait-p50-ms"), "%.1f"), fmt(get(k, "wait-p99-ms"), "%.1f"), fmt(get(k, "wait-max-ms"), "%.1f"),
				fmt(get(k, "%same"), "%.1f"), fmt(get(k, "client-cpu-us/op"), "%.0f"), fmt(get(k, "etcd-cpu-us/op"), "%.0f")
		}
		printf "  sema/mutex hand-offs %s; mutex/sema wait p99 %s\n", ratio(get(b "/sema", "handoffs/s"), get(b "/etcd-mutex", "handoffs/s")),
			ratio(get(b "/etcd-mutex", "wait-p99-ms"), get(b "/sema", "wait-p99-ms"))
		k = b "/etcd-writes-only"
		if ((k, "handoffs/s") in seen)
			printf "  etcd writes only (a put as a client queues, a delete per hand-off): %s hand-offs/s, %s the mutex'"'"'s\n",
				fmt(get(k, "handoffs/s"), "%.0f"), ratio(get(k, "handoffs/s"), get(b "/etcd-mutex", "handoffs/s"))
	}
	s = get("Distinct/sema", "pairs/s"); m = get("Distinct/etcd-mutex", "pairs/s")
	printf "\n64 clients on distinct names (pairs/s)\n  sema %s   etcd mutex %s   sema/mutex %s\n", fmt(s, "%.0f"), fmt(m, "%.0f"), ratio(s, m)
	s = get("Semaphore3/sema", "x-ideal"); m = get("Semaphore3/etcd-mutex-slots", "x-ideal")
	printf "\n3 permits, 50 workers x 20 tasks of 2ms (time / ideal %.0fms; max running)\n", 50 * 20 * 2 / 3
	printf "  sema %s (max %s)   mutex per slot %s (max %s)\n", fmt(s, "%.2fx"), fmt(get("Semaphore3/sema", "max-running"), "%.0f"),
		fmt(m, "%.2fx"), fmt(get("Semaphore3/etcd-mutex-slots", "max-running"), "%.0f")
	printf "  etcd writes only (a put per queued task, a delete per hand-off) %s\n", fmt(get("Semaphore3/etcd-writes-only", "x-ideal"), "%.2fx")
}') "$out"

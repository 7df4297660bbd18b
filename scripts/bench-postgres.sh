#!/usr/bin/env bash
# bench-postgres.sh — sema's PostgreSQL backend against pg_advisory_lock on
# pooled connections and a Drupal-style polled lock table (bench/pgbench),
# on one PostgreSQL started here (fsync and synchronous_commit on), in one
# run: each round is a separate `go test -bench` process running every
# system in turn, so the systems alternate round after round and a change
# in the machine's load hits them alike. Prints the raw output, then the
# medians.
#
# Usage: scripts/bench-postgres.sh [go test -bench flags...]
#   COUNT=5          rounds (the table shows medians)
#   BENCHTIME=2000x  acquisitions per benchmark and system
#   OUT=FILE         keep the raw output in FILE (default: a temp file)
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-5}
BENCHTIME=${BENCHTIME:-2000x}
out=${OUT:-$(mktemp "${TMPDIR:-/tmp}/sema-bench-postgres.XXXXXX")}

run_rounds() {
	set -euo pipefail
	cd bench
	go vet ./pgbench
	go test -c -o "$TMPDIR_BENCH/pgbench.test" ./pgbench
	for i in $(seq 1 "$COUNT"); do
		echo "--- round $i of $COUNT ($(uptime | sed 's/.*load average/load average/'))"
		(cd pgbench && "$TMPDIR_BENCH/pgbench.test" -test.run '^$' -test.bench 'Uncontended|HotName|ManyNames' \
			-test.benchtime "$BENCHTIME" -test.count 1 -test.timeout 60m "$@")
	done
}
export -f run_rounds
TMPDIR_BENCH=$(mktemp -d "${TMPDIR:-/tmp}/sema-bench-postgres-bin.XXXXXX")
export COUNT BENCHTIME TMPDIR_BENCH
trap 'rm -rf "$TMPDIR_BENCH"' EXIT
set +e
scripts/services.sh exec postgres -- bash -c 'run_rounds "$@"' bash "$@" 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
set -e
[ "$status" = 0 ] || { echo "bench-postgres.sh: benchmarks failed (exit $status); output in $out" >&2; exit "$status"; }

echo
echo "Medians of $COUNT rounds (raw output: $out)"
awk -f scripts/medians.awk -f <(printf '%s\n' '
/^--- round/ { if (match($0, /load average: [0-9.]+/)) loads = loads " " substr($0, RSTART + 14, RLENGTH - 14) }
END {
	split("sema sema-exec sema-8 polled advisory", sys, " ")
	split("sema (one client)|sema, unnamed statements|sema (8 clients)|polled table (Drupal)|pg_advisory_lock", label, "|")
	printf "load average (1 min) at the start of each round:%s\n", loads
	printf "\nUncontended: one client, acquire + release\n"
	printf "  %-28s %12s %10s\n", "", "us/pair", "pairs/s"
	for (i = 1; i <= 5; i++) {
		b = "Uncontended/" sys[i]
		if (!((b, "ns/op") in seen)) continue
		printf "  %-28s %12s %10s\n", label[i], fmt(get(b, "ns/op") / 1000, "%.0f"), fmt(get(b, "pairs/s"), "%.0f")
	}
	s = get("Uncontended/sema", "ns/op"); p = get("Uncontended/polled", "ns/op")
	if (s > 0 && p > 0) printf "  %-28s %12.2fx   (target <= 1)\n", "sema / polled, time", s / p
	s = get("Uncontended/sema-exec", "ns/op")
	if (s > 0 && p > 0) printf "  %-28s %12.2fx\n", "sema unnamed / polled", s / p
	s = get("Uncontended/lease-row-only", "ns/op")
	if (s > 0 && p > 0) printf "  %-28s %12s %10s   (a floor: the lease row alone, %.2fx the polled table)\n", "lease row only",
		fmt(s / 1000, "%.0f"), fmt(get("Uncontended/lease-row-only", "pairs/s"), "%.0f"), s / p

	printf "\nHot name: 64 contenders, one lock\n"
	printf "  %-28s %10s %8s %9s %9s %9s %6s %9s %9s\n", "", "handoffs/s", "acq/s", "p50 ms", "p99 ms", "max ms", "same%", "deadlocks", "conflicts"
	for (i = 1; i <= 5; i++) {
		b = "HotName/" sys[i]
		if (!((b, "handoffs/s") in seen)) continue
		printf "  %-28s %10s %8s %9s %9s %9s %6s %9s %9s\n", label[i], fmt(get(b, "handoffs/s"), "%.0f"), fmt(get(b, "acq/s"), "%.0f"),
			fmt(get(b, "wait-p50-ms"), "%.2f"), fmt(get(b, "wait-p99-ms"), "%.1f"), fmt(get(b, "wait-max-ms"), "%.0f"),
			fmt(get(b, "same-pct"), "%.1f"), fmt(get(b, "deadlocks"), "%.0f"), fmt(get(b, "conflicts"), "%.0f")
	}
	s = get("HotName/sema", "handoffs/s"); p = get("HotName/polled", "handoffs/s")
	if (s > 0 && p > 0) printf "  %-28s %10.2fx   (target >= 3)\n", "handoffs sema / polled", s / p
	s = get("HotName/sema", "wait-p99-ms"); p = get("HotName/polled", "wait-p99-ms")
	if (s > 0 && p > 0) printf "  %-28s %10.1fx   (target >= 10)\n", "wait p99 polled / sema", p / s
	s = get("HotName/sema-8", "handoffs/s"); p = get("HotName/polled", "handoffs/s")
	if (s > 0 && p > 0) printf "  %-28s %10.2fx\n", "handoffs sema-8 / polled", s / p

	printf "\nMany names: 64 contenders, one of 1,000 locks each time\n"
	printf "  %-28s %10s %9s %9s\n", "", "pairs/s", "deadlocks", "conflicts"
	for (i = 1; i <= 5; i++) {
		b = "ManyNames/" sys[i]
		if (!((b, "pairs/s") in seen)) continue
		printf "  %-28s %10s %9s %9s\n", label[i], fmt(get(b, "pairs/s"), "%.0f"), fmt(get(b, "deadlocks"), "%.0f"), fmt(get(b, "conflicts"), "%.0f")
	}
}') "$out"

#!/usr/bin/env bash
# bench.sh — the networked comparison benchmarks of issue 4 (bench/netbench):
# sema serve (embedded durable store, over loopback) against Redis with
# bsm/redislock and PostgreSQL with pg_advisory_lock, all started here, in
# one run, so the ratios are fair. Prints the raw `go test -bench` output,
# then a table of medians over COUNT runs.
#
# Usage: scripts/bench.sh [-heavy] [go test -bench flags...]
#   COUNT=3        runs of each benchmark (the table shows medians)
#   BENCHTIME=3s   -benchtime of benchmarks (a) and (b)
#   -heavy         also run benchmark (c): 1,000,000 held leases and 10,000
#                  waiters (a few minutes, several GB of memory)
#   OUT=FILE       keep the raw output in FILE (default: a temp file)
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-3}
BENCHTIME=${BENCHTIME:-3s}
heavy=0
extra=()
for a in "$@"; do
	case "$a" in
	-heavy | --heavy) heavy=1 ;;
	*) extra+=("$a") ;;
	esac
done
out=${OUT:-$(mktemp "${TMPDIR:-/tmp}/sema-bench.XXXXXX")}

run_benches() {
	set -euo pipefail
	cd bench
	go vet ./...
	# One process per round, so the systems alternate (a, b, a, b, …) and a
	# change in the machine's load hits both sides of a ratio alike.
	for i in $(seq 1 "$COUNT"); do
		echo "--- round $i of $COUNT"
		go test -run '^$' -bench 'Distinct|HotName' -count 1 -benchtime "$BENCHTIME" -timeout 60m "${extra[@]}" ./netbench
	done
	if [ "$heavy" = 1 ]; then
		SEMA_BENCH_HEAVY=1 go test -run '^$' -bench 'Held' -count 1 -benchtime 1x -timeout 30m "${extra[@]}" ./netbench
	fi
}
export -f run_benches
export COUNT BENCHTIME heavy
# Arrays do not cross `bash -c`; pass extra flags as arguments.
set +e
scripts/services.sh exec redis postgres -- bash -c 'extra=("$@"); run_benches' bash "${extra[@]}" 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
set -e
[ "$status" = 0 ] || { echo "bench.sh: benchmarks failed (exit $status); output in $out" >&2; exit "$status"; }

echo
echo "Medians of $COUNT runs (one run of scripts/bench.sh; raw output: $out)"
awk '
function median(key,   n, i, j, t, v) {
	n = cnt[key]
	for (i = 1; i <= n; i++) v[i] = vals[key, i]
	for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j-1] > v[j]; j--) { t = v[j]; v[j] = v[j-1]; v[j-1] = t }
	return (n % 2) ? v[(n+1)/2] : (v[n/2] + v[n/2+1]) / 2
}
function get(b, u) { return ((b, u) in seen) ? median(b SUBSEP u) : -1 }
function fmt(x, f) { return x < 0 ? "-" : sprintf(f, x) }
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
	for (i = 3; i + 1 <= NF; i += 2) {
		u = $(i+1); k = name SUBSEP u
		cnt[k]++; vals[k, cnt[k]] = $i; seen[name, u] = 1
	}
}
END {
	printf "\n(a) 64 clients, distinct names: acquire+release pairs/s\n"
	printf "  %-28s %12s %16s %16s\n", "", "pairs/s", "client CPU us/op", "server CPU us/op"
	s = get("Distinct/sema", "pairs/s"); r = get("Distinct/redislock", "pairs/s")
	printf "  %-28s %12s %16s %16s\n", "sema Acquire (durable)", fmt(s, "%.0f"),
		fmt(get("Distinct/sema", "client-cpu-us/op"), "%.1f"), fmt(get("Distinct/sema", "server-cpu-us/op"), "%.1f")
	printf "  %-28s %12s %16s %16s\n", "sema TryAcquire", fmt(get("Distinct/sema-try", "pairs/s"), "%.0f"),
		fmt(get("Distinct/sema-try", "client-cpu-us/op"), "%.1f"), fmt(get("Distinct/sema-try", "server-cpu-us/op"), "%.1f")
	printf "  %-28s %12s %16s %16s\n", "redislock (Redis)", fmt(r, "%.0f"), fmt(get("Distinct/redislock", "client-cpu-us/op"), "%.1f"), "-"
	if (s > 0 && r > 0) printf "  %-28s %12.2fx   (target >= 1)\n", "sema / redislock", s / r
	t = get("Distinct/sema-try", "pairs/s")
	if (t > 0 && r > 0) printf "  %-28s %12.2fx\n", "sema TryAcquire / redislock", t / r
	printf "\n(b) 64 clients, one hot name\n"
	printf "  %-28s %12s %10s %12s %12s %12s\n", "", "handoffs/s", "acq/s", "wait p50 ms", "wait p99 ms", "wait max ms"
	split("HotName/sema HotName/pg-advisory", hb, " ")
	split("sema (remote, durable)|pg_advisory_lock (pgx)", hl, "|")
	for (i = 1; i <= 2; i++) {
		b = hb[i]
		printf "  %-28s %12s %10s %12s %12s %12s\n", hl[i], fmt(get(b, "handoffs/s"), "%.0f"), fmt(get(b, "acq/s"), "%.0f"),
			fmt(get(b, "wait-p50-ms"), "%.2f"), fmt(get(b, "wait-p99-ms"), "%.2f"), fmt(get(b, "wait-max-ms"), "%.1f")
	}
	s = get("HotName/sema", "handoffs/s"); p = get("HotName/pg-advisory", "handoffs/s")
	if (s > 0 && p > 0) printf "  %-28s %12.2fx   (target >= 2)\n", "handoffs sema / pg", s / p
	s = get("HotName/sema", "wait-p99-ms"); p = get("HotName/pg-advisory", "wait-p99-ms")
	if (s > 0 && p > 0) printf "  %-28s %12.2fx   (target <= 1)\n", "wait p99 sema / pg", s / p
	if (("Held", "B/lease") in seen) {
		printf "\n(c) 1,000,000 held leases, then 10,000 waiters on one name (one run)\n"
		printf "  %-28s %12.0f\n", "acquires/s while filling", get("Held", "held-acq/s")
		printf "  %-28s %12.0f\n", "server RSS at start, MiB", get("Held", "rss-start-MB")
		printf "  %-28s %12.0f\n", "RSS with 1M leases, MiB", get("Held", "rss-held-MB")
		printf "  %-28s %12.0f\n", "bytes per held lease", get("Held", "B/lease")
		printf "  %-28s %12.0f\n", "RSS with 10k waiters, MiB", get("Held", "rss-waiters-MB")
		printf "  %-28s %12.0f\n", "bytes per waiter", get("Held", "B/waiter")
		printf "  %-28s %12.1f\n", "seconds to queue 10k", get("Held", "queue-s")
		printf "  %-28s %12.0f\n", "handoffs/s draining 10k", get("Held", "drain-handoffs/s")
	}
}' "$out"

#!/usr/bin/env bash
# bench-redis.sh — sema's Redis backend against bsm/redislock and
# go-redsync/redsync on the same redis-server (bench/redisbench; the test
# binary starts its own server on loopback). One process per round, so a
# change in the machine's load hits every system alike; odd rounds run the
# systems in reverse order. Prints the raw output, then the medians over
# the rounds of each figure and of each round's ratios.
#
# Usage: scripts/bench-redis.sh [go test -bench flags...]
#   COUNT=5        rounds
#   BENCHTIME=3s   -benchtime of the uncontended and distinct-name runs
#                  (a hot-name run is 0.5 s of warm-up and 3 s measured)
#   OUT=FILE       keep the raw output in FILE (default: a temp file)
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-5}
BENCHTIME=${BENCHTIME:-3s}
out=${OUT:-$(mktemp "${TMPDIR:-/tmp}/sema-bench-redis.XXXXXX")}
scripts/services.sh install >/dev/null

{
	echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
	(cd bench && go vet ./redisbench)
	for i in $(seq 1 "$COUNT"); do
		echo "--- round $i of $COUNT"
		(cd bench && SEMA_BENCH_REVERSE=$((i % 2 == 0)) go test -run '^$' -bench . -count 1 \
			-benchtime "$BENCHTIME" -timeout 30m "$@" ./redisbench)
	done
	echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
} 2>&1 | tee "$out"

echo
echo "Medians of $COUNT rounds (raw output: $out)"
awk '
function median(k,   n, i, j, t, v) {
	n = cnt[k]
	for (i = 1; i <= n; i++) v[i] = vals[k, i]
	for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j-1] > v[j]; j--) { t = v[j]; v[j] = v[j-1]; v[j-1] = t }
	return (n % 2) ? v[(n+1)/2] : (v[n/2] + v[n/2+1]) / 2
}
function add(k, x) { cnt[k]++; vals[k, cnt[k]] = x }
function get(k) { return (k in cnt) ? median(k) : -1 }
function f(x, fmt) { return x < 0 ? "-" : sprintf(fmt, x) }
/^--- round/ { round++ }
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
	for (i = 3; i + 1 <= NF; i += 2) { m[name, $(i+1)] = $i; add(name SUBSEP $(i+1), $i) }
}
# Per-round ratios, once a round has all three systems of a benchmark.
/^(PASS|ok)/ && round > seen {
	seen = round
	if (m["HotName/sema", "handoffs/s"] > 0 && m["HotName/redislock", "handoffs/s"] > 0) {
		add("r_hand_rl", m["HotName/sema", "handoffs/s"] / m["HotName/redislock", "handoffs/s"])
		add("r_hand_rs", m["HotName/sema", "handoffs/s"] / m["HotName/redsync", "handoffs/s"])
		add("r_hp99_rl", m["HotName/redislock", "handoff-wait-p99-ms"] / m["HotName/sema", "handoff-wait-p99-ms"])
		add("r_hp99_rs", m["HotName/redsync", "handoff-wait-p99-ms"] / m["HotName/sema", "handoff-wait-p99-ms"])
		add("r_p99_rl", m["HotName/redislock", "wait-p99-ms"] / m["HotName/sema", "wait-p99-ms"])
		add("r_p99_rs", m["HotName/redsync", "wait-p99-ms"] / m["HotName/sema", "wait-p99-ms"])
		add("r_max_rl", m["HotName/redislock", "wait-max-ms"] / m["HotName/sema", "wait-max-ms"])
		add("r_max_rs", m["HotName/redsync", "wait-max-ms"] / m["HotName/sema", "wait-max-ms"])
	}
	if (m["Distinct/sema", "pairs/s"] > 0) {
		add("r_dist_rl", m["Distinct/sema", "pairs/s"] / m["Distinct/redislock", "pairs/s"])
		add("r_dist_rs", m["Distinct/sema", "pairs/s"] / m["Distinct/redsync", "pairs/s"])
	}
	delete m
}
END {
	printf "\n(1) uncontended acquire+release, one client (interleaved op by op)\n"
	printf "  %-12s %10s %10s\n", "", "us", "PINGs"
	printf "  %-12s %10s %10s\n", "PING", f(get("Uncontended" SUBSEP "ping-us"), "%.1f"), "1"
	split("sema redislock redsync", s, " ")
	for (i = 1; i <= 3; i++)
		printf "  %-12s %10s %10s\n", s[i], f(get("Uncontended" SUBSEP s[i] "-us"), "%.1f"), f(get("Uncontended" SUBSEP s[i] "-pings"), "%.2f")
	printf "  (target: sema within 2.2 PINGs)\n"

	printf "\n(2) one hot name, 64 contenders with a client each\n"
	printf "  %-10s %10s %9s %9s %9s %9s %10s %10s %8s\n", "", "handoffs/s", "acq/s", "same-%", "wait p50", "p99", "max (ms)", "handoff p99", "redis us"
	for (i = 1; i <= 3; i++) {
		k = "HotName/" s[i] SUBSEP
		printf "  %-10s %10s %9s %9s %9s %9s %10s %10s %8s\n", s[i], f(get(k "handoffs/s"), "%.0f"), f(get(k "acq/s"), "%.0f"),
			f(get(k "same-holder-%"), "%.1f"), f(get(k "wait-p50-ms"), "%.2f"), f(get(k "wait-p99-ms"), "%.1f"),
			f(get(k "wait-max-ms"), "%.0f"), f(get(k "handoff-wait-p99-ms"), "%.1f"), f(get(k "redis-cpu-us/op"), "%.0f")
	}
	printf "  sema vs redislock / redsync (medians of per-round ratios):\n"
	printf "    hand-offs/s          %6sx / %6sx  (target >= 10x)\n", f(get("r_hand_rl"), "%.1f"), f(get("r_hand_rs"), "%.1f")
	printf "    wait p99 lower by    %6sx / %6sx  (target >= 10x)\n", f(get("r_p99_rl"), "%.2f"), f(get("r_p99_rs"), "%.1f")
	printf "    hand-off p99 lower   %6sx / %6sx\n", f(get("r_hp99_rl"), "%.1f"), f(get("r_hp99_rs"), "%.1f")
	printf "    max wait lower by    %6sx / %6sx  (target >= 10x)\n", f(get("r_max_rl"), "%.1f"), f(get("r_max_rs"), "%.1f")

	printf "\n(3) 64 goroutines on distinct names, one client each system\n"
	printf "  %-10s %10s %12s %12s\n", "", "pairs/s", "client us", "redis us"
	for (i = 1; i <= 3; i++) {
		k = "Distinct/" s[i] SUBSEP
		printf "  %-10s %10s %12s %12s\n", s[i], f(get(k "pairs/s"), "%.0f"), f(get(k "client-cpu-us/op"), "%.1f"), f(get(k "redis-cpu-us/op"), "%.1f")
	}
	printf "  sema / redislock %sx, sema / redsync %sx (medians of per-round ratios; target >= 1x vs redislock)\n", f(get("r_dist_rl"), "%.2f"), f(get("r_dist_rs"), "%.2f")
}' "$out"

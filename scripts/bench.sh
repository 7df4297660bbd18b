#!/usr/bin/env bash
# bench.sh — the networked comparison benchmarks (bench/netbench): sema
# serve (embedded durable store, over loopback) against Redis with
# bsm/redislock and PostgreSQL with pg_advisory_lock, all started here, and
# the JSON API over plain keep-alive HTTP/1.1, in one run, so the ratios
# are fair. Prints the raw `go test -bench` output, then a table of medians
# over COUNT runs.
#
# Usage: scripts/bench.sh [-heavy] [go test -bench flags...]
#   COUNT=3        runs of each benchmark (the table shows medians)
#   BENCHTIME=3s   -benchtime of the rate benchmarks
#   -heavy         also run BenchmarkHeld: 1,000,000 held leases and
#                  10,000 waiters (a few minutes, several GB of memory)
#   BASE=DIR       also benchmark the sema tree in DIR (another checkout, of
#                  an older commit say), in alternating rounds: its own
#                  client and server, and its server under the JSON load
#   OUT=FILE       keep the raw output in FILE (default: a temp file)
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-3}
BENCHTIME=${BENCHTIME:-3s}
BASE=${BASE:-}
heavy=0
extra=()
for a in "$@"; do
	case "$a" in
	-heavy | --heavy) heavy=1 ;;
	*) extra+=("$a") ;;
	esac
done
out=${OUT:-$(mktemp "${TMPDIR:-/tmp}/sema-bench.XXXXXX")}
if [ -n "$BASE" ]; then
	BASE=$(cd "$BASE" && pwd)
	basebin=$(mktemp -d "${TMPDIR:-/tmp}/sema-base.XXXXXX")/sema
	(cd "$BASE" && go build -o "$basebin" ./cmd/sema)
	export SEMA_BENCH_BASE_BIN=$basebin
fi

run_benches() {
	set -euo pipefail
	cd bench
	go vet ./...
	# One process per round, so the systems alternate (a, b, a, b, …) and a
	# change in the machine's load hits both sides of a ratio alike. The
	# base tree's lines are renamed BenchmarkBase….
	for i in $(seq 1 "$COUNT"); do
		echo "--- round $i of $COUNT ($(uptime | sed 's/.*load average/load average/'))"
		go test -run '^$' -bench 'Distinct|HotName|JSON' -count 1 -benchtime "$BENCHTIME" -timeout 60m "$@" ./netbench
		if [ -n "$BASE" ]; then
			(cd "$BASE/bench" && go test -run '^$' -bench 'Distinct|HotName' -count 1 -benchtime "$BENCHTIME" -timeout 60m "$@" ./netbench) |
				sed 's/^Benchmark/BenchmarkBase/'
		fi
	done
	if [ "$heavy" = 1 ]; then
		SEMA_BENCH_HEAVY=1 go test -run '^$' -bench 'Held' -count 1 -benchtime 1x -timeout 30m "$@" ./netbench
		if [ -n "$BASE" ]; then
			(cd "$BASE/bench" && SEMA_BENCH_HEAVY=1 go test -run '^$' -bench 'Held' -count 1 -benchtime 1x -timeout 30m "$@" ./netbench) |
				sed 's/^Benchmark/BenchmarkBase/'
		fi
	fi
}
export -f run_benches
export COUNT BENCHTIME BASE heavy
# Arrays do not cross `bash -c`; pass extra flags as arguments.
set +e
scripts/services.sh exec redis postgres -- bash -c 'run_benches "$@"' bash "${extra[@]}" 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
set -e
[ "$status" = 0 ] || { echo "bench.sh: benchmarks failed (exit $status); output in $out" >&2; exit "$status"; }

echo
echo "Medians of $COUNT runs (one run of scripts/bench.sh; raw output: $out)"
awk -f scripts/medians.awk -f <(printf '%s\n' '
function row(label, b, u, f) { printf "  %-34s %12s\n", label, fmt(get(b, u), f) }
function ratioRow(label, x, y) { if (x > 0 && y > 0) printf "  %-34s %12.2fx\n", label, x / y }
# distinct prints the distinct-names table of tree p ("" or "Base").
function distinct(p, title,   s, r) {
	if (!((p "Distinct/sema", "pairs/s") in seen)) return
	printf "\n64 clients, distinct names: acquire+release pairs/s (%s)\n", title
	printf "  %-34s %12s %16s %16s\n", "", "pairs/s", "client CPU us/op", "server CPU us/op"
	split("sema|sema-try|redislock", bs, "|")
	split("sema Acquire (durable)|sema TryAcquire|redislock (Redis)", ls, "|")
	for (i = 1; i <= 3; i++) {
		b = p "Distinct/" bs[i]
		printf "  %-34s %12s %16s %16s\n", ls[i], fmt(get(b, "pairs/s"), "%.0f"),
			fmt(get(b, "client-cpu-us/op"), "%.1f"), fmt(get(b, "server-cpu-us/op"), "%.1f")
	}
	s = get(p "Distinct/sema", "pairs/s"); r = get(p "Distinct/redislock", "pairs/s")
	ratioRow("sema / redislock", s, r)
	ratioRow("sema TryAcquire / redislock", get(p "Distinct/sema-try", "pairs/s"), r)
}
# hot prints the hot-name table of tree p.
function hot(p, title,   s, q) {
	if (!((p "HotName/sema", "handoffs/s") in seen)) return
	printf "\n64 clients, one hot name (%s)\n", title
	printf "  %-34s %12s %10s %12s %12s %12s\n", "", "handoffs/s", "acq/s", "wait p50 ms", "wait p99 ms", "wait max ms"
	split("sema|pg-advisory", hb, "|")
	split("sema (remote, durable)|pg_advisory_lock (pgx)", hl, "|")
	for (i = 1; i <= 2; i++) {
		b = p "HotName/" hb[i]
		printf "  %-34s %12s %10s %12s %12s %12s\n", hl[i], fmt(get(b, "handoffs/s"), "%.0f"), fmt(get(b, "acq/s"), "%.0f"),
			fmt(get(b, "wait-p50-ms"), "%.2f"), fmt(get(b, "wait-p99-ms"), "%.2f"), fmt(get(b, "wait-max-ms"), "%.1f")
	}
	ratioRow("handoffs sema / pg", get(p "HotName/sema", "handoffs/s"), get(p "HotName/pg-advisory", "handoffs/s"))
	ratioRow("wait p99 sema / pg", get(p "HotName/sema", "wait-p99-ms"), get(p "HotName/pg-advisory", "wait-p99-ms"))
}
# held prints the held-leases figures of tree p.
function held(p, title,   b) {
	b = p "Held"
	if (!((b, "B/lease") in seen)) return
	printf "\n1,000,000 held leases, then 10,000 waiters on one name (%s; one run)\n", title
	row("acquires/s while filling", b, "held-acq/s", "%.0f")
	row("server RSS at start, MiB", b, "rss-start-MB", "%.0f")
	row("RSS with 1M leases, MiB", b, "rss-held-MB", "%.0f")
	row("bytes per held lease", b, "B/lease", "%.0f")
	row("RSS with 10k waiters, MiB", b, "rss-waiters-MB", "%.0f")
	row("bytes per waiter", b, "B/waiter", "%.0f")
	row("seconds to queue 10k", b, "queue-s", "%.1f")
	row("handoffs/s draining 10k", b, "drain-handoffs/s", "%.0f")
}
END {
	distinct("", "this tree"); distinct("Base", "base tree")
	hot("", "this tree"); hot("Base", "base tree")
	if (("JSON/sema", "pairs/s") in seen) {
		printf "\nJSON API, plain keep-alive HTTP/1.1: 64 connections, distinct names, acquire+release\n"
		printf "  %-34s %12s %16s\n", "", "pairs/s", "server CPU us/op"
		printf "  %-34s %12s %16s\n", "this tree", fmt(get("JSON/sema", "pairs/s"), "%.0f"), fmt(get("JSON/sema", "server-cpu-us/op"), "%.1f")
		printf "  %-34s %12s %16s\n", "base tree", fmt(get("JSON/base", "pairs/s"), "%.0f"), fmt(get("JSON/base", "server-cpu-us/op"), "%.1f")
		ratioRow("this / base", get("JSON/sema", "pairs/s"), get("JSON/base", "pairs/s"))
	}
	ratioRow("Go client pairs/s, this / base", get("Distinct/sema", "pairs/s"), get("BaseDistinct/sema", "pairs/s"))
	ratioRow("hot handoffs/s, this / base", get("HotName/sema", "handoffs/s"), get("BaseHotName/sema", "handoffs/s"))
	held("", "this tree"); held("Base", "base tree")
}') "$out"

#!/usr/bin/env bash
# Runs every fuzz target of sema, one after the other, for -fuzztime each
# (default 1000000x: one million executions), and says how many executions
# each ran. What a target finds is written by go test into that package's
# testdata/fuzz/<target>/ and fails the run: add the file to the seed corpus
# (it then runs in every `go test`) and fix the parser.
#
#   nice -n 15 scripts/fuzz.sh                      # the long mode: 1e6 executions per target
#   scripts/fuzz.sh -fuzztime 10s                   # a short pass
#   scripts/fuzz.sh -fuzztime 2000000x FuzzDecode   # targets whose name matches a pattern
#
# The servers are not needed: fuzz targets test parsers and decoders only.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

fuzztime=1000000x
if [ "${1:-}" = "-fuzztime" ]; then
	fuzztime=${2:?-fuzztime needs a value, such as 1000000x or 30s}
	shift 2
fi
pattern=${1:-.}

failed=()
total=0
while IFS=: read -r file name; do
	pkg=./$(dirname "$file")
	grep -q "$pattern" <<<"$name" || continue
	total=$((total + 1))
	log=$(mktemp)
	start=$(date +%s)
	if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" >"$log" 2>&1; then
		verdict=ok
	else
		verdict=FAIL
		failed+=("$pkg $name")
	fi
	execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
	printf '%-4s %-28s %-24s %10s execs %5ss\n' "$verdict" "$pkg" "$name" "${execs:-?}" "$(($(date +%s) - start))"
	[ "$verdict" = ok ] || sed 's/^/     | /' "$log" | tail -30
	rm -f "$log"
done < <(grep -rho --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . --with-filename |
	sed 's/:func /:/' | sed 's#^\./##' | sort)

echo "$total fuzz targets, ${#failed[@]} failed, -fuzztime $fuzztime each"
[ ${#failed[@]} -eq 0 ] || { printf 'failed: %s\n' "${failed[@]}"; exit 1; }

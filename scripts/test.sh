#!/usr/bin/env bash
# Runs every test of sema, as a newcomer and CI do: installs the servers the
# tests run against (apt; the tests start and stop them themselves, on
# loopback, in temporary directories — see internal/testenv), then formatting,
# vet, and the whole suite under the race detector (including the
# cross-process tests that start real `sema` processes). Exits non-zero on the
# first failure and says why.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "test.sh: Go is not installed (need Go ≥ 1.26)" >&2; exit 1; }

echo "== servers the tests start (Redis, PostgreSQL, PgBouncer, etcd)"
scripts/services.sh install

echo "== gofmt"
unformatted=$(gofmt -l $(find . -name '*.go' -not -path './.git/*'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== go test -race"
go test -race -count=1 -timeout 25m "$@" ./...


#!/usr/bin/env bash
# check.sh is what `make check` runs inside scripts/testenv.sh: the quick
# tier. Every package's tests with -short (which skips the browser, CDK
# synth, emulator and long property runs; see README "Development"), and
# the race detector only on the packages whose tests exercise Go
# concurrency (RACE_PKGS). `make test` (scripts/test.sh) still runs
# everything, all with -race: it is the CI gate.
set -euo pipefail
cd "$(dirname "$0")/.."

# The packages whose own code shares memory between goroutines and whose
# tests drive it concurrently: the limiter (leases, deny cache, breaker),
# rule distribution (rulesync: atomic snapshot swaps, the version poll), identity
# (the JWKS and upstream caches), stats (concurrent counters) and app
# (the object graph under concurrent decisions and failovers).
RACE_PKGS=${RACE_PKGS:-"./internal/limiter/ ./internal/rulesync/ ./internal/identity/ ./internal/stats/ ./internal/app/"}

race_list=$(go list $RACE_PKGS)
rest=$(go list ./... | grep -vxF "$race_list")

go vet ./...
go test -short -count=1 -timeout 5m $rest
go test -short -race -count=1 -timeout 5m $RACE_PKGS

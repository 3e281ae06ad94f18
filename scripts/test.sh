#!/usr/bin/env bash
# test.sh is what `make test` runs inside scripts/testenv.sh: lint (gofmt,
# vet, staticcheck: scripts/lint.sh), the admin API's contract and its
# TypeScript client (scripts/clients.sh), then every test with the race
# detector. Kept separate so CI and people run the same. Never -short: this
# is the gate, and the tests `make check` skips run here.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/lint.sh
# The admin API's OpenAPI document linted, the TypeScript client tested
# against a built sluice local.
scripts/clients.sh
go test -race -count=1 -timeout 20m ./...

#!/usr/bin/env bash
# lint.sh is what `make lint` runs, and `make test` before its tests:
# gofmt, go vet and staticcheck (go.mod's tool). Nothing else to install.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
out=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$out" ]; then
	echo "gofmt needed:" >&2
	echo "$out" >&2
	exit 1
fi
"$GO" vet ./...
"$GO" tool staticcheck ./...

#!/usr/bin/env bash
# clients.sh is the admin API contract's part of `make test`: it lints
# internal/admin/openapi.yaml with Redocly (scripts/redocly.sh), installs
# clients/typescript's pinned packages (npm ci, again only when its lock
# changes), builds sluice and runs the TypeScript client's tests on the
# Node.js of scripts/node.sh: a type check, the stale-types test, and the
# client against that `sluice local`.
#
#   scripts/clients.sh            lint and test
#   scripts/clients.sh generate   regenerate what comes from the document:
#                                 the client's types, docs/admin-api.md's table
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export PATH="$(scripts/node.sh):$PATH"
ts=clients/typescript
stamp=.cache/clients-typescript.lock
if [ ! -d "$ts/node_modules" ] || ! cmp -s "$ts/package-lock.json" "$stamp"; then
	echo "clients.sh: npm ci in $ts" >&2
	(cd "$ts" && npm ci --silent --no-audit --no-fund >&2)
	mkdir -p .cache && cp "$ts/package-lock.json" "$stamp"
fi
if [ "${1:-}" = generate ]; then
	(cd "$ts" && npm run --silent generate)
	go test -count=1 -run TestAdminDocMatchesSpec ./internal/admin -update
	exit 0
fi
node "$(scripts/redocly.sh)" lint --extends recommended-strict --format stylish internal/admin/openapi.yaml
go build -o build/sluice ./cmd/sluice
(cd "$ts" && SLUICE_BIN="$root/build/sluice" npm test --silent)

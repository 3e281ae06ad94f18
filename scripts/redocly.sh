#!/usr/bin/env bash
# redocly.sh prints the path of the Redocly CLI, which lints the admin
# API's OpenAPI document (internal/admin/openapi.yaml) in make test. It is
# installed once into .cache/redocly with npm ci from scripts/redocly's
# package-lock.json (so every package is pinned), again when that lock
# changes. Run it on the Node.js that scripts/node.sh prints:
#
#   "$(scripts/node.sh)/node" "$(scripts/redocly.sh)" lint internal/admin/openapi.yaml
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/scripts/redocly"
prefix="$root/.cache/redocly"
bin="$prefix/node_modules/@redocly/cli/bin/cli.js"
if [ ! -f "$bin" ] || ! cmp -s "$src/package-lock.json" "$prefix/package-lock.json"; then
	command -v npm >/dev/null 2>&1 || { echo "redocly.sh: npm is needed to install the Redocly CLI" >&2; exit 1; }
	echo "redocly.sh: installing the Redocly CLI (scripts/redocly/package-lock.json) into .cache/redocly" >&2
	mkdir -p "$prefix"
	cp "$src/package.json" "$src/package-lock.json" "$prefix/"
	(cd "$prefix" && npm ci --silent --no-audit --no-fund >&2)
	[ -f "$bin" ] || { echo "redocly.sh: $bin not found after npm ci" >&2; exit 1; }
fi
echo "$bin"

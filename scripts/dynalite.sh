#!/usr/bin/env bash
# dynalite.sh prints the path of the dynalite program (a DynamoDB API on
# LevelDB, the npm package dynalite), installed once into .cache/dynalite.
# Run it on the Node.js that scripts/node.sh prints:
#
#   "$(scripts/node.sh)/node" "$(scripts/dynalite.sh)" --host 127.0.0.1 --port 4567
#
# scripts/testenv.sh starts one for the ledger tests; sluice local and the
# fault harness can start theirs the same way.
set -euo pipefail
version=4.0.0
root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="$root/.cache/dynalite"
pkg="$prefix/node_modules/dynalite"
bin="$pkg/cli.js"
installed() {
	[ -f "$bin" ] && [ "$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$pkg/package.json" | head -1)" = "$version" ]
}
if ! installed; then
	command -v npm >/dev/null 2>&1 || { echo "dynalite.sh: npm is needed to install dynalite" >&2; exit 1; }
	echo "dynalite.sh: installing dynalite $version into .cache/dynalite" >&2
	npm install --silent --no-audit --no-fund --no-save --prefix "$prefix" "dynalite@$version" >&2
	installed || { echo "dynalite.sh: dynalite $version not found in $pkg after npm install" >&2; exit 1; }
fi
echo "$bin"

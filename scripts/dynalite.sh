#!/usr/bin/env bash
# dynalite.sh prints the path of the dynalite program (a DynamoDB API on
# LevelDB, the npm package dynalite), installed once into .cache/dynalite,
# behind run.js: dynalite 4.0.0 throws, and exits, when a client drops a
# request while it reads the body (a ledger call timing out does), where
# DynamoDB answers its other clients on; run.js keeps it up.
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
run="$prefix/run.js"
cat >"$run.tmp" <<'JS'
// run.js (written by scripts/dynalite.sh): dynalite, kept up when a
// client drops a request mid-body ("aborted", thrown from the request's
// error handler), as DynamoDB is.
process.on('uncaughtException', (err) => {
  if (err && (err.message === 'aborted' || err.code === 'ECONNRESET')) return
  console.error(err)
  process.exit(1)
})
require('./node_modules/dynalite/cli.js')
JS
mv "$run.tmp" "$run"
echo "$run"

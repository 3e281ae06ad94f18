#!/usr/bin/env bash
# node.sh prints the directory of a Node.js 22 or later, for PATH: the
# machine's own when it is new enough, else Node.js 22 from the npm registry
# (the node-linux-<arch> package, the official build), installed once into
# .cache/node. The CDK CLI and the jsii runtime under the CDK tests warn that
# Node.js 20 is past its end of life (2026-04-30; jsii says 2026-10-30).
set -euo pipefail
want=22
version=22.23.5
root="$(cd "$(dirname "$0")/.." && pwd)"
if command -v node >/dev/null 2>&1 && [ "$(node -p 'process.versions.node.split(".")[0]')" -ge "$want" ]; then
	dirname "$(command -v node)"
	exit 0
fi
case "$(uname -m)" in
x86_64 | amd64) arch=x64 ;;
aarch64 | arm64) arch=arm64 ;;
*) echo "node.sh: no Node.js $want package for $(uname -m)" >&2; exit 1 ;;
esac
command -v npm >/dev/null 2>&1 || { echo "node.sh: Node.js $want or later, or npm to install it, is needed" >&2; exit 1; }
dir="$root/.cache/node/node_modules/node-linux-$arch/bin"
if [ ! -x "$dir/node" ] || [ "$("$dir/node" -p 'process.versions.node')" != "$version" ]; then
	echo "node.sh: installing Node.js $version (npm node-linux-$arch) into .cache/node" >&2
	npm install --silent --no-audit --no-fund --no-save --prefix "$root/.cache/node" "node-linux-$arch@$version" >&2
fi
echo "$dir"

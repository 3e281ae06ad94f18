#!/usr/bin/env bash
# rds-ca.sh fetches the Amazon RDS CA bundle that sluice's binaries embed
# (internal/config/rdsca/global-bundle.pem), on a machine with internet
# access; `make rds-ca` and `make deploy` run it:
#
#   scripts/rds-ca.sh
#
# It accepts only a published version: the file's SHA-256 must be one of
# RDSCABundleDigests in internal/config/clients.go. When AWS publishes a
# new one (it adds the roots of each new region), the script stops and
# prints the digest, the certificate count and the subjects added: review
# them, add the digest and count to RDSCABundleDigests, and run it again.
# A file already there with a known digest is kept.
set -euo pipefail

url=https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem
root=$(cd "$(dirname "$0")/.." && pwd)
dst=$root/internal/config/rdsca/global-bundle.pem
known=$(grep -oE '"[0-9a-f]{64}": [0-9]+' "$root/internal/config/clients.go" | tr -d '":')

digest() { sha256sum "$1" | cut -d' ' -f1; }
accepted() { grep -q "^$(digest "$1") $(grep -c 'BEGIN CERTIFICATE' "$1")\$" <<<"$known"; }

if [ -f "$dst" ] && accepted "$dst"; then
	echo "rds-ca: $dst is a published version ($(digest "$dst")); kept"
	exit 0
fi
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
curl -fsS --proto '=https' --tlsv1.2 -o "$tmp" "$url"
if ! accepted "$tmp"; then
	echo "rds-ca: $url has SHA-256 $(digest "$tmp") and $(grep -c 'BEGIN CERTIFICATE' "$tmp") certificates: not a version internal/config knows." >&2
	echo "rds-ca: its subjects:" >&2
	openssl crl2pkcs7 -nocrl -certfile "$tmp" | openssl pkcs7 -print_certs -noout | grep '^subject=' | sort >&2
	echo "rds-ca: review them, add the digest and count to RDSCABundleDigests, and run again." >&2
	exit 1
fi
cp "$tmp" "$dst"
echo "rds-ca: wrote $dst ($(digest "$dst"))"

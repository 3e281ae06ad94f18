#!/usr/bin/env bash
# testenv.sh runs a command with a private Redis, PostgreSQL and DynamoDB
# (dynalite) behind it.
#
#   scripts/testenv.sh go test ./...
#
# It installs redis-server and PostgreSQL from Debian when they are missing
# (and gcc for -race, Node.js for the CDK template tests under infra/,
# chromium for the web console's browser tests, iproute2 and iptables for
# the fault harness; dynalite from the npm registry through scripts/node.sh
# and scripts/dynalite.sh, into .cache),
# starts each from a fresh temp dir on a free loopback port, exports
#   SLUICE_TEST_REDIS_URL, SLUICE_TEST_DATABASE_URL, SLUICE_TEST_DYNAMODB_URL,
#   SLUICE_REQUIRE_INTEGRATION=1
# runs the command, then stops exactly the processes it started (by pid) and
# exits with the command's status. Nothing shared is touched or flushed.
set -euo pipefail

PG_BIN=${PG_BIN:-}
log() { printf 'testenv: %s\n' "$*" >&2; }

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

apt_updated=
apt_install() {
	if [ -z "$apt_updated" ]; then
		log "apt-get update"
		as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
		apt_updated=1
	fi
	log "apt-get install $*"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

find_pg_bin() {
	if [ -n "$PG_BIN" ] && [ -x "$PG_BIN/initdb" ]; then return 0; fi
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		if [ -x "$d/initdb" ] && [ -x "$d/postgres" ]; then PG_BIN=$d; return 0; fi
	done
	return 1
}

ensure_tools() {
	command -v redis-server >/dev/null && command -v redis-cli >/dev/null || apt_install redis-server
	# go test -race needs cgo, hence a C compiler; the infra/ tests synthesize
	# CDK templates through jsii, which runs node.
	command -v gcc >/dev/null || apt_install gcc libc6-dev
	command -v node >/dev/null || apt_install nodejs
	# scripts/node.sh and scripts/dynalite.sh install from the npm registry.
	command -v npm >/dev/null || apt_install npm
	# The web console's browser tests (cmd/sluice) drive Debian's chromium
	# headless through chromedp.
	command -v chromium >/dev/null || apt_install chromium
	# The fault harness (internal/chaos: make chaos, and its short run in
	# make test) builds network namespaces with ip and cuts links with
	# iptables.
	command -v ip >/dev/null || apt_install iproute2
	command -v iptables >/dev/null || apt_install iptables
	# The distribution's server already running as a service would collide with
	# nothing (we use our own port) but wastes memory; we never start it.
	find_pg_bin || { apt_install postgresql; find_pg_bin; }
}

# Ports come from below the kernel's ephemeral range: a port there can be
# the local end of some client connection, which a connect test does not
# see and which makes the server's bind fail.
ephemeral_lo=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
free_port() {
	local p lo=10000 span=20000
	if [ "$ephemeral_lo" -gt 12000 ]; then span=$((ephemeral_lo - lo)); fi
	for _ in $(seq 1 200); do
		p=$((lo + RANDOM % span))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"; return 0
		fi
	done
	log "no free port found"; return 1
}

ensure_tools

workdir=$(mktemp -d "${TMPDIR:-/tmp}/sluice-testenv.XXXXXX")
chmod 755 "$workdir"
redis_pid=
pg_pid=
dynalite_pid=

cleanup() {
	local status=$?
	if [ -n "$redis_pid" ] && kill -0 "$redis_pid" 2>/dev/null; then
		kill -TERM "$redis_pid" 2>/dev/null || true
		wait "$redis_pid" 2>/dev/null || true
	fi
	if [ -n "$pg_pid" ] && kill -0 "$pg_pid" 2>/dev/null; then
		kill -INT "$pg_pid" 2>/dev/null || true # fast shutdown
		for _ in $(seq 1 100); do kill -0 "$pg_pid" 2>/dev/null || break; sleep 0.1; done
	fi
	if [ -n "$dynalite_pid" ] && kill -0 "$dynalite_pid" 2>/dev/null; then
		kill -TERM "$dynalite_pid" 2>/dev/null || true
		wait "$dynalite_pid" 2>/dev/null || true
	fi
	rm -rf "$workdir"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- Redis
redis_port=$(free_port)
mkdir -p "$workdir/redis"
redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$workdir/redis" \
	--save '' --appendonly no --daemonize no --enable-debug-command local \
	--logfile "$workdir/redis/redis.log" &
redis_pid=$!
for _ in $(seq 1 100); do
	redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
	sleep 0.05
done
redis-cli -p "$redis_port" ping >/dev/null || { log "redis did not start"; cat "$workdir/redis/redis.log" >&2; exit 1; }

# --- PostgreSQL (initdb refuses root, so the cluster belongs to postgres)
pg_port=$(free_port)
pgdata="$workdir/pg"
mkdir -p "$pgdata"
run_pg() {
	if [ "$(id -u)" -eq 0 ]; then
		chown -R postgres: "$pgdata"
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}
run_pg "$PG_BIN/initdb" -D "$pgdata/data" -U postgres -A trust -E UTF8 --no-locale >"$workdir/initdb.log" 2>&1 || {
	cat "$workdir/initdb.log" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] && chown -R postgres: "$pgdata"
run_pg "$PG_BIN/postgres" -D "$pgdata/data" -p "$pg_port" -k "$pgdata" \
	-c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off \
	-c full_page_writes=off -c max_connections=200 >"$workdir/pg.log" 2>&1 &
pg_pid=$!
for _ in $(seq 1 200); do
	"$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$pg_port" && break
	sleep 0.05
done
"$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$pg_port" || { log "postgres did not start"; cat "$workdir/pg.log" >&2; exit 1; }
# $! is runuser's pid as root; the postmaster's own pid is in its pid file.
pg_pid=$(head -1 "$pgdata/data/postmaster.pid")

# --- DynamoDB: dynalite on LevelDB, on Node.js 22 (tables are created
# ACTIVE at once; the ledger's tests each create their own).
root="$(cd "$(dirname "$0")/.." && pwd)"
node_dir=$("$root/scripts/node.sh")
dynalite_bin=$("$root/scripts/dynalite.sh")
dynalite_port=$(free_port)
mkdir -p "$workdir/dynalite"
"$node_dir/node" "$dynalite_bin" --host 127.0.0.1 --port "$dynalite_port" \
	--path "$workdir/dynalite/db" --createTableMs 0 --deleteTableMs 0 --updateTableMs 0 \
	>"$workdir/dynalite/dynalite.log" 2>&1 &
dynalite_pid=$!
# Ready when a ListTables answers 200 (dynalite wants an Authorization
# header and a date but checks no signature).
dynalite_ready() {
	local reply
	reply=$( (exec 3<>"/dev/tcp/127.0.0.1/$dynalite_port" && printf '%s\r\n' \
		'POST / HTTP/1.1' 'Host: 127.0.0.1' 'Connection: close' \
		'X-Amz-Target: DynamoDB_20120810.ListTables' \
		'Content-Type: application/x-amz-json-1.0' 'X-Amz-Date: 20000101T000000Z' \
		'Authorization: AWS4-HMAC-SHA256 Credential=test/20000101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0' \
		'Content-Length: 2' '' >&3 && printf '{}' >&3 && head -1 <&3) 2>/dev/null) || true
	[[ "$reply" == "HTTP/1.1 200"* ]]
}
for _ in $(seq 1 200); do
	dynalite_ready && break
	kill -0 "$dynalite_pid" 2>/dev/null || break
	sleep 0.05
done
dynalite_ready || { log "dynalite did not start"; cat "$workdir/dynalite/dynalite.log" >&2; exit 1; }

export SLUICE_TEST_REDIS_URL="redis://127.0.0.1:$redis_port/0"
export SLUICE_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$pg_port/postgres?sslmode=disable"
export SLUICE_TEST_DYNAMODB_URL="http://127.0.0.1:$dynalite_port"
export SLUICE_REQUIRE_INTEGRATION=1
log "redis $SLUICE_TEST_REDIS_URL (pid $redis_pid), postgres $SLUICE_TEST_DATABASE_URL (pid $pg_pid), dynamodb $SLUICE_TEST_DYNAMODB_URL (pid $dynalite_pid)"

set +e
"$@"
status=$?
set -e
exit "$status"

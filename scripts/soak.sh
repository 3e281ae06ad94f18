#!/usr/bin/env bash
# soak.sh is what `make soak` runs inside scripts/testenv.sh (which gives it
# a private Redis and PostgreSQL): `sluice local` on those servers under
# `sluice load --strict` for SOAK_DURATION, with a rule that binds (every
# subject gets 1 request a second and asks for 3), sampling the server's
# RSS (/proc/<pid>/status VmRSS) and goroutines (GET /admin/debug/vars)
# every SOAK_SAMPLE. It prints the samples and a summary, and fails when,
# after the warm-up, the mean RSS or goroutines of the last window exceed
# those of the first window by more than SOAK_GROWTH percent, or when any
# subject was over-admitted or any request failed. Error lines the server
# logged (such as a rules version read that timed out on a busy machine)
# are counted and shown, not failed on: requests and limits are what the
# soak judges.
#
#   make soak                                  # 10 minutes
#   make soak SOAK_DURATION=2m SOAK_WARMUP=30s SOAK_WINDOW=30s
#
# Not part of `make test`. The figures go in docs/RELIABILITY.md.
set -euo pipefail
cd "$(dirname "$0")/.."

SOAK_DURATION=${SOAK_DURATION:-10m}
SOAK_WARMUP=${SOAK_WARMUP:-60s}    # samples before this are not compared
SOAK_WINDOW=${SOAK_WINDOW:-60s}    # the first window after the warm-up vs the last one
SOAK_SAMPLE=${SOAK_SAMPLE:-5s}     # sampling interval
SOAK_RATE=${SOAK_RATE:-300}        # requests per second, all subjects
SOAK_SUBJECTS=${SOAK_SUBJECTS:-100}
# Few workers: the paced load needs ~1 at a time, and every idle client
# connection holds a server goroutine until the client's 30 s idle timeout
# closes it, which would show as goroutines falling, not as a leak.
SOAK_CONCURRENCY=${SOAK_CONCURRENCY:-4}
SOAK_GROWTH=${SOAK_GROWTH:-10}     # percent
GO=${GO:-go}

: "${SLUICE_TEST_REDIS_URL:?run under scripts/testenv.sh (make soak)}"
: "${SLUICE_TEST_DATABASE_URL:?run under scripts/testenv.sh (make soak)}"

log() { printf 'soak: %s\n' "$*" >&2; }

# secs turns 90, 90s, 10m or 1h into seconds.
secs() {
	case "$1" in
	*h) echo $((${1%h} * 3600)) ;;
	*m) echo $((${1%m} * 60)) ;;
	*s) echo "${1%s}" ;;
	*) echo "$1" ;;
	esac
}
duration_s=$(secs "$SOAK_DURATION")
warmup_s=$(secs "$SOAK_WARMUP")
window_s=$(secs "$SOAK_WINDOW")
sample_s=$(secs "$SOAK_SAMPLE")
if [ $((warmup_s + window_s)) -gt "$duration_s" ]; then
	log "SOAK_WARMUP + SOAK_WINDOW ($warmup_s s + $window_s s) must fit in SOAK_DURATION ($duration_s s)"
	exit 2
fi

free_port() {
	local p
	for _ in $(seq 1 200); do
		p=$((20000 + RANDOM % 20000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	log "no free port found"
	return 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/sluice-soak.XXXXXX")
local_pid=
sampler_pid=
cleanup() {
	local status=$?
	if [ -n "$sampler_pid" ] && kill -0 "$sampler_pid" 2>/dev/null; then
		kill "$sampler_pid" 2>/dev/null || true
		wait "$sampler_pid" 2>/dev/null || true
	fi
	if [ -n "$local_pid" ] && kill -0 "$local_pid" 2>/dev/null; then
		kill -INT "$local_pid" 2>/dev/null || true
		wait "$local_pid" 2>/dev/null || true
	fi
	if [ "$status" -ne 0 ] && [ -s "$work/local.err" ]; then
		log "last lines of sluice local's log:"
		tail -n 20 "$work/local.err" >&2
	fi
	rm -rf "$work"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "build"
"$GO" build -o "$work/sluice" ./cmd/sluice

# One rule: every subject of the demo API, 10 per 10 s (burst 10), so each
# subject (SOAK_RATE / SOAK_SUBJECTS a second, 3 by default) is denied most
# of the time after its first seconds: the script, the deny cache and the
# admission bound are all exercised.
cat >"$work/rules.json" <<'EOF'
{"plans": [], "rules": [
  {"api": "demo", "route": "*", "subject": "*", "limit": 10, "period": "10s", "description": "soak: 1 a second per subject"}
]}
EOF

port=$(free_port)
token="soak-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
base="http://127.0.0.1:$port"
SLUICE_ADMIN_TOKEN=$token REDIS_URL=$SLUICE_TEST_REDIS_URL DATABASE_URL=$SLUICE_TEST_DATABASE_URL LOG_LEVEL=info \
	"$work/sluice" local --addr "127.0.0.1:$port" --seed "$work/rules.json" >"$work/local.out" 2>"$work/local.err" &
local_pid=$!

vars() { curl -sf --max-time 5 -H "Authorization: Bearer $token" "$base/admin/debug/vars"; }
for _ in $(seq 1 300); do
	vars >/dev/null 2>&1 && break
	kill -0 "$local_pid" 2>/dev/null || { log "sluice local exited"; exit 1; }
	sleep 0.2
done
vars >/dev/null || { log "sluice local did not answer within 60s"; exit 1; }
log "sluice local pid $local_pid on $base (Redis $SLUICE_TEST_REDIS_URL, PostgreSQL); load for $SOAK_DURATION at $SOAK_RATE/s over $SOAK_SUBJECTS subjects"

# The sampler: elapsed seconds, RSS in KiB, goroutines, Go heap in bytes.
start=$(date +%s)
(
	while kill -0 "$local_pid" 2>/dev/null; do
		now=$(date +%s)
		rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$local_pid/status" 2>/dev/null || true)
		v=$(vars 2>/dev/null || true)
		g=$(printf '%s' "$v" | grep -o '"goroutines":[0-9]*' | cut -d: -f2)
		heap=$(printf '%s' "$v" | grep -o '"heap_alloc_bytes":[0-9]*' | cut -d: -f2)
		if [ -n "$rss" ] && [ -n "$g" ]; then
			echo "$((now - start)) $rss $g $heap"
		fi
		sleep "$sample_s"
	done
) >"$work/samples" &
sampler_pid=$!

set +e
"$work/sluice" load --strict --quiet --duration "$SOAK_DURATION" --rate "$SOAK_RATE" \
	--subjects "$SOAK_SUBJECTS" --concurrency "$SOAK_CONCURRENCY" "$base/hello" >"$work/load.txt" 2>"$work/load.err"
load_status=$?
set -e

kill "$sampler_pid" 2>/dev/null || true
wait "$sampler_pid" 2>/dev/null || true
sampler_pid=
kill -INT "$local_pid"
wait "$local_pid" || log "sluice local exited with status $?"
local_pid=

# --- summary
echo
echo "== samples: elapsed s, RSS KiB, goroutines, Go heap bytes"
awk '{printf "%s%s", $0, (NR % 4 == 0 ? "\n" : "    |    ")} END {if (NR % 4) print ""}' "$work/samples"
echo
echo "== soak: $SOAK_DURATION at $SOAK_RATE req/s over $SOAK_SUBJECTS subjects ($SOAK_CONCURRENCY workers), sampled every $SOAK_SAMPLE"
sed -n '1,4p' "$work/load.txt"
grep -E '^(over-admission|OVER-ADMISSION)' "$work/load.txt" || true
[ -s "$work/load.err" ] && cat "$work/load.err"

set +e
summary=$(awk -v warm="$warmup_s" -v win="$window_s" -v growth="$SOAK_GROWTH" '
	{ t[NR] = $1; rss[NR] = $2; g[NR] = $3; heap[NR] = $4; last = $1 }
	END {
		if (NR == 0) { print "no samples"; exit 2 }
		for (i = 1; i <= NR; i++) {
			if (t[i] >= warm && t[i] < warm + win) { n1++; r1 += rss[i]; g1 += g[i]; h1 += heap[i] }
			if (t[i] > last - win) { n2++; r2 += rss[i]; g2 += g[i]; h2 += heap[i] }
			if (rss[i] > rmax) rmax = rss[i]
			if (g[i] > gmax) gmax = g[i]
		}
		if (n1 == 0 || n2 == 0) { print "too few samples"; exit 2 }
		r1 /= n1; r2 /= n2; g1 /= n1; g2 /= n2; h1 /= n1; h2 /= n2
		rg = (r2 - r1) * 100 / r1; gg = (g2 - g1) * 100 / g1
		printf "samples %d over %d s; first window %d-%d s (%d samples), last window %d-%d s (%d samples)\n", NR, last, warm, warm + win, n1, last - win, last, n2
		printf "RSS MiB:     first %.1f  last %.1f  growth %+.1f%%  (max %.1f)\n", r1 / 1024, r2 / 1024, rg, rmax / 1024
		printf "goroutines:  first %.1f  last %.1f  growth %+.1f%%  (max %d)\n", g1, g2, gg, gmax
		printf "Go heap MiB: first %.1f  last %.1f\n", h1 / 1048576, h2 / 1048576
		if (rg > growth || gg > growth) { printf "GROWTH over %s%%\n", growth; exit 1 }
	}' "$work/samples")
awk_status=$?
set -e
echo "$summary"

errors=$(sed -n 's/^allowed [0-9]*  denied [0-9]*  errors \([0-9]*\).*/\1/p' "$work/load.txt")
logged=$(grep -c '"level":"ERROR"' "$work/local.err" || true)
echo "request errors: ${errors:-?}; server ERROR log lines: $logged; sluice load exit status: $load_status"
if [ "$logged" != 0 ]; then
	grep '"level":"ERROR"' "$work/local.err" | head -5
fi

fail=0
[ "$awk_status" -eq 0 ] || fail=1
[ "$load_status" -eq 0 ] || { echo "FAIL: sluice load exited $load_status (3: over-admission)"; fail=1; }
[ "${errors:-1}" = 0 ] || { echo "FAIL: request errors"; fail=1; }
if [ "$fail" -ne 0 ]; then
	echo "soak: FAILED"
	exit 1
fi
echo "soak: passed"

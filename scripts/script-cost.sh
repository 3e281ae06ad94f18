#!/usr/bin/env bash
# script-cost.sh measures Lua scripts side by side on a private
# redis-server: each round runs every one with redis-benchmark (EVALSHA, 16
# clients, keys over 10,000 subjects), the order reversed every other
# round, and reports per script the quartiles of its per-round ratio to the
# first one's Redis CPU per call (INFO cpu) and requests per second.
#
#   scripts/script-cost.sh ROUNDS N "label|file.lua|nkeys|args" ...
#
# The scripts as Redis runs them come from tools/rediscost; an argument
# list is ARGV (bucket.lua). For example, charge_one.lua against itself
# under RESP3:
#
#   go run ./tools/rediscost dump /tmp/lua
#   { echo 'redis.setresp(3)'; cat /tmp/lua/charge_one.lua; } > /tmp/lua/resp3.lua
#   A="1 1000000 1000000 1000000 0"
#   scripts/script-cost.sh 16 50000 "one|/tmp/lua/charge_one.lua|1|$A" "resp3|/tmp/lua/resp3.lua|1|$A"
#
# Wrong variants of a script (a part cut out) measure what that part
# costs; docs/performance.md has the runs.
set -euo pipefail
ROUNDS=$1
N=$2
shift 2
PORT=${PORT:-$((20000 + RANDOM % 20000))}
dir=$(mktemp -d)
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" >/dev/null 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
cli() { redis-cli -p "$PORT" "$@"; }
for _ in $(seq 50); do cli PING >/dev/null 2>&1 && break; sleep 0.1; done
cpu() { cli INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/{s+=$2} END{printf "%.6f", s}'; }
med() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END{printf "p25 %s median %s p75 %s", a[int(NR/4)+1], a[int((NR+1)/2)], a[int(3*NR/4)]}'; }
declare -A CR RR CPU RPS
for r in $(seq "$ROUNDS"); do
	list=("$@")
	if [ $((r % 2)) = 0 ]; then mapfile -t list < <(printf '%s\n' "$@" | tac); fi
	for spec in "${list[@]}"; do
		IFS='|' read -r label f nk args <<<"$spec"
		sha=$(cli SCRIPT LOAD "$(cat "$f")")
		keys=()
		for k in $(seq "$nk"); do keys+=("sc${sha:0:6}:{__rand_int__}:k$k"); done
		c0=$(cpu)
		# shellcheck disable=SC2086 # args is a list of words
		out=$(redis-benchmark -p "$PORT" -n "$N" -c 16 -r 10000 -q EVALSHA "$sha" "$nk" "${keys[@]}" $args 2>/dev/null | tr '\r' '\n' | grep 'requests per second' | tail -1)
		c1=$(cpu)
		CPU[$label]=$(awk -v a="$c0" -v b="$c1" -v n="$N" 'BEGIN{printf "%.3f", (b-a)*1e6/n}')
		RPS[$label]=$(sed 's/.*: \([0-9.]*\) requests per second.*/\1/' <<<"$out")
	done
	base=${1%%|*}
	for spec in "$@"; do
		label=${spec%%|*}
		CR[$label]+=" $(awk -v a="${CPU[$label]}" -v b="${CPU[$base]}" 'BEGIN{printf "%.3f", a/b}')"
		RR[$label]+=" $(awk -v a="${RPS[$label]}" -v b="${RPS[$base]}" 'BEGIN{printf "%.3f", a/b}')"
	done
	echo "round $r: $(for spec in "$@"; do label=${spec%%|*}; printf '%s %s µs CPU %s/s; ' "$label" "${CPU[$label]}" "${RPS[$label]}"; done)"
done
for spec in "$@"; do
	label=${spec%%|*}
	echo "$label ÷ ${1%%|*}: Redis CPU $(med <<<"${CR[$label]}"); requests/s $(med <<<"${RR[$label]}")"
done

#!/usr/bin/env bash
# fuzz.sh is what `make fuzz` runs: every fuzz target of the module, one at
# a time, each for FUZZTIME (default 60s).
#
#   FUZZTIME=10s scripts/fuzz.sh          # every target, 10 s each
#   scripts/fuzz.sh FuzzInvokeREST        # only the targets named
#
# The targets are found with `go test -list`, in the packages whose tests
# declare one, so a new target is fuzzed without touching this script.
# Their seeds live in each package's testdata/fuzz/<Target>/ (run by plain
# `go test` too); an input that fails is written there by the fuzzer, to
# be kept as a seed once fixed. None needs Redis or PostgreSQL.
# FUZZMINIMIZETIME (default 5s) bounds the minimisation of each new
# interesting input, so a short run spends its time fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME=${FUZZTIME:-60s}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-5s}
GO=${GO:-go}

mapfile -t pkgs < <(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u)
if [ "${#pkgs[@]}" -eq 0 ]; then
	echo "fuzz: no fuzz targets found" >&2
	exit 1
fi

# `go test -list` prints a package's matching names, then "ok <package>".
targets=()
names=()
while read -r first second _; do
	case "$first" in
	Fuzz*) names+=("$first") ;;
	ok)
		for n in "${names[@]}"; do targets+=("$second $n"); done
		names=()
		;;
	esac
done < <("$GO" test -list '^Fuzz' "${pkgs[@]}")

if [ "$#" -gt 0 ]; then
	wanted=" $* "
	kept=()
	for t in "${targets[@]}"; do
		[[ "$wanted" == *" ${t#* } "* ]] && kept+=("$t")
	done
	targets=("${kept[@]}")
fi
echo "fuzz: ${#targets[@]} target(s), ${FUZZTIME} each" >&2

# Go before 1.27 can fail a target with a bare "context deadline exceeded"
# as its -fuzztime ends, when a worker is still mid-input: a race in the
# fuzzing coordinator (go.dev/issue/75804), not a finding, and it writes no
# failing input. Such a run counts as a flake, reported but not failed,
# only when it wrote no new input under testdata/fuzz/<Target>/ and the
# target's corpus still passes as a plain test. Anything else fails.
out=$(mktemp)
trap 'rm -f "$out"' EXIT
corpus() { find "$1" -type f 2>/dev/null | sort || true; }
failed=()
flaked=()
for t in "${targets[@]}"; do
	pkg=${t% *}
	name=${t#* }
	echo "=== fuzz $name ($pkg)" >&2
	dir="$("$GO" list -f '{{.Dir}}' "$pkg")/testdata/fuzz/$name"
	before=$(corpus "$dir")
	if "$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "$pkg" 2>&1 | tee "$out"; then
		continue
	fi
	if [ "$(corpus "$dir")" == "$before" ] &&
		grep -A1 -- "^--- FAIL: $name " "$out" | tail -n1 | grep -qx '[[:space:]]*context deadline exceeded' &&
		"$GO" test -count=1 -run "^${name}\$" "$pkg" >/dev/null 2>&1; then
		echo "fuzz: $name: the coordinator's deadline race (go.dev/issue/75804), no failing input: a flake, not a finding" >&2
		flaked+=("$name")
		continue
	fi
	failed+=("$name")
done

if [ "${#flaked[@]}" -gt 0 ]; then
	echo "fuzz: flaked at the deadline, nothing found: ${flaked[*]}" >&2
fi
if [ "${#failed[@]}" -gt 0 ]; then
	echo "fuzz: FAILED: ${failed[*]} (the failing inputs are under testdata/fuzz/)" >&2
	exit 1
fi
echo "fuzz: ${#targets[@]} target(s), nothing found (${#flaked[@]} of them flaked at the deadline)" >&2

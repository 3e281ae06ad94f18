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

failed=()
for t in "${targets[@]}"; do
	pkg=${t% *}
	name=${t#* }
	echo "=== fuzz $name ($pkg)" >&2
	if ! "$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "$pkg"; then
		failed+=("$name")
	fi
done

if [ "${#failed[@]}" -gt 0 ]; then
	echo "fuzz: FAILED: ${failed[*]} (the failing inputs are under testdata/fuzz/)" >&2
	exit 1
fi
echo "fuzz: all ${#targets[@]} target(s) passed" >&2

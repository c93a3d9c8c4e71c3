#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Times `eprof diff` on two big synthetic recordings (tools/bench/gen_profile.c: 1,000,000
# samples each, 100,000 unique stacks of depth 10-40, 5,000 functions) against the target:
# under 3 s and under 1 GB. Rows: BASE against NEW made with another seed (the stacks differ:
# the merged call tree is as large as it gets), BASE against itself (every path matches),
# and the JSON output of the first with every function (--limit 0).
#
#   tools/bench/diff_big.sh [--runs N] [--samples N] [--stacks N] [--eprof PATH]
#
# Needs eprof's build in $BUILD (default build/; its libeprof_core.a is linked into
# gen_profile). The files go to tools/bench/work/ (git-ignored) and are remade when the
# generator changes. Each command runs N times (default 3): the median time and the largest
# RSS are reported. Exit status 1 when a command misses the target or fails.
set -euo pipefail
export LC_ALL=C

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="${BUILD:-$repo/build}"
eprof="${EPROF:-$build/eprof}"
runs=3 samples=1000000 stacks=100000
while (($#)); do
	case $1 in
	--runs) runs=$2; shift 2 ;;
	--samples) samples=$2; shift 2 ;;
	--stacks) stacks=$2; shift 2 ;;
	--eprof) eprof=$2; shift 2 ;;
	-h|--help) sed -n '3,14p' "$0"; exit 0 ;;
	*) echo "unknown option $1" >&2; exit 2 ;;
	esac
done
[[ -x $eprof ]] || { echo "no eprof at $eprof: build it (tools/build)" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "/usr/bin/time missing (apt-get install time)" >&2; exit 2; }
gen=$("$here/gen_profile.sh" "$build")

mkdir -p "$here/work"
base="$here/work/big-$samples-$stacks.eprof"
new="$here/work/big-$samples-$stacks-seed2.eprof"
[[ -s $base && ! $gen -nt $base ]] || { rm -f "$base"; "$gen" -o "$base" -n "$samples" -s "$stacks"; }
[[ -s $new && ! $gen -nt $new ]] || { rm -f "$new"; "$gen" -o "$new" -n "$samples" -s "$stacks" -S 2; }

tmp="$(mktemp -d /tmp/eprof-diffbig.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
fail=0

# measure ARGS... -> "median_s max_kb" of eprof ARGS over $runs runs
measure() {
	local i ts=() kb=0 s k
	for ((i = 0; i < runs; i++)); do
		if ! /usr/bin/time -o "$tmp/time" -f '%e %M' "$eprof" "$@" >"$tmp/out" 2>"$tmp/err"; then
			echo "FAILED: eprof $*" >&2; cat "$tmp/err" >&2; return 1
		fi
		read -r s k <"$tmp/time"
		ts+=("$s")
		((k > kb)) && kb=$k
	done
	printf '%s %s\n' "$(printf '%s\n' "${ts[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')" "$kb"
}

printf '# eprof diff on %s and %s (%s samples, %s stacks each); %s runs each\n' \
	"${base#"$repo"/}" "${new#"$repo"/}" "$samples" "$stacks" "$runs"
printf '# load average %s on %s CPUs\n' "$(cut -d' ' -f1-3 /proc/loadavg)" "$(nproc)"
printf '%-40s %8s %7s %9s %7s  %s\n' command time "/3 s" "max RSS" "/1 GB" result
run() {
	local label=$1; shift
	local r t kb verdict=PASS
	r=$(measure diff "$@") || { fail=1; printf '%-40s FAILED\n' "$label"; return; }
	read -r t kb <<<"$r"
	if awk -v t="$t" -v kb="$kb" 'BEGIN {exit !(t >= 3 || kb >= 1000 * 1000)}'; then
		verdict=FAIL; fail=1
	fi
	printf '%-40s %7.2fs %7.2f %6.0f MB %7.2f  %s\n' "$label" "$t" \
		"$(awk -v t="$t" 'BEGIN {print t / 3}')" "$(awk -v k="$kb" 'BEGIN {print k / 1000}')" \
		"$(awk -v k="$kb" 'BEGIN {print k / 1000000}')" "$verdict"
}

run "diff BASE NEW (other seed)" "$base" "$new" -o /dev/null
run "diff BASE BASE" "$base" "$base" -o /dev/null
run "diff BASE NEW --json --limit 0" "$base" "$new" --json --limit 0 -o /dev/null
# gates on the hottest function of BASE (a name of the generator's)
fn=$("$eprof" report "$base" --json --limit 1 |
	python3 -c 'import json, sys; print(json.load(sys.stdin)["functions"][0]["name"])')
run "diff BASE NEW --gate x3" "$base" "$new" -o /dev/null --gate 'cpu>+5%' --gate 'wall>+5%' \
	--gate "function:$fn.total>+5%"
echo "# target: under 3 s and 1 GB (MB = 1,000,000 bytes; RSS from /usr/bin/time %M)"
if ((fail)); then echo "# summary: FAIL"; exit 1; fi
echo "# summary: PASS"

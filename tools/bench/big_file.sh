#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Times eprof's readers on a big synthetic recording (tools/bench/gen_profile.c:
# 1,000,000 samples, 100,000 unique stacks of depth 10-40, 5,000 functions) and
# prints wall time and max RSS against the targets: under 2 s and 500 MB each for
# report and flamegraph, under 3 s and 500 MB each for trace and export.
#
#   tools/bench/big_file.sh [--runs N] [--samples N] [--stacks N] [--eprof PATH]
#
# Needs eprof's build in $BUILD (default /tmp/build-bench; gen_profile is built there
# through its CMake target).
# The file goes to tools/bench/work/ (git-ignored) and is remade when the generator
# changes. Each command runs N times (default 3); the median time and the largest
# RSS are reported, next to the same figures for a 10,000-sample file (fixed cost).
# Exit status 1 when a command misses a target or fails.
set -euo pipefail
export LC_ALL=C

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="${BUILD:-/tmp/build-bench}"
eprof="${EPROF:-$build/eprof}"
runs=3 samples=1000000 stacks=100000
while (($#)); do
	case $1 in
	--runs) runs=$2; shift 2 ;;
	--samples) samples=$2; shift 2 ;;
	--stacks) stacks=$2; shift 2 ;;
	--eprof) eprof=$2; shift 2 ;;
	-h|--help) sed -n '3,15p' "$0"; exit 0 ;;
	*) echo "unknown option $1" >&2; exit 2 ;;
	esac
done
[[ -x $eprof ]] || { echo "no eprof at $eprof: build it (see tools/bench/overhead.py --help)" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "/usr/bin/time missing (apt-get install time)" >&2; exit 2; }
gen=$("$here/gen_profile.sh" "$build")

mkdir -p "$here/work"
big="$here/work/big-$samples-$stacks.eprof"
small="$here/work/small-10000-1000.eprof"
if [[ ! -s $big || $gen -nt $big ]]; then
	rm -f "$big"
	"$gen" -o "$big" -n "$samples" -s "$stacks"
fi
if [[ ! -s $small || $gen -nt $small ]]; then
	rm -f "$small"
	"$gen" -o "$small" -n 10000 -s 1000
fi

tmp="$(mktemp -d /tmp/eprof-bigfile.XXXXXX)"
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

printf '# eprof readers on %s (%s bytes, %s samples, %s stacks); %s runs each\n' \
	"${big#"$repo"/}" "$(stat -c %s "$big")" "$samples" "$stacks" "$runs"
printf '# load average %s on %s CPUs\n' "$(cut -d' ' -f1-3 /proc/loadavg)" "$(nproc)"
printf '%-36s %8s %7s %9s %7s %12s %9s  %s\n' command time "/target" "max RSS" "/500MB" \
	"small file" "small RSS" result
target=2 # seconds, for the rows that follow
run() {
	local label=$1; shift
	local r rs t kb st skb verdict
	r=$(measure "$@" "$big") || { fail=1; printf '%-36s FAILED\n' "$label"; return; }
	rs=$(measure "$@" "$small") || { fail=1; printf '%-36s FAILED (small)\n' "$label"; return; }
	read -r t kb <<<"$r"
	read -r st skb <<<"$rs"
	verdict=PASS
	if awk -v t="$t" -v kb="$kb" -v T="$target" 'BEGIN {exit !(t >= T || kb >= 500 * 1000)}'; then
		verdict=FAIL; fail=1
	fi
	printf '%-36s %7.2fs %7.2f %6.0f MB %7.2f %11.2fs %6.0f MB  %s\n' "$label" "$t" \
		"$(awk -v t="$t" -v T="$target" 'BEGIN {print t / T}')" "$(awk -v k="$kb" 'BEGIN {print k / 1000}')" \
		"$(awk -v k="$kb" 'BEGIN {print k / 500000}')" "$st" \
		"$(awk -v k="$skb" 'BEGIN {print k / 1000}')" "$verdict"
}

run "report" report -o /dev/null
run "report --json --limit 0" report --json --limit 0 -o /dev/null
run "flamegraph -o /dev/null (SVG)" flamegraph -o /dev/null
run "flamegraph --folded -o /dev/null" flamegraph --folded -o /dev/null
target=3
run "trace -o /dev/null" trace -o /dev/null
run "export --format pprof" export --format pprof -o /dev/null
run "export --format folded" export --format folded -o /dev/null
run "export --format json" export --format json -o /dev/null
run "export --format csv" export --format csv -o /dev/null
run "export --format html" export --format html -o /dev/null
echo "# targets: report, flamegraph under 2 s; trace, export under 3 s; 500 MB each"
echo "# (MB = 1,000,000 bytes; RSS from /usr/bin/time %M)"
if ((fail)); then echo "# summary: FAIL"; exit 1; fi
echo "# summary: PASS"

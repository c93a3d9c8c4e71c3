#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Times the report's replay of anonymous mappings (mmap/munmap, live bytes over time)
# as the number of live mappings grows: files from tools/bench/gen_profile.c -m N with
# N one-page mappings placed top-down (as the kernel does) and all live until the end,
# 1,000 samples each. Prints the median CPU time (user + sys) of `eprof report`, the
# time above the same file without mappings (the baseline, measured in this run) per
# mapping, and that per-mapping cost as a ratio to the smallest file's: near 1 when
# the replay is O(n log n), about 16 when it is quadratic. Exit status 1 when the
# largest file's ratio is over 3.
#
#   tools/bench/mem_maps.sh [--runs N] [--eprof PATH]
#
# Needs eprof's build in $BUILD (default /tmp/build-bench), as tools/bench/big_file.sh.
set -euo pipefail
export LC_ALL=C

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${BUILD:-/tmp/build-bench}"
eprof="${EPROF:-$build/eprof}"
runs=3
while (($#)); do
	case $1 in
	--runs) runs=$2; shift 2 ;;
	--eprof) eprof=$2; shift 2 ;;
	-h|--help) sed -n '3,14p' "$0"; exit 0 ;;
	*) echo "unknown option $1" >&2; exit 2 ;;
	esac
done
[[ -x $eprof ]] || { echo "no eprof at $eprof: build it" >&2; exit 2; }
gen=$("$here/gen_profile.sh" "$build")
mkdir -p "$here/work"

median_s() { # eprof report FILE, $runs times -> median CPU seconds (getrusage, microseconds)
	python3 - "$eprof" "$1" "$runs" <<'PY'
import resource, subprocess, sys
eprof, f, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
ts = []
for _ in range(runs):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([eprof, "report", f, "-o", "/dev/null"], check=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    ts.append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
print(sorted(ts)[(len(ts) - 1) // 2])
PY
}

file_of() {
	local f="$here/work/maps-$1.eprof"
	if [[ ! -s $f || $gen -nt $f ]]; then
		"$gen" -o "$f" -n 1000 -s 100 -m "$1" 2>/dev/null
	fi
	echo "$f"
}

base=$(median_s "$(file_of 0)")
printf '# eprof report, 1,000 samples plus N live mappings; CPU s, median of %s; load %s on %s CPUs\n' \
	"$runs" "$(cut -d' ' -f1 /proc/loadavg)" "$(nproc)"
printf '# baseline (no mappings): %.3f s\n' "$base"
printf '%10s %9s %16s %8s\n' mappings time "us per mapping" ratio
first="" ratio=0
for n in 40000 160000 640000; do
	t=$(median_s "$(file_of "$n")")
	per=$(awk -v t="$t" -v b="$base" -v n="$n" 'BEGIN {d = t - b; if (d < 0) d = 0; print d / n * 1e6}')
	[[ -n $first ]] || first=$per
	ratio=$(awk -v p="$per" -v f="$first" 'BEGIN {print (f > 0) ? p / f : 0}')
	printf '%10s %8.3fs %16.3f %8.2f\n' "$n" "$t" "$per" "$ratio"
done
if awk -v r="$ratio" 'BEGIN {exit !(r > 3)}'; then echo "# summary: FAIL (per-mapping cost grows with N)"; exit 1; fi
echo "# summary: PASS"

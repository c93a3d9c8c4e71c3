#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Times the job commands on many synthetic rank files (tools/bench/gen_profile.c -r/-w/-c):
# by default 64 ranks on 8 hosts, 100,000 samples and 200 MPI_Allreduce calls each, the last
# rank late at every one. Prints wall time and max RSS of `report` over the directory, of
# `flamegraph --folded`, of `trace --time-range` and of `diff DIR DIR`, against the targets of
# docs/distributed.md: report < 10 s and < 2 GB, trace with a time range < 30 s (diff: none
# set; 60 s and 4 GB flag a blow-up). Also checks the answer: rank 63
# is the straggler and hosts 1-7 get their 1-7 ms clock offsets corrected.
#
#   tools/bench/dist_merge.sh [--ranks N] [--samples N] [--eprof PATH]
#
# BUILD (default /tmp/build-bench) holds eprof's CMake build. Files go to
# tools/bench/work/dist-N-S/ (git-ignored) and are reused. Exit 1 when a target is missed.
set -euo pipefail
export LC_ALL=C
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${BUILD:-/tmp/build-bench}"
eprof="${EPROF:-$build/eprof}"
ranks=64 samples=100000
while (($#)); do
	case $1 in
	--ranks) ranks=$2; shift 2 ;;
	--samples) samples=$2; shift 2 ;;
	--eprof) eprof=$2; shift 2 ;;
	-h|--help) sed -n '3,15p' "$0"; exit 0 ;;
	*) echo "unknown option $1" >&2; exit 2 ;;
	esac
done
[[ -x $eprof ]] || { echo "no eprof at $eprof" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "/usr/bin/time missing (apt-get install time)" >&2; exit 2; }
gen=$("$here/gen_profile.sh" "$build")
dir="$here/work/dist-$ranks-$samples"
mkdir -p "$dir"
if [[ ! -f $dir/done || $gen -nt $dir/done ]]; then
	rm -f "$dir"/*.data
	for ((r = 0; r < ranks; r++)); do
		"$gen" -o "$dir/eprof.$r.data" -n "$samples" -s $((samples / 10)) -S $((r + 1)) \
			-r "$r" -w "$ranks" -c 200 2>/dev/null
	done
	touch "$dir/done"
fi
du -ch "$dir"/*.data | tail -1 | awk '{print "files: " $1 " in '"$ranks"' recordings"}'
fail=0
run() { # name target_s target_mb cmd...
	local name=$1 ts=$2 tmb=$3; shift 3
	local out; out=$(mktemp)
	/usr/bin/time -f "%e %M" -o "$out.t" "$@" >"$out" 2>/dev/null || { echo "$name: FAILED"; fail=1; return; }
	read -r secs kb <"$out.t"
	local verdict=ok
	if awk -v s="$secs" -v t="$ts" -v k="$kb" -v m="$tmb" 'BEGIN{exit !(s > t || k / 1024 > m)}'; then
		verdict=MISSED; fail=1
	fi
	printf "%-28s %7.2f s %8.0f MB   (target < %s s, < %s MB) %s\n" "$name" "$secs" "$((kb / 1024))" "$ts" "$tmb" "$verdict"
	cp "$out" "$dir/last-$name.out"
	rm -f "$out" "$out.t"
}
run report 10 2048 "$eprof" report --json "$dir"
run flamegraph-folded 30 2048 "$eprof" flamegraph --folded "$dir"
run trace-time-range 30 2048 "$eprof" trace --time-range 10:12 -o /dev/null "$dir"
# two runs of the job compared rank by rank (here the job against itself): a per-rank
# attribution for each pair, then the merged comparison
run diff-per-rank 60 4096 "$eprof" diff --json "$dir" "$dir"
python3 - "$dir/last-report.out" "$ranks" <<'PY' || fail=1
import json, sys
j = json.load(open(sys.argv[1])); n = int(sys.argv[2])
st = j["straggler"]
assert st and st["rank"] == n - 1, st
corr = {r["rank"]: r["clock_correction_ns"] for r in j["ranks"]}
bad = [r for r in corr if abs(corr[r] + (r // 8) * 1_000_000) > 100_000]
assert not bad, {r: corr[r] for r in bad[:5]}
print(f"answer: straggler rank {st['rank']} ({st['arrived_last_share']:.0%} of {j['matched']} "
      f"collectives), clock corrections of {len(set(corr.values()))} hosts right")
PY
exit $fail

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The cost eprof's communication-call probes add to each MPI call: one rank of
# tests/fixtures/mpi_straggler.c doing N MPI_Allreduce of 8 KiB with no work between, run
# bare and under `eprof record -F 99`, alternated ROUNDS times. The fixture measures its own
# time inside MPI_Allreduce; the difference of the medians over N is the cost per call
# (a uprobe and a uretprobe, the arguments read, one ring-buffer event). Target: <= 2 us.
#
#   tools/bench/coll_cost.sh [--calls N] [--rounds R] [--eprof PATH]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
eprof="${EPROF:-$repo/build/eprof}"
calls=200000 rounds=5
while (($#)); do
	case $1 in
	--calls) calls=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--eprof) eprof=$2; shift 2 ;;
	-h|--help) sed -n '3,9p' "$0"; exit 0 ;;
	*) echo "unknown option $1" >&2; exit 2 ;;
	esac
done
lib=/usr/lib/x86_64-linux-gnu/libmpi.so.40
[[ -f $lib ]] || { echo "no Open MPI ($lib): apt-get install openmpi-bin" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O1 -g -o "$work/app" "$repo/tests/fixtures/mpi_straggler.c" -L"$(dirname $lib)" -l:libmpi.so.40
inside() { # prints the ms the rank spent inside MPI_Allreduce
	"$@" 2>/dev/null | awk '/ms inside/ {for (i = 1; i <= NF; i++) if ($i == "ms") print $(i - 1)}'
}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bare=() traced=()
for ((i = 0; i < rounds; i++)); do
	bare+=("$(inside mpirun -np 1 "$work/app" "$calls" 9 0)")
	traced+=("$(inside mpirun -np 1 "$eprof" record -q -F 99 -o "$work/e.data" -- "$work/app" "$calls" 9 0)")
done
python3 - "$calls" "${bare[*]}" "${traced[*]}" <<'PY'
import statistics, sys
n = int(sys.argv[1])
b = [float(x) for x in sys.argv[2].split()]
t = [float(x) for x in sys.argv[3].split()]
mb, mt = statistics.median(b), statistics.median(t)
per = (mt - mb) * 1e3 / n
print(f"{n} MPI_Allreduce calls: bare {mb:.1f} ms, traced {mt:.1f} ms inside (medians of {len(b)})")
print(f"cost per call: {per:.2f} us (target <= 2 us) {'ok' if per <= 2 else 'MISSED'}")
sys.exit(per > 2)
PY

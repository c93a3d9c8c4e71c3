#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds BUILD/gen_profile (tools/bench/gen_profile.c, linked with BUILD/libeprof_core.a)
# when it is missing or older than either, and prints its path. Used by big_file.sh and
# mem_maps.sh.
#
#   tools/bench/gen_profile.sh BUILD
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build=$1
# eprof_core became an interface library over one static library per layer: the generator
# needs the layers below analysis (format, model, util)
if [[ -f $build/libeprof_core.a ]]; then
	libs=("$build/libeprof_core.a")
else
	libs=("$build/libeprof_format.a" "$build/libeprof_model.a" "$build/libeprof_util.a")
fi
for l in "${libs[@]}"; do
	[[ -f $l ]] || { echo "no $l: build eprof into $build first" >&2; exit 2; }
done
gen="$build/gen_profile"
stale=0
[[ -x $gen && $here/gen_profile.c -ot $gen ]] || stale=1
for l in "${libs[@]}"; do [[ $l -nt $gen ]] && stale=1; done
if ((stale)); then
	echo "building $gen" >&2
	(cd "$repo" && cc -O2 -std=gnu11 -D_GNU_SOURCE -Isrc tools/bench/gen_profile.c \
		"${libs[@]}" -lz -lzstd -o "$gen")
fi
echo "$gen"

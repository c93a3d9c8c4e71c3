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
[[ -f $build/libeprof_core.a ]] || { echo "no $build/libeprof_core.a: build eprof into $build first" >&2; exit 2; }
gen="$build/gen_profile"
if [[ ! -x $gen || $here/gen_profile.c -nt $gen || $build/libeprof_core.a -nt $gen ]]; then
	echo "building $gen" >&2
	(cd "$repo" && cc -O2 -std=gnu11 -D_GNU_SOURCE -Isrc tools/bench/gen_profile.c \
		"$build/libeprof_core.a" -lz -lzstd -o "$gen")
fi
echo "$gen"

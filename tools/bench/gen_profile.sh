#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds BUILD/gen_profile (tools/bench/gen_profile.c; CMake target gen_profile, not built
# by default) and prints its path. Used by big_file.sh, mem_maps.sh and dist_merge.sh.
#
#   tools/bench/gen_profile.sh BUILD
set -euo pipefail
build=$1
[[ -f $build/CMakeCache.txt ]] || { echo "no CMake build in $build: build eprof there first" >&2; exit 2; }
cmake --build "$build" --target gen_profile >&2
echo "$build/gen_profile"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Prepares the benchmark workloads of shared/BENCHMARKS.md, reproducibly,
# into tools/bench/work/ (git-ignored). Idempotent: what is there is kept.
#
#   tools/bench/workloads.sh            prepare everything (xz input, sqlite3.c, perf)
#   tools/bench/workloads.sh --check    only say what is missing (exit 1 if anything is)
#
# Produces:
#   work/xz-input.bin    first 20,000,000 bytes of the concatenation of the regular
#                        files *.so* over 200 KiB in /usr/lib/x86_64-linux-gnu
#                        (maxdepth 1, sorted by name in the C locale)
#   work/xz-quick.bin    its first 4,000,000 bytes (for --quick runs)
#   work/sqlite3.c       package/deps/sqlite3/sqlite3.c of npm better-sqlite3@12.11.1
#   work/MANIFEST        sizes and sha256 of the above, for comparing machines
# Needs: npm (registry access) the first time; installs linux-perf with apt-get
# when /usr/bin/perf is missing and we are root.
set -euo pipefail
export LC_ALL=C

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="$here/work"
check=0
[[ ${1:-} == --check ]] && check=1
missing=0

say() { printf 'workloads: %s\n' "$*" >&2; }

mkdir -p "$work"

# --- (a) xz input --------------------------------------------------------------
xz_in="$work/xz-input.bin"
if [[ ! -s $xz_in || $(stat -c %s "$xz_in") -ne 20000000 ]]; then
	if ((check)); then say "missing $xz_in"; missing=1; else
		say "building $xz_in"
		find /usr/lib/x86_64-linux-gnu -maxdepth 1 -type f -name '*.so*' -size +200k -print0 |
			sort -z | xargs -0 cat 2>/dev/null | head -c 20000000 >"$xz_in.tmp" || true
		# (head closing the pipe early makes cat fail with SIGPIPE: that is expected)
		sz=$(stat -c %s "$xz_in.tmp")
		if [[ $sz -ne 20000000 ]]; then
			say "only $sz bytes of libraries found, need 20000000"; rm -f "$xz_in.tmp"; exit 1
		fi
		mv "$xz_in.tmp" "$xz_in"
	fi
fi
if [[ -s $xz_in && ! -s $work/xz-quick.bin ]] && ((!check)); then
	head -c 4000000 "$xz_in" >"$work/xz-quick.bin"
fi

# --- (b) sqlite3.c from better-sqlite3 --------------------------------------------
sq="$work/sqlite3.c"
if [[ ! -s $sq ]]; then
	if ((check)); then say "missing $sq"; missing=1; else
		command -v npm >/dev/null || { say "npm is needed (apt-get install npm)"; exit 1; }
		say "fetching better-sqlite3@12.11.1 with npm pack"
		tmp="$(mktemp -d)"
		trap 'rm -rf "$tmp"' EXIT
		(cd "$tmp" && npm pack --silent better-sqlite3@12.11.1 >/dev/null)
		tgz=$(ls "$tmp"/better-sqlite3-12.11.1.tgz)
		tar -xzf "$tgz" -C "$tmp" package/deps/sqlite3/sqlite3.c
		mv "$tmp/package/deps/sqlite3/sqlite3.c" "$sq"
	fi
fi

# --- perf ---------------------------------------------------------------------------
if [[ ! -x /usr/bin/perf ]] || ! /usr/bin/perf --version >/dev/null 2>&1; then
	if ((check)); then say "missing /usr/bin/perf (apt package linux-perf)"; missing=1
	elif [[ $(id -u) -eq 0 ]]; then
		say "installing linux-perf"
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null
	else
		say "/usr/bin/perf missing: apt-get install linux-perf (as root)"; exit 1
	fi
fi

# --- CPython ------------------------------------------------------------------------
py=""
for v in 3.11.7 3.12.1 3.13.0; do
	if [[ -x $HOME/.pyenv/versions/$v/bin/python3 ]]; then py=$HOME/.pyenv/versions/$v/bin/python3; break; fi
done
[[ -n $py ]] || say "warning: no pyenv CPython 3.11.7/3.12.1/3.13.0 under ~/.pyenv: the py workload is skipped"

if ((check)); then exit $missing; fi

{
	for f in "$xz_in" "$work/xz-quick.bin" "$sq"; do
		printf '%s %s %s\n' "$(basename "$f")" "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -d' ' -f1)"
	done
	printf 'python %s\n' "${py:-none}"
	printf 'perf %s\n' "$(/usr/bin/perf --version 2>/dev/null)"
} >"$work/MANIFEST"
cat "$work/MANIFEST" >&2

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Soak: `eprof record -a -F 999` for SECONDS (default 600) on a changing workload —
# processes starting and exiting all the time, dlopen/dlclose, threads — while a second
# recorder runs at the default 99 Hz beside it. Every INTERVAL seconds it samples each
# recorder's RSS and CPU time, then prints the figures and PASS/FAIL against the targets:
#   RSS under 150 MB and flat after warm-up, CPU under 3% of a core (999 Hz recorder),
#   no lost samples at 99 Hz; both files readable by `eprof report`.
# Needs root. Usage: tools/bench/soak.sh [SECONDS] [INTERVAL]   (EPROF_BIN picks the binary;
# EPROF_SOAK_KEEP=DIR keeps the two eprof.data files and the RSS/CPU samples there)
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
secs=${1:-600}
interval=${2:-5}
eprof=${EPROF_BIN:-$root/build/eprof}
rss_limit_mb=150
cpu_limit_pct=3

if [ "$(id -u)" -ne 0 ]; then
	echo "soak: skipped: not root (needs CAP_BPF and CAP_PERFMON)"
	exit 0
fi
if [ ! -x "$eprof" ]; then
	EPROF_TARGET=eprof tools/build build || exit 1
	eprof=$root/build/eprof
fi
w=$(mktemp -d /tmp/eprof-soak.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$w"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the workload ---------------------------------------------------------------------------
cat >"$w/steady.c" <<'EOF'
/* Long-lived: 2 threads at ~25% CPU each; one dlopen()s and dlclose()s libraries. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
static volatile uint64_t sink;
static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}
__attribute__((noinline)) void steady_burn(double s)
{
	double end = now() + s;
	while (now() < end)
		for (int i = 0; i < 5000; i++)
			sink = sink * 31 + i;
}
static void *run(void *arg)
{
	static const char *const libs[] = { "libz.so.1", "liblzma.so.5", "libbz2.so.1.0",
					    "libm.so.6", "libcrypt.so.1", "libzstd.so.1" };
	unsigned k = 0;
	for (;;) {
		steady_burn(0.02);
		usleep(60000);
		if (arg && ++k % 20 == 0) {
			void *h = dlopen(libs[(k / 20) % 6], RTLD_NOW | RTLD_LOCAL);
			if (h)
				dlclose(h);
		}
	}
	return NULL;
}
int main(void)
{
	pthread_t t;
	pthread_create(&t, NULL, run, (void *)1);
	run(NULL);
	return 0;
}
EOF
cat >"$w/short.c" <<'EOF'
/* Short-lived: burns MS milliseconds (in a dlopen()ed library's code every other run). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
static volatile uint64_t sink;
__attribute__((noinline)) void short_burn(double ms, unsigned long (*crc)(unsigned long, const void *, unsigned))
{
	struct timespec a, b;
	static char buf[4096];
	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		if (crc)
			sink += crc(sink, buf, sizeof(buf));
		else
			for (int i = 0; i < 5000; i++)
				sink = sink * 31 + i;
		clock_gettime(CLOCK_MONOTONIC, &b);
	} while ((b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6 < ms);
}
int main(int argc, char **argv)
{
	double ms = argc > 1 ? atof(argv[1]) : 10;
	void *z = ((int)ms & 1) ? dlopen("libz.so.1", RTLD_NOW) : NULL;
	short_burn(ms, z ? (unsigned long (*)(unsigned long, const void *, unsigned))dlsym(z, "crc32") : NULL);
	return 0;
}
EOF
cc -O2 -g -pthread -o "$w/steady" "$w/steady.c" -ldl || exit 1
cc -O2 -g -o "$w/short" "$w/short.c" -ldl || exit 1

churn() { # ~15 processes a second, most of them gone within 100 ms
	local i=0
	while :; do
		i=$((i + 1))
		"$w/short" $((RANDOM % 60 + 1)) &
		case $((i % 5)) in
		0) sh -c 'ls /usr/lib >/dev/null; sort </dev/null' & ;;
		1) /bin/true & ;;
		2) [ $((i % 25)) -eq 2 ] && /usr/bin/python3 -c 'import zlib, json' & ;;
		esac
		sleep 0.07
		wait -n 2>/dev/null
	done
}

# --- recorders ------------------------------------------------------------------------------
echo "soak: $secs s, eprof record -a -F 999 (and -F 99 beside it), sampling every $interval s"
"$w/steady" &
pids+=($!)
churn &
pids+=($!)
sleep 1
"$eprof" record -a -F 999 -q -d "$secs" -o "$w/soak999.data" 2>"$w/err999" &
rec=$!
pids+=($rec)
"$eprof" record -a -F 99 -q -d "$secs" -o "$w/soak99.data" 2>"$w/err99" &
rec99=$!
pids+=($rec99)

hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
anon_kb() { awk '/^RssAnon:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
t0=$(date +%s.%N)
c0=$(cpu_ticks $rec)
echo "t_s rss999_kb cpu999_pct rss99_kb cpu99_pct anon999_kb" >"$w/samples"
prev_t=$t0
prev_c=$c0
prev_c99=$(cpu_ticks $rec99)
while kill -0 $rec 2>/dev/null; do
	sleep "$interval"
	t=$(date +%s.%N)
	r=$(rss_kb $rec)
	a=$(anon_kb $rec)
	c=$(cpu_ticks $rec)
	r99=$(rss_kb $rec99)
	c99=$(cpu_ticks $rec99)
	[ -n "$r" ] && [ -n "$c" ] || break
	# Stop sampling once the recorder finishes (drain, symbolize): that is not steady state.
	if [ $(awk -v t="$t" -v t0="$t0" -v s="$secs" 'BEGIN { print (t - t0 >= s) }') -eq 1 ]; then
		break
	fi
	awk -v t="$t" -v t0="$t0" -v pt="$prev_t" -v r="$r" -v c="$c" -v pc="$prev_c" \
		-v r99="${r99:-0}" -v c99="${c99:-0}" -v pc99="$prev_c99" -v hz="$hz" -v a="${a:-0}" \
		'BEGIN { d = t - pt; printf "%.0f %d %.2f %d %.2f %d\n", t - t0, r, 100 * (c - pc) / hz / d,
		         r99, 100 * (c99 - pc99) / hz / d, a }' >>"$w/samples"
	prev_t=$t
	prev_c=$c
	prev_c99=${c99:-0}
done
wait $rec
rc=$?
wait $rec99
rc99=$?
kill "${pids[0]}" "${pids[1]}" 2>/dev/null
if [ -n "${EPROF_SOAK_KEEP:-}" ]; then
	mkdir -p "$EPROF_SOAK_KEEP" && cp "$w/soak999.data" "$w/soak99.data" "$w/samples" "$EPROF_SOAK_KEEP/"
fi

# --- figures --------------------------------------------------------------------------------
fail=0
verdict() { # OK? NAME DETAIL
	if [ "$1" -eq 1 ]; then echo "PASS $2: $3"; else echo "FAIL $2: $3"; fail=1; fi
}
column -t "$w/samples" | awk 'NR == 1 || (NR - 2) % 6 == 0'   # every 6th sample
read -r n peak warm last < <(awk -v s="$secs" 'NR > 1 {
	n++; t[n] = $1; r[n] = $2; if ($2 > peak) peak = $2 }
	END { w = 1; for (i = 1; i <= n; i++) if (t[i] <= s * 0.2 || t[i] <= 60) w = i
	      m = 0; for (i = int(n * 0.75); i <= n; i++) if (r[i] > m) m = r[i]
	      print n, peak, r[w], m }' "$w/samples")
# CPU: the whole run up to the last sample (the recorder's final drain and symbolization are
# not steady state), and the last minute, which shows whether it creeps up.
cpu_pct=$(awk -v c0="$c0" -v c1="$prev_c" -v t0="$t0" -v t1="$prev_t" -v hz="$hz" \
	'BEGIN { printf "%.2f", (t1 > t0) ? 100 * (c1 - c0) / hz / (t1 - t0) : 0 }')
cpu_last=$(awk -v s="$secs" 'NR > 1 && $1 >= s - 60 { c += $3; n++ } END { printf "%.2f", n ? c / n : 0 }' "$w/samples")
cpu99=$(awk 'NR > 1 { s += $5; n++ } END { printf "%.2f", n ? s / n : 0 }' "$w/samples")
json999=$("$eprof" report "$w/soak999.data" --json --limit 1 2>"$w/rep999")
json99=$("$eprof" report "$w/soak99.data" --json --limit 1 2>"$w/rep99")
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d$2)" <<<"$1" 2>/dev/null; }
s999=$(field "$json999" '["samples"]')
l999=$(field "$json999" '["lost"]')
s99=$(field "$json99" '["samples"]')
l99=$(field "$json99" '["lost"]')
e999=$(field "$json999" '["stats"]["events_lost"]')
size999=$(stat -c %s "$w/soak999.data" 2>/dev/null || echo 0)

echo
echo "recorder -F 999: ${n:-0} RSS samples; RSS peak $((peak / 1024)) MB, after warm-up $((warm / 1024)) MB," \
	"last quarter max $((last / 1024)) MB; CPU ${cpu_pct}% of a core (whole run), ${cpu_last}% (last minute)"
echo "recorder -F 999: ${s999:-?} samples, ${l999:-?} lost, ${e999:-?} events lost, file $((size999 / 1024)) KiB"
echo "recorder -F 99:  ${s99:-?} samples, ${l99:-?} lost; CPU ${cpu99}% of a core"
[ "$rc" -eq 0 ] || cat "$w/err999"
verdict $([ "$rc" -eq 0 ] && [ "$rc99" -eq 0 ] && echo 1 || echo 0) "soak/exit" "recorders exited $rc and $rc99"
verdict $([ -n "$s999" ] && [ -n "$s99" ] && [ "${s999:-0}" -gt 0 ] && echo 1 || echo 0) \
	"soak/files" "both files read back by eprof report"
verdict $([ "$((peak / 1024))" -lt $rss_limit_mb ] && echo 1 || echo 0) "soak/rss" \
	"peak $((peak / 1024)) MB < $rss_limit_mb MB"
# Flat: the last quarter stays within 10% (at least 8 MB) of the RSS after warm-up.
verdict $(awk -v w="$warm" -v l="$last" 'BEGIN { d = w * 0.10; if (d < 8192) d = 8192; print (l - w <= d) }') \
	"soak/rss-flat" "$((warm / 1024)) MB after warm-up -> $((last / 1024)) MB in the last quarter"
verdict $(awk -v c="$cpu_pct" -v l="$cpu_last" -v m=$cpu_limit_pct 'BEGIN { print (c < m && l < m) }') \
	"soak/cpu" "${cpu_pct}% (whole run) and ${cpu_last}% (last minute) < ${cpu_limit_pct}% of a core at 999 Hz"
verdict $([ "${l99:-1}" = 0 ] && echo 1 || echo 0) "soak/lost-99hz" "${l99:-?} samples lost at 99 Hz"
exit $fail

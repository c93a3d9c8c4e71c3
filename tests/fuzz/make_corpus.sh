#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Regenerates the seed corpus in tests/fuzz/corpus/ with the real tools: small eprof.data
# files recorded by eprof (needs root and BPF), small ELF files compiled here, kallsyms
# and perf-map text. Run from anywhere: tests/fuzz/make_corpus.sh [EPROF_BIN]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
eprof=${1:-${EPROF_BIN:-$root/build/eprof}}
c=$here/corpus
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT

mkdir -p "$c"/{reader,elf,ehframe,perfmap,kallsyms,unwind,demangle,usdt,cupti,memchan}

# --- ELF files ----------------------------------------------------------------------------
# No page padding between segments: the same structure in a quarter of the bytes.
LDFLAGS_SEED="-Wl,-z,noseparate-code"
cc -O2 -g -fno-omit-frame-pointer $LDFLAGS_SEED -o "$w/small-g" "$here/seeds/small.c"
cc -Os -g1 -fomit-frame-pointer $LDFLAGS_SEED -o "$w/small-g1" "$here/seeds/small.c"
cc -O1 -gdwarf-4 -fno-asynchronous-unwind-tables $LDFLAGS_SEED -o "$w/small-debugframe" "$here/seeds/small.c"
c++ -O2 -g $LDFLAGS_SEED -o "$w/small-cxx" "$here/seeds/small.cc"
cc -O2 -shared -fPIC $LDFLAGS_SEED -o "$w/lib.so" "$here/seeds/lib.c"
strip --strip-all -o "$w/lib-stripped.so" "$w/lib.so"
# MiniDebugInfo: a stripped binary carrying an xz-compressed symbol table in .gnu_debugdata.
cc -O2 $LDFLAGS_SEED -o "$w/mini" "$here/seeds/small.c"
nm -D "$w/mini" --format=posix --defined-only | awk '{ print $1 }' | sort >"$w/dynsyms"
nm "$w/mini" --format=posix --defined-only | awk '$2 ~ /[TtWw]/ { print $1 }' | sort >"$w/funcs"
comm -13 "$w/dynsyms" "$w/funcs" >"$w/keep"
objcopy --only-keep-debug "$w/mini" "$w/mini.dbg"
objcopy -S --remove-section .gdb_index --remove-section .comment --keep-symbols="$w/keep" \
	"$w/mini.dbg" "$w/mini.syms"
strip --remove-section=.comment --remove-section=.note "$w/mini.syms" 2>/dev/null || true
xz -f "$w/mini.syms"
strip --strip-all "$w/mini"
objcopy --add-section .gnu_debugdata="$w/mini.syms.xz" "$w/mini"
for f in small-g small-g1 small-debugframe small-cxx lib.so lib-stripped.so mini; do
	cp "$w/$f" "$c/elf/$f"
done

# --- raw CFI sections: u8 flags, u32 vaddr, bytes (fuzz_ehframe.c) -----------------------
section() { # ELF SECTION FLAGS OUT
	local vaddr
	vaddr=$(readelf -SW "$1" | awk -v s="$2" '$2 == s { print $4 } $3 == s { print $5 }' | head -1)
	[ -n "$vaddr" ] || return 0
	objcopy --dump-section "$2=$w/sec" "$1" "$w/junk"
	python3 - "$3" "$vaddr" "$w/sec" "$4" <<'PY'
import struct, sys
flags, vaddr, sec, out = int(sys.argv[1]), int(sys.argv[2], 16), sys.argv[3], sys.argv[4]
open(out, "wb").write(struct.pack("<BI", flags, vaddr & 0xffffffff) + open(sec, "rb").read())
PY
}
section "$w/small-g" .eh_frame 1 "$c/ehframe/small-eh_frame"
section "$w/small-cxx" .eh_frame 1 "$c/ehframe/cxx-eh_frame"
section "$w/lib.so" .eh_frame 5 "$c/ehframe/lib-eh_frame-twice"
section "$w/small-debugframe" .debug_frame 0 "$c/ehframe/small-debug_frame"

# --- text maps ------------------------------------------------------------------------------
printf '%s\n' "7f0000001000 40 jit_add" "7f0000001040 80 Interpreter::run(int)" \
	"7f00000010c0 1c LazyCompile:*foo /app/x.js:10:3" "7f0000002000 1000 [stub] big" \
	"7f0000001050 10 overlapping" >"$c/perfmap/basic.map"
printf '7f0000003000 20 grown_later\r\nzz bad line\n7f0000003020 0 zero_size\n' >"$c/perfmap/mixed.map"
# A jitdump: two code loads at one address (the later wins), a move, a record of another kind.
python3 - "$c/perfmap/node.dump" <<'PY'
import struct, sys
def load(addr, size, name):
    body = struct.pack("<IIQQQQ", 1, 1, addr, addr, size, 0) + name + b"\0" + b"\xc3" * 4
    return struct.pack("<IIQ", 0, 16 + len(body), 0) + body
def move(old, new, size):
    body = struct.pack("<IIQQQQQ", 1, 1, new, old, new, size, 0)
    return struct.pack("<IIQ", 1, 16 + len(body), 0) + body
out = struct.pack("<IIIIIIQQ", 0x4a695444, 1, 40, 62, 0, 1, 0, 0)
out += load(0x7f0000001000, 0x40, b"LazyCompile:*foo /app/x.js:1:1")
out += load(0x7f0000002000, 0x20, b"old") + load(0x7f0000002000, 0x20, b"Builtin:new")
out += struct.pack("<IIQ", 2, 24, 0) + b"\0" * 8
out += move(0x7f0000001000, 0x7f0000004000, 0x40)
open(sys.argv[1], "wb").write(out)
PY
printf '%s\n' "ffffffff81000000 T _stext" "ffffffff81000000 T startup_64" \
	"ffffffff81001000 t early_fn" "ffffffff81002000 W weak_fn" "ffffffff81003000 D data_sym" \
	"ffffffffc0000000 t ext4_fn\t[ext4]" "ffffffffc0001000 T ext4_other\t[ext4]" \
	"ffffffffc0100000 t nf_fn\t[nf_tables]" "ffffffffc0200000 t broken [unterminated" \
	>"$c/kallsyms/basic"
printf '%s\n' "0000000000000000 T hidden_a" "0000000000000000 T hidden_b" >"$c/kallsyms/hidden"

# --- unwinder inputs: ip offset, sp, bp, stack bytes ------------------------------------------
python3 - "$c/unwind" <<'PY'
import struct, sys, os
out = sys.argv[1]
sp = 0x7ffc00001000
stack = b"".join(struct.pack("<Q", v) for v in
                 [sp + 0x40, 0x1234, 0, sp + 0x80, 0x2000, sp + 0xc0, 0, 0] * 8)
open(os.path.join(out, "chain"), "wb").write(struct.pack("<QQQ", 0x400, sp, sp + 0x10) + stack)
open(os.path.join(out, "empty"), "wb").write(struct.pack("<QQQ", 0, sp, 0))
open(os.path.join(out, "wrap"), "wb").write(struct.pack("<QQQ", 0x10, 2**64 - 16, 2**64 - 8) + b"\xff" * 64)
PY

# --- USDT notes: an ELF with probes (sys/sdt.h) ------------------------------------------------
if [ -f /usr/include/x86_64-linux-gnu/sys/sdt.h ] || [ -f /usr/include/sys/sdt.h ]; then
	cc -O1 $LDFLAGS_SEED -o "$w/usdt" "$here/seeds/usdt.c"
	strip --strip-debug -o "$c/usdt/usdt-probes" "$w/usdt"
fi

# --- CUPTI messages: u16 length + a message of src/inject/eprof_gpu_proto.h, repeated ---------
python3 - "$c/cupti" <<'PY'
import struct, sys, os
out = sys.argv[1]
def rec(kind, corr, start, end, body):
    size = 24 + len(body)
    pad = (-size) % 8
    return struct.pack("<HHIQQ", kind, size + pad, corr, start, end) + body + b"\0" * pad
def msg(pid, recs):
    m = struct.pack("<IHHII", 0x55504745, 2, 0, pid, len(recs)) + b"".join(recs)
    return struct.pack("<H", len(m)) + m
def strtail(s):
    return s + b"\0" * ((-len(s)) % 8)
name = b"_Z6kernelPfi\0"
kname = struct.pack("<II", 1, len(name)) + strtail(name)
cbname = struct.pack("<4I", 2, 211, len(b"cudaLaunchKernel\0"), 0) + strtail(b"cudaLaunchKernel\0")
path = b"/usr/local/cuda/lib64/libcupti.so.13\0"
info = struct.pack("<4I", 130001, 130001, 0, len(path)) + strtail(path)
kernel = struct.pack("<3I3I3III", 0, 1, 7, 64, 1, 1, 256, 1, 1, 32, 0) + struct.pack("<I", 1)
memcpy = struct.pack("<3IBBBBQII", 0, 1, 7, 1, 0, 3, 0, 4096, 0, 0)
peer = struct.pack("<3IBBBBQII", 0, 1, 7, 10, 3, 3, 0, 1 << 20, 0, 1)
api = struct.pack("<4I", 4242, 211, 2, 0)
memset = struct.pack("<4IQ", 0, 1, 7, 0, 1024)
sync = struct.pack("<4I", 1, 7, 1, 0)
stats = struct.pack("<6Q", 3, 10, 1, 2, 0, 0)
seq = msg(77, [rec(10, 0, 900, 900, info), rec(9, 0, 950, 950, cbname), rec(4, 1, 1000, 1000, api),
               rec(8, 0, 1500, 1500, kname), rec(1, 1, 2000, 5000, kernel),
               rec(2, 2, 6000, 7000, memcpy), rec(2, 4, 6500, 7500, peer),
               rec(3, 3, 7000, 7100, memset), rec(5, 0, 8000, 9000, sync)])
open(os.path.join(out, "mixed"), "wb").write(seq + msg(77, [rec(6, 0, 0, 0, stats)]))
open(os.path.join(out, "kernel-only"), "wb").write(msg(5, [rec(8, 0, 5, 5, kname), rec(1, 9, 10, 20, kernel)]))
PY

# --- --mem=1 channel: tag byte, u16 length, a message of src/inject/eprof_mem_proto.h -----------
# (tests/fuzz/fuzz_memchan.c); the real-* seeds: traffic libeprof_mem.so sent (capture_memchan.py).
python3 - "$c/memchan" <<'PY'
import struct, sys, os
out = sys.argv[1]
M = 0x4d454d45
def hdr(kind, n, pid=99, tid=100):
    return struct.pack("<IHHII", M, kind, n, pid, tid)
def put(tag, m):
    return struct.pack("<BH", tag, len(m)) + m
def stack(sid, ips, py=(), flags=0):
    m = hdr(2, len(ips)) + struct.pack("<IHHQ", sid, flags, len(py), 1000)
    m += b"".join(struct.pack("<Q", a) for a in ips)
    return m + b"".join(struct.pack("<QQ", code, instr) for code, instr in py)
def recs(rs):
    return hdr(1, len(rs)) + b"".join(struct.pack("<QQQIBBH", *r) for r in rs)
NONE = 0xffff
def layout(ts_cframe, cf_frame, ts_frame, prev, code, instr, owner, is_entry, cstack, fr_read,
           pflags=0):
    p = struct.pack("<I18H", 0x030c00f0, ts_cframe, cf_frame, ts_frame, prev, code, instr,
                    owner, is_entry, cstack, 8, 16, 32, 16, 40, 0, 8, fr_read, pflags)
    p += b"\0" * ((-len(p)) % 8) + struct.pack("<Q", 0)
    return hdr(5, 0, 0, 0) + p
a = 0x55550000
seq = put(0, stack(1, [a + 0x10, a + 0x20, a + 0x30]))
seq += put(0, stack(2, [a + 0x40], py=[(0x7f0000001001, 0x7f0000002000)], flags=1))
seq += put(0, recs([(0x1000, 2000, 64, 1, 1, 0, 0), (0x2000, 2100, 16, 2, 1, 2, 0),
                    (0x1000, 2200, 0, 0, 2, 0, 0)]))
seq += put(1, stack(1, [a + 0x50, a + 0x60]))
seq += put(1, recs([(0x3000, 3000, 128, 1, 1, 1, 0)]))
seq += put(0x40, b"")
seq += put(0, hdr(4, 0))
open(os.path.join(out, "stacks-recs"), "wb").write(seq)
# 3.11, 3.12 (cframe), 3.13 (current_frame); then records on them
l311 = layout(56, 8, NONE, 48, 32, 56, NONE, 70, NONE, 72)
l312 = layout(56, 0, NONE, 8, 0, 56, 70, NONE, 3, 72)
l313 = layout(NONE, NONE, 72, 8, 0, 56, 70, NONE, 3, 72)
l310 = layout(NONE, NONE, 24, 24, 32, 56, NONE, NONE, NONE, 64, 1)
open(os.path.join(out, "layouts"), "wb").write(
    put(0x80, l311) + put(0x80, l312) + put(0x80, l313) + put(0x80, l310) + seq)
PY

# Real traffic (root: the library talks only to a root peer).
lib=$(dirname "$eprof")/libeprof_mem.so
if [ "$(id -u)" -eq 0 ] && [ -f "$lib" ]; then
	python3 "$here/capture_memchan.py" "$lib" "$c/memchan/real-ls" ls -la /usr
	python3 "$here/capture_memchan.py" "$lib" "$c/memchan/real-sh" sh -c 'sort /etc/passwd | head -3; echo x | cat'
	python3 "$here/capture_memchan.py" "$lib" "$c/memchan/real-py" python3 -c 'import json; print(len(json.dumps(list(range(1000)))))'
else
	echo "make_corpus: real channel seeds skipped (need root and $lib)"
fi

# --- demangler --------------------------------------------------------------------------------
i=0
for name in _ZN2ns3BoxIiE3getEv _ZNKSt6vectorIiSaIiEE4sizeEv '_ZZN2ns3sumERKSt6vectorINS_3BoxIiEESaIS2_EEENKUliE_clEi' \
	_ZN4core3fmt5write17h0123456789abcdefE _RNvCs1234_7mycrate4main '_ZN2nsltERKNS_3BoxIiEES3_' \
	'_Z1fIiEvT_' 'operator<<(std::ostream&, int) const' 'void (anonymous namespace)::f<int>(int)' \
	'main' '_GLOBAL__sub_I_main.cc' '_ZNSt8ios_base4InitC1Ev@plt'; do
	printf '%s' "$name" >"$c/demangle/$i"
	i=$((i + 1))
done

# --- eprof.data files (root, real BPF) ----------------------------------------------------------
if [ "$(id -u)" -ne 0 ] || [ ! -x "$eprof" ]; then
	echo "make_corpus: eprof.data seeds skipped (need root and $eprof)"
	exit 0
fi
cc -O2 -g -fno-omit-frame-pointer -o "$w/hot3" "$root/tests/fixtures/hot3.c"
cc -O2 -g -fomit-frame-pointer -o "$w/hot3-nofp" "$root/tests/fixtures/hot3.c"
cc -O2 -g -o "$w/forkexec" "$root/tests/fixtures/forkexec.c"
cc -O2 -g -o "$w/syscalls" "$root/tests/fixtures/syscalls.c"
cc -O2 -g -pthread -o "$w/condwait" "$root/tests/fixtures/condwait.c"
cc -O2 -g -o "$w/memfix" "$root/tests/fixtures/memfix.c"
cc -O2 -g -I"$root/include" -o "$w/regionfix" "$root/tests/fixtures/regionfix.c"
cc -O2 -g -pthread -o "$w/io_app" "$root/tests/fixtures/io_app.c"
r="$c/reader"
"$eprof" record -q -F 499 -g fp -o "$r/fp.data" -- "$w/hot3" 0.2 >/dev/null
"$eprof" record -q -F 499 -o "$r/dwarf.data" -- "$w/hot3-nofp" 0.2 >/dev/null
"$eprof" record -q -F 499 -o "$r/kernel.data" -- "$w/syscalls" 0.2 >/dev/null
PARENT_SECONDS=0.1 "$eprof" record -q -F 499 -o "$r/forkexec.data" -- "$w/forkexec" "$w/hot3" 0.1 >/dev/null
# Events of the other features: off-CPU intervals with wakers, allocations, regions.
"$eprof" record -q -F 99 --offcpu -o "$r/offcpu.data" -- "$w/condwait" 0.05 >/dev/null
"$eprof" record -q -F 99 --mem=1 -o "$r/mem.data" -- "$w/memfix" 300 - 30 1000 >/dev/null
"$eprof" record -q -F 99 --region "$w/regionfix:inner" -o "$r/region.data" -- "$w/regionfix" >/dev/null
# I/O calls with their files and peers (a pipe read by one thread, written by another).
"$eprof" record -q -F 99 -g fp --no-metrics --io -o "$r/io.data" -- "$w/io_app" slowpipe 0.1 >/dev/null
# GPU events through the tests' fake CUDA driver and fake CUPTI (kernels, copies, streams,
# API calls, device limits): needs the CUPTI headers and an eprof built with them.
cuda=${CUDA_HOME:-/usr/local/cuda}
fk=$root/tests/fixtures/fakecuda
if [ -f "$cuda/include/cupti.h" ] && [ -f "$(dirname "$eprof")/libeprof_cupti.so" ]; then
	cc -shared -fPIC -O1 -g -I"$cuda/include" -o "$w/libfakecupti.so" "$fk/fake_cupti.c" -lpthread
	cc -shared -fPIC -O1 -g -Wl,-soname,libcuda.so.1 -o "$w/libcuda.so.1" "$fk/fake_cuda.c" -ldl
	ln -sf libcuda.so.1 "$w/libcuda.so"
	for app in fake_app fake_occ; do
		cc -O1 -g -fno-omit-frame-pointer -o "$w/$app" "$fk/$app.c" -L"$w" -lcuda -Wl,-rpath,"$w"
	done
	EPROF_LIBCUPTI=$w/libfakecupti.so "$eprof" record -q -F 99 -o "$r/gpu.data" -- "$w/fake_app" >/dev/null
	EPROF_LIBCUPTI=$w/libfakecupti.so "$eprof" record -q -F 99 -o "$r/occ.data" -- "$w/fake_occ" >/dev/null
else
	echo "make_corpus: GPU seeds skipped (no $cuda/include/cupti.h or no libeprof_cupti.so)"
fi
# Cut off: the recorder killed after its first chunk, and a file cut inside its last chunk.
"$eprof" record -q -F 199 -o "$r/killed.data" -- "$w/hot3-nofp" 5 >/dev/null &
sleep 1.6
kill -KILL $! 2>/dev/null || true
wait $! 2>/dev/null || true
pkill -KILL -f "^$w/hot3-nofp" || true
size=$(stat -c %s "$r/fp.data")
head -c $((size - 7)) "$r/fp.data" >"$r/cut.data"
ls -la "$r"

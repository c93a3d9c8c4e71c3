# SPDX-License-Identifier: MIT
"""A generated shared library that stands in for a big CUDA library (libtorch_cuda.so,
cuDNN, cuBLAS: 0.5-1.5 GB each, `.eh_frame` to match) in tools/bench/gpu_node.py.

It is written directly, not compiled: one real function, `standin_launch(fn, f, stream)`,
which calls `fn(f, 4,1,1, 64,1,1, 0, stream, NULL, NULL)` (the driver's cuLaunchKernel,
its address passed in: the library needs no relocations) from a frame-pointer frame, and
millions of filler functions with a realistic prologue and epilogue (six pushes and six
pops), each with its FDE (72 bytes) in `.eh_frame` and its row in `.eh_frame_hdr`'s sorted
table. The launch path thus goes Python -> ctypes -> this library -> the driver, and a
recorder unwinding a launch's stack has to find the trampoline's FDE among millions, as it
has to in libtorch_cuda.so. The filler code is never run.

Sections: .note.gnu.build-id, .hash, .dynsym, .dynstr, .text, .eh_frame_hdr, .eh_frame
(one read+exec PT_LOAD), .dynamic (a read+write PT_LOAD), .shstrtab; PT_GNU_EH_FRAME,
PT_DYNAMIC, PT_NOTE, PT_GNU_STACK. ld.so loads it with dlopen; readelf/objdump read it.

  standin_elf.py OUT [--eh-frame-mb 300]        writes it (a few seconds per 300 MB)
"""
import argparse
import hashlib
import os
import struct
import sys

from array import array

SONAME = b"libtorch_cuda_standin.so"
FUNC = b"standin_launch"
VERSION = 1  # of this generator: part of the cache key and the build-id

PAGE = 0x1000

# standin_launch(rdi = fn, rsi = f, rdx = stream): fn(f, 4, 1, 1, 64, 1, 1, 0, stream, 0, 0)
TRAMPOLINE = bytes.fromhex(
    "55"                # push rbp
    "4889e5"            # mov rbp, rsp
    "4889f8"            # mov rax, rdi
    "4889f7"            # mov rdi, rsi          f
    "4883ec08"          # sub rsp, 8            keeps rsp 16-aligned at the call
    "6a00"              # push 0                extra
    "6a00"              # push 0                params
    "52"                # push rdx              stream
    "6a00"              # push 0                shared memory
    "6a01"              # push 1                block z
    "be04000000"        # mov esi, 4            grid x
    "ba01000000"        # mov edx, 1            grid y
    "b901000000"        # mov ecx, 1            grid z
    "41b840000000"      # mov r8d, 64           block x
    "41b901000000"      # mov r9d, 1            block y
    "ffd0"              # call rax
    "c9"                # leave
    "c3")               # ret
TRAMP_SLOT = 64
# CFA rules: after push rbp (+1) CFA = rsp+16, rbp at CFA-16; after mov rbp,rsp (+4)
# CFA = rbp+16; after leave (at the ret) CFA = rsp+8.
TRAMP_CFI = bytes([0x41, 0x0e, 0x10, 0x86, 0x02,
                   0x43, 0x0d, 0x06,
                   0x40 | (len(TRAMPOLINE) - 1 - 4), 0x0c, 0x07, 0x08])

# A filler: push rbp, r15, r14, r13, r12, rbx; the pops; ret; int3 padding to 32 bytes.
FILLER = bytes.fromhex("55415741564155415453" "5b415c415d415e415f5d" "c3")
FILLER_SLOT = 32
FILLER = FILLER + b"\xcc" * (FILLER_SLOT - len(FILLER))


def _filler_cfi():
    out = bytearray()
    # (code offset after the instruction, CFA offset, DWARF register saved or None)
    pushes = [(1, 16, 6), (3, 24, 15), (5, 32, 14), (7, 40, 13), (9, 48, 12), (10, 56, 3)]
    pops = [(11, 48), (13, 40), (15, 32), (17, 24), (19, 16), (20, 8)]
    at = 0
    for off, cfa, reg in pushes:
        out += bytes([0x40 | (off - at), 0x0e, cfa, 0x80 | reg, cfa // 8])
        at = off
    for off, cfa in pops:
        out += bytes([0x40 | (off - at), 0x0e, cfa])
        at = off
    return bytes(out)


FILLER_CFI = _filler_cfi()


def _cie():
    body = (struct.pack("<I", 0) + b"\x01" + b"zR\x00" + b"\x01" + b"\x78" + b"\x10" +
            b"\x01" + b"\x1b" +            # augmentation data: FDE pointers pcrel|sdata4
            b"\x0c\x07\x08" + b"\x90\x01")  # CFA = rsp+8, return address at CFA-8
    body += b"\x00" * ((-(len(body) + 4)) % 8)
    return struct.pack("<I", len(body)) + body


def _fde_len(cfi):
    n = 4 + 4 + 4 + 1 + len(cfi)  # CIE pointer, pc_begin, pc_range, augmentation length
    return n + (-(n + 4)) % 8


def cache_name(eh_mb):
    return f"libtorch_cuda_standin-v{VERSION}-{eh_mb}mb.so"


def nfillers_for(eh_mb):
    return -(-int(eh_mb * 1e6) // (4 + _fde_len(FILLER_CFI)))


def _align(x, a):
    return (x + a - 1) // a * a


def generate(out, eh_mb=300):
    """Writes the library to out (through a temporary name, then rename). Returns its
    (.eh_frame size, FDE count)."""
    n = nfillers_for(eh_mb)
    cie = _cie()
    tramp_fde_len = _fde_len(TRAMP_CFI)
    fill_fde_len = _fde_len(FILLER_CFI)

    # --- layout ---------------------------------------------------------------------------
    note_off = 0x400
    build_id = hashlib.sha1(f"eprof-standin v{VERSION} {n}".encode()).digest()
    note = struct.pack("<III", 4, 20, 3) + b"GNU\x00" + build_id
    hash_off = _align(note_off + len(note), 8)
    hash_ = struct.pack("<5I", 1, 2, 1, 0, 0)  # one bucket: symbol 1, chain ends
    dynsym_off = _align(hash_off + len(hash_), 8)
    dynstr = b"\x00" + FUNC + b"\x00" + SONAME + b"\x00"
    dynstr_off = dynsym_off + 2 * 24
    text_off = PAGE
    text_size = TRAMP_SLOT + n * FILLER_SLOT
    hdr_off = _align(text_off + text_size, 8)
    hdr_size = 12 + 8 * (n + 1)
    eh_off = _align(hdr_off + hdr_size, 8)
    eh_size = len(cie) + 4 + tramp_fde_len + n * (4 + fill_fde_len) + 4  # + terminator
    rx_end = eh_off + eh_size
    dyn_off = _align(rx_end, PAGE)
    dyn = b""
    for tag, val in ((4, hash_off), (5, dynstr_off), (6, dynsym_off), (10, len(dynstr)),
                     (11, 24), (14, dynstr.index(SONAME)), (0, 0)):
        dyn += struct.pack("<qQ", tag, val)
    shstr = b"\x00.note.gnu.build-id\x00.hash\x00.dynsym\x00.dynstr\x00.text\x00" \
            b".eh_frame_hdr\x00.eh_frame\x00.dynamic\x00.shstrtab\x00"
    shstr_off = dyn_off + len(dyn)
    sh_off = _align(shstr_off + len(shstr), 8)

    def sname(s):
        return shstr.index(b"\x00" + s + b"\x00") + 1

    # --- headers --------------------------------------------------------------------------
    phdrs = [
        # type, flags, offset, vaddr, filesz, memsz, align
        (1, 5, 0, 0, rx_end, rx_end, PAGE),                       # PT_LOAD r-x
        (1, 6, dyn_off, dyn_off, len(dyn), len(dyn), PAGE),       # PT_LOAD rw-
        (2, 6, dyn_off, dyn_off, len(dyn), len(dyn), 8),          # PT_DYNAMIC
        (4, 4, note_off, note_off, len(note), len(note), 4),      # PT_NOTE
        (0x6474e550, 4, hdr_off, hdr_off, hdr_size, hdr_size, 4),  # PT_GNU_EH_FRAME
        (0x6474e551, 6, 0, 0, 0, 0, 16),                          # PT_GNU_STACK
    ]
    sections = [
        # name, type, flags, addr/offset, size, link, info, align, entsize
        (None, 0, 0, 0, 0, 0, 0, 0, 0),
        (b".note.gnu.build-id", 7, 2, note_off, len(note), 0, 0, 4, 0),
        (b".hash", 5, 2, hash_off, len(hash_), 3, 0, 8, 4),
        (b".dynsym", 11, 2, dynsym_off, 48, 4, 1, 8, 24),
        (b".dynstr", 3, 2, dynstr_off, len(dynstr), 0, 0, 1, 0),
        (b".text", 1, 6, text_off, text_size, 0, 0, 16, 0),
        (b".eh_frame_hdr", 1, 2, hdr_off, hdr_size, 0, 0, 4, 0),
        (b".eh_frame", 1, 2, eh_off, eh_size, 0, 0, 8, 0),
        (b".dynamic", 6, 3, dyn_off, len(dyn), 4, 0, 8, 16),
        (b".shstrtab", 3, 0, shstr_off, len(shstr), 0, 0, 1, 0),
    ]
    ehdr = (b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 8 +
            struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 64, sh_off, 0, 64, 56, len(phdrs), 64,
                        len(sections), len(sections) - 1))
    head = bytearray(ehdr)
    for p in phdrs:
        head += struct.pack("<IIQQQQQQ", p[0], p[1], p[2], p[3], p[3], p[4], p[5], p[6])
    head += b"\x00" * (note_off - len(head)) + note
    head += b"\x00" * (hash_off - len(head)) + hash_
    head += b"\x00" * (dynsym_off - len(head))
    head += struct.pack("<IBBHQQ", 0, 0, 0, 0, 0, 0)
    head += struct.pack("<IBBHQQ", 1, 0x12, 0, 5, text_off, len(TRAMPOLINE))
    head += dynstr
    head += b"\x00" * (text_off - len(head))

    # --- .text ----------------------------------------------------------------------------
    text = TRAMPOLINE + b"\xcc" * (TRAMP_SLOT - len(TRAMPOLINE)) + FILLER * n

    # --- .eh_frame: CIE, the trampoline's FDE, the fillers' -------------------------------
    tramp_fde_off = len(cie)
    fill0 = tramp_fde_off + 4 + tramp_fde_len
    fill_rec = 4 + fill_fde_len
    assert fill_rec % 4 == 0

    def fde(off, pc, size, cfi, length):
        body = struct.pack("<Iii", off + 4, pc - (eh_off + off + 8), size) + b"\x00" + cfi
        return struct.pack("<I", length) + body + b"\x00" * (length - len(body))

    eh_head = cie + fde(tramp_fde_off, text_off, TRAMP_SLOT, TRAMP_CFI, tramp_fde_len)
    assert len(eh_head) == fill0
    # Every filler FDE is the same record but for its CIE pointer (its distance back to the
    # CIE) and its pc_begin (pc-relative): two strided slices of 32-bit words.
    words = fill_rec // 4
    fdes = array("i")
    fdes.frombytes(fde(0, 0, FILLER_SLOT, FILLER_CFI, fill_fde_len) * n)
    fdes[1::words] = array("i", range(fill0 + 4, fill0 + 4 + n * fill_rec, fill_rec))
    pc0 = text_off + TRAMP_SLOT
    fdes[2::words] = array("i", range(pc0 - (eh_off + fill0 + 8),
                                      pc0 - (eh_off + fill0 + 8) + n * (FILLER_SLOT - fill_rec),
                                      FILLER_SLOT - fill_rec))

    # --- .eh_frame_hdr --------------------------------------------------------------------
    hdr_head = struct.pack("<BBBBiI", 1, 0x1b, 0x03, 0x3b, eh_off - (hdr_off + 4), n + 1)
    tab = array("i", [text_off - hdr_off, eh_off + tramp_fde_off - hdr_off]) * (n + 1)
    tab[2::2] = array("i", range(pc0 - hdr_off, pc0 - hdr_off + n * FILLER_SLOT, FILLER_SLOT))
    tab[3::2] = array("i", range(eh_off + fill0 - hdr_off, eh_off + fill0 - hdr_off + n * fill_rec,
                                 fill_rec))

    tail = bytearray(b"\x00" * (dyn_off - rx_end)) + dyn + shstr
    tail += b"\x00" * (sh_off - rx_end - len(tail))
    for s in sections:
        name = sname(s[0]) if s[0] else 0
        addr = s[3] if s[2] & 2 else 0
        tail += struct.pack("<IIQQQQIIQQ", name, s[1], s[2], addr, s[3], s[4], s[5], s[6],
                            s[7], s[8])

    tmp = f"{out}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(head)
        f.write(text)
        f.write(b"\x00" * (hdr_off - (text_off + text_size)))
        f.write(hdr_head)
        tab.tofile(f)
        f.write(b"\x00" * (eh_off - (hdr_off + hdr_size)))
        f.write(eh_head)
        fdes.tofile(f)
        f.write(b"\x00" * 4)
        assert f.tell() == rx_end, (f.tell(), rx_end)
        f.write(tail)
    os.chmod(tmp, 0o755)
    os.rename(tmp, out)
    return eh_size, n + 1


def ensure(cache_dir, eh_mb=300):
    """The library for eh_mb, generated into cache_dir once. Returns (path, generated)."""
    os.makedirs(cache_dir, exist_ok=True)
    path = os.path.join(cache_dir, cache_name(eh_mb))
    if os.path.exists(path):
        return path, False
    generate(path, eh_mb)
    return path, True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--eh-frame-mb", type=int, default=300)
    a = ap.parse_args()
    size, n = generate(a.out, a.eh_frame_mb)
    print(f"{a.out}: .eh_frame {size / 1e6:.1f} MB, {n} FDEs")
    return 0


if __name__ == "__main__":
    sys.exit(main())

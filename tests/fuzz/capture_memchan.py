#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Real --mem=1 channel traffic as fuzz_memchan seeds: plays the recorder's side of the
socket (as root: the library talks only to a root peer whose pid its socket's path names),
runs a command with libeprof_mem.so preloaded in every-call mode, and writes the first
records it sent with the stacks they name, in fuzz_memchan's input format (tag byte,
u16 length, message), up to about 6 KB.

  capture_memchan.py LIBEPROF_MEM OUT CMD...
"""
import os
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

STACK, RECS, SYNC = 2, 1, 4


def capture(lib, argv):
    d = tempfile.mkdtemp(prefix=f"eprof-mem-{os.getpid()}-", dir="/tmp")
    path = os.path.join(d, "sock")
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ls.bind(path)
    ls.listen(8)
    env = dict(os.environ, LD_PRELOAD=lib, EPROF_MEM_SAMPLE="1", EPROF_MEM_SOCK=path)
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
    msgs, conns, end = [], [], time.time() + 20
    try:
        while time.time() < end:
            r, _, _ = select.select([ls] + conns, [], [], 0.2)
            for x in r:
                if x is ls:
                    conns.append(ls.accept()[0])
                    continue
                m = x.recv(65536)
                if not m:
                    conns.remove(x)
                    continue
                msgs.append((conns.index(x) & 7, m))
                if struct.unpack_from("<H", m, 4)[0] == SYNC:
                    x.send(b"k")  # decoded: the process may exit
            if p.poll() is not None and not conns:
                break
    finally:
        p.kill()
        shutil.rmtree(d, ignore_errors=True)
    return msgs


def seed(msgs, nrecs=40, budget=6000):
    """The first records message cut to nrecs records, after the stacks they name."""
    kind = lambda m: struct.unpack_from("<H", m, 4)[0]
    stacks = {(c, struct.unpack_from("<I", m, 16)[0]): m for c, m in msgs if kind(m) == STACK}
    conn, rm = next((c, m) for c, m in msgs if kind(m) == RECS)
    n = min(nrecs, struct.unpack_from("<H", rm, 6)[0])
    recs = [rm[16 + 32 * i:48 + 32 * i] for i in range(n)]
    out = b""
    for sid in sorted({struct.unpack_from("<I", r, 24)[0] for r in recs} - {0}):
        m = stacks.get((conn, sid))
        if m and len(out) + len(m) < budget:
            out += struct.pack("<BH", conn, len(m)) + m
    rm = rm[:6] + struct.pack("<H", n) + rm[8:16] + b"".join(recs)
    out += struct.pack("<BH", conn, len(rm)) + rm
    for m in [m for c, m in msgs if c == conn and kind(m) == SYNC][:1]:
        out += struct.pack("<BH", conn, len(m)) + m
    return out


if __name__ == "__main__":
    open(sys.argv[2], "wb").write(seed(capture(sys.argv[1], sys.argv[3:])))

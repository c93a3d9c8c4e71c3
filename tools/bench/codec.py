#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Compression codecs for eprof.data chunks, on real payloads (codec.c).

Takes eprof.data files, or with --record makes two itself (a 3 s `record --offcpu` of the
off-CPU ping-pong, the densest event stream, and a 3 s `record -a` of the machine), and
prints each codec's compression and decompression speed and size as ratios to zlib level 1
measured in the same run.

  tools/bench/codec.py --record [--eprof build/eprof]
  tools/bench/codec.py FILE.data...
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*")
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--eprof", default=os.environ.get("EPROF") or
                    os.path.join(HERE, "..", "..", "build", "eprof"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "codec")
        subprocess.run(["cc", "-O2", "-o", exe, os.path.join(HERE, "codec.c"), "-lz", "-lzstd"],
                       check=True)
        files = list(a.files)
        if a.record:
            pp = os.path.join(tmp, "pingpong")
            subprocess.run(["cc", "-O2", "-pthread", "-o", pp,
                            os.path.join(HERE, "offcpu_pingpong.c")], check=True)
            off = os.path.join(tmp, "offcpu.data")
            subprocess.run([a.eprof, "record", "-q", "--offcpu", "-o", off, "--", pp, "80000",
                            "6000"], check=True, stdout=subprocess.DEVNULL)
            sysw = os.path.join(tmp, "system.data")
            subprocess.run([a.eprof, "record", "-q", "-a", "-F", "999", "-d", "3", "-o", sysw],
                           check=True)
            files += [off, sysw]
        if not files:
            ap.error("give eprof.data files or --record")
        for f in files:
            print(f"== {os.path.basename(f)}")
            sys.stdout.flush()
            subprocess.run([exe, f], check=True)


if __name__ == "__main__":
    main()

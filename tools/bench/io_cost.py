#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What record --io costs per read/write system call (docs/io.md).

tools/bench/io_cost.c makes COUNT calls of one kind and times them from inside. Each round
runs, in turn (interleaved, so the machine's load drifts across all alike):
  bare       the workload alone
  eprof      under eprof record --no-metrics (CPU sampling at 99 Hz only)
  io         ... --io (default --io-stack-rate 5000: beyond 5000 calls a second per CPU, a
             call is recorded without its stack)
  io-stacks  ... --io --io-stack-rate 0: every call with its stack (DWARF stack copy)
  io-fp      ... --io --io-stack-rate 0 -g fp: every call with its stack by frame pointers
  other      the workload alone while eprof record --io records another process: what --io
             costs the calls of processes it does not record (the traced syscall path)
and prints the median ns per call of each, its ratio to bare and the ns added.

  tools/bench/io_cost.py [--rounds 5] [--count 200000] [--kinds pread,pread1,write,getppid]
                         [--eprof PATH]
Run as root. Only the ratios within one run mean anything on a shared machine.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the tree
import benchlib as bl  # noqa: E402

CONFIGS = ("bare", "eprof", "io", "io-stacks", "io-fp", "other")


def run_one(eprof, exe, tmp, config, kind, count):
    cmd = [exe, kind, str(count)]
    data = os.path.join(tmp, "io.data")
    bg = idle = None
    if config in ("eprof", "io", "io-stacks", "io-fp"):
        extra = {"eprof": [], "io": ["--io"], "io-stacks": ["--io", "--io-stack-rate", "0"],
                 "io-fp": ["--io", "--io-stack-rate", "0", "-g", "fp"]}
        cmd = [eprof, "record", "-q", "--no-metrics", "-o", data, *extra[config], "--", *cmd]
    elif config == "other":
        idle = subprocess.Popen(["sleep", "600"])
        bg = subprocess.Popen([eprof, "record", "-q", "--no-metrics", "--io", "-o", data,
                               "-p", str(idle.pid)], stdout=subprocess.DEVNULL)
        time.sleep(1.5)  # attached
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    finally:
        if idle:
            idle.kill()  # eprof stops when its target is gone
            idle.wait()
            bg.wait()
    for line in out.splitlines():
        if line.startswith("ns_per_call "):
            return float(line.split()[1])
    bl.die(f"no result from {' '.join(cmd)}: {out!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--count", type=int, default=200000)
    ap.add_argument("--kinds", default="pread,pread1,write,getppid")
    ap.add_argument("--eprof")
    a = ap.parse_args()
    if os.geteuid() != 0:
        bl.die("run as root (BPF)")
    eprof = bl.find_eprof(a.eprof)
    print(bl.load_note())
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "io_cost")
        subprocess.run(["cc", "-O2", "-o", exe, os.path.join(bl.HERE, "io_cost.c")], check=True)
        kinds = [k for k in a.kinds.split(",") if k]
        res = {(k, c): [] for k in kinds for c in CONFIGS}
        for r in range(a.rounds):
            for k in kinds:
                for c in CONFIGS:
                    res[(k, c)].append(run_one(eprof, exe, tmp, c, k, a.count))
        print(f"{a.rounds} rounds of {a.count} calls; median ns per call (ratio to bare, "
              "ns added)")
        print(f"{'call':10s}" + "".join(f"{c:>24s}" for c in CONFIGS))
        for k in kinds:
            base = bl.median(res[(k, "bare")])
            row = f"{k:10s}"
            for c in CONFIGS:
                m = bl.median(res[(k, c)])
                row += f"{m:9.0f} ({m / base:5.2f}x {m - base:+5.0f})" if c != "bare" \
                    else f"{m:24.0f}"
            print(row)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""CUDA API uprobe cost: a launch-bound loop (100,000 cudaLaunchKernel calls) bare, under
`eprof record --no-cuda` and under `eprof record` (CUDA on, default --cuda-stack-rate), with
uprobe sessions (launches past the stack rate skip their return probe) and without them
(EPROF_NO_UPROBE_SESSION=1: an entry and a return probe on every launch, the old way), all
interleaved, median of 5. Prints ns per launch, the per-launch cost eprof adds, and the ratio
of that cost to the no-session cost measured in the same run.

Without a GPU each call fails in ~100 ns, so the ratio here is a worst case; on a GPU a launch
costs 2-5 us and the added ns matter against that.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import find_eprof  # noqa: E402

CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")


def per_launch(cmd, env=None):
    out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                         env=dict(os.environ, **(env or {}))).stdout
    return float(re.search(r"([\d.]+) ns/launch", out).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--eprof")
    ap.add_argument("-n", type=int, default=100000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    if not os.path.exists(os.path.join(CUDA, "include", "cuda_runtime.h")):
        print(f"skipped: no CUDA toolkit in {CUDA}")
        return 0
    eprof = find_eprof(args.eprof)
    d = tempfile.mkdtemp(prefix="eprof-cuda-bench-")
    exe = os.path.join(d, "launch")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cuda_launch.c")
    subprocess.run(["cc", "-O2", "-g", "-fno-omit-frame-pointer", f"-I{CUDA}/include", "-o", exe,
                    src, f"-L{CUDA}/lib64", "-lcudart", f"-Wl,-rpath,{CUDA}/lib64"], check=True)
    data = os.path.join(d, "e.data")
    old = {"EPROF_NO_UPROBE_SESSION": "1"}
    modes = {
        "bare": [exe, str(args.n)],
        "eprof --no-cuda": [eprof, "record", "-q", "--no-cuda", "-o", data, "--", exe, str(args.n)],
        "eprof (cuda, rate 100)": [eprof, "record", "-q", "-o", data, "--", exe, str(args.n)],
        "eprof (cuda, rate 0)": [eprof, "record", "-q", "--cuda-stack-rate", "0", "-o", data,
                                 "--", exe, str(args.n)],
        "eprof (cuda, every stack)": [eprof, "record", "-q", "--cuda-stack-rate", "1000000",
                                      "-o", data, "--", exe, str(args.n)],
        "no session (cuda, rate 100)": (old, [eprof, "record", "-q", "-o", data, "--", exe,
                                              str(args.n)]),
        "no session (cuda, rate 0)": (old, [eprof, "record", "-q", "--cuda-stack-rate", "0",
                                            "-o", data, "--", exe, str(args.n)]),
    }
    res = {k: [] for k in modes}
    for _ in range(args.runs):
        for k, cmd in modes.items():
            env, cmd = cmd if isinstance(cmd, tuple) else (None, cmd)
            res[k].append(per_launch(cmd, env))
    base = statistics.median(res["bare"])
    nocuda = statistics.median(res["eprof --no-cuda"])
    print(f"{args.n} launches, median of {args.runs}:")
    for k, v in res.items():
        m = statistics.median(v)
        print(f"  {k:28s} {m:9.1f} ns/launch   x{m / base:6.2f} bare   +{m - nocuda:7.1f} ns vs --no-cuda")
    added = {k: statistics.median(v) - nocuda for k, v in res.items()}
    for rate in ("100", "0"):
        new, old_ = added[f"eprof (cuda, rate {rate})"], added[f"no session (cuda, rate {rate})"]
        print(f"  rate {rate}: added cost with sessions / without: {new:.1f} / {old_:.1f} ns "
              f"= x{new / old_:.2f}")
    # what the added cost would be against real launches (2-5 us each on a GPU)
    for real in (2000, 5000):
        print(f"  against a {real} ns launch: +{100 * added['eprof (cuda, rate 100)'] / real:.0f}%"
              f" (without sessions +{100 * added['no session (cuda, rate 100)'] / real:.0f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

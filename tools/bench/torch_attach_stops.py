#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How long attaching stops the threads of a real PyTorch training job (issue 30's target:
p99 <= 5 ms per thread stop, never the main thread while another thread is at a safe point).

Runs tests/fixtures/python/torch_train.py (Debian's python3-torch, CPU, DataLoader workers) for
long enough, then attaches and detaches `eprof record -v MODE -p PID -d 0.5` CYCLES times per
mode (--mem: libeprof_mem.so injected and retracted; --mem=1: the same, every call on its
channel). eprof's own account (`-v`: "... thread T stopped X ms") gives each stop: one at the
injection, one at the retraction. Prints, per mode and kind, the count, p50, p99 and max in ms,
how many stops took the job's main thread, and the load average before and after; it stops at
once if the job dies.

  tools/bench/torch_attach_stops.py [--cycles 20] [--modes=--mem,--mem=1] [--eprof PATH]
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import REPO, find_eprof  # noqa: E402

JOB = os.path.join(REPO, "tests", "fixtures", "python", "torch_train.py")
PY = "/usr/bin/python3"
STOP_RE = re.compile(r"libeprof_mem\.so (loaded into|retracted from) \d+.*?"
                     r"thread (\d+) stopped ([0-9.]+) ms")


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))] if v else float("nan")


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--modes", default="--mem,--mem=1")
    ap.add_argument("--eprof")
    a = ap.parse_args()
    eprof = find_eprof(a.eprof)
    if subprocess.run([PY, "-c", "import torch"], capture_output=True).returncode:
        sys.exit("torch_attach_stops: python3-torch is not installed (apt-get install python3-torch)")
    modes = a.modes.split(",")
    seconds = 30 + a.cycles * len(modes) * 4
    job = subprocess.Popen([PY, JOB, str(seconds), "--workers", "1", "--ready"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = job.stdout.readline()
    if line.strip() != "ready":
        sys.exit(f"torch_attach_stops: the job did not start: {line!r}")
    print(f"job {job.pid}, {a.cycles} cycles per mode, load before: {loadavg()}", flush=True)
    failed = 0
    d = tempfile.mkdtemp(prefix="eprof-torch-stops-")
    data = os.path.join(d, "stops.data")
    try:
        for mode in modes:
            stops = {"loaded into": [], "retracted from": []}
            main_stops = 0
            for _ in range(a.cycles):
                r = subprocess.run([eprof, "record", "-v", mode, "-p", str(job.pid), "-d", "0.5",
                                    "-o", data], capture_output=True, text=True, timeout=120)
                failed += r.returncode != 0
                if r.returncode:
                    print(f"record failed: {r.stderr.strip().splitlines()[-1:]}", flush=True)
                for what, tid, ms in STOP_RE.findall(r.stderr):
                    stops[what].append(float(ms))
                    main_stops += int(tid) == job.pid
                if job.poll() is not None:
                    sys.exit(f"torch_attach_stops: the job died ({job.returncode})")
            for what, v in stops.items():
                kind = "injection" if what == "loaded into" else "retraction"
                print(f"{mode:8} {kind:10} n={len(v):3}  p50 {pct(v, 50):6.2f} ms  "
                      f"p99 {pct(v, 99):6.2f} ms  max {max(v) if v else float('nan'):6.2f} ms"
                      + (f"  mean {statistics.mean(v):6.2f} ms" if v else ""), flush=True)
            print(f"{mode:8} main thread stopped {main_stops} times", flush=True)
    finally:
        job.terminate()
        job.communicate(timeout=60)
        shutil.rmtree(d, ignore_errors=True)
    # it was checked alive after every cycle: a crash or hang ends the bench above
    print(f"load after: {loadavg()}; records failed: {failed}; the job ran through every cycle")


if __name__ == "__main__":
    main()

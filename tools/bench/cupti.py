#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""CUPTI record throughput without a GPU: 1,000,000 kernel records (each with its API
correlation record) from the fake libcupti of tests/fixtures/fakecuda, through
libeprof_cupti.so and its socket into `eprof record`, then `eprof report --json` (which
joins and aggregates them). Prints records/s for the pipeline and for the report."""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import find_eprof  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--eprof")
    ap.add_argument("-n", type=int, default=1000000)
    args = ap.parse_args()
    eprof = find_eprof(args.eprof)
    inj = os.path.join(os.path.dirname(eprof), "libeprof_cupti.so")
    if not os.path.exists(inj) or not os.path.exists(os.path.join(CUDA, "include", "cupti.h")):
        print("skipped: eprof built without CUPTI, or no CUPTI headers")
        return 0
    d = tempfile.mkdtemp(prefix="eprof-cupti-bench-")
    fake = os.path.join(d, "libfakecupti.so")
    exe = os.path.join(d, "rate")
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", f"-I{CUDA}/include", "-o", fake,
                    os.path.join(REPO, "tests/fixtures/fakecuda/fake_cupti.c"), "-lpthread"],
                   check=True)
    subprocess.run(["cc", "-O2", "-o", exe, os.path.join(HERE, "cupti_rate.c"), "-ldl"], check=True)
    data = os.path.join(d, "c.data")
    env = dict(os.environ, EPROF_LIBCUPTI=fake)
    t0 = time.monotonic()
    r = subprocess.run([eprof, "record", "-q", "-o", data, "--", exe, str(args.n)], env=env,
                       capture_output=True, text=True, check=True)
    t1 = time.monotonic()
    print(r.stdout.strip())
    print(f"record wall (start to file written): {t1 - t0:.2f} s, "
          f"{os.path.getsize(data) / 1e6:.1f} MB")
    t0 = time.monotonic()
    rep = subprocess.run([eprof, "report", data, "--json"], capture_output=True, text=True,
                         check=True)
    t1 = time.monotonic()
    import json
    gpu = json.loads(rep.stdout)["gpu"]
    n = sum(k["count"] for k in gpu["kernels"])
    print(f"report (load + join + aggregate): {n} kernels in {t1 - t0:.2f} s: "
          f"{n / (t1 - t0) / 1e6:.2f} M kernel records/s; lost {json.loads(rep.stdout)['stats']['gpu_records_lost']}")
    return 0 if n == args.n else 1


if __name__ == "__main__":
    sys.exit(main())

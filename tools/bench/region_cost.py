#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Region tracing cost per call, in ns, against an unprobed baseline in the same run.

Builds tools/bench/region_cost.c, runs it bare and under `eprof record --region BIN:probed`
(which also picks up its EPROF_REGION_* probes), and prints per call:
  base   an empty function call nobody probes (same process, same run)
  func   the same function with uprobe + uretprobe + one event  -> cost = func - base
         (its first instruction, push %rbp, is emulated by the kernel)
  xol    the same where the first instruction (ret) must be single-stepped out of line
  usdt   an EPROF_REGION_BEGIN/END pair: 2 uprobes + one event    -> cost = usdt - base
Untraced, func and usdt must equal base (a USDT probe is a nop). Also checks that eprof
recorded every region (count = calls x rounds) and lost none.

With --bpftrace, the same program also runs under bpftrace with EMPTY programs on the same
probes: what the kernel's traps cost on their own, so the difference is eprof's BPF work
(per-thread stack, ring-buffer event).

  tools/bench/region_cost.py [--eprof PATH] [--calls N] [--rounds R] [--bpftrace] [--json out.json]
Run as root.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def run_bpftrace(exe, args):
    prog = "".join(f"{k}:{exe}:{f} {{}} " for k, f in (
        ("uprobe", "probed"), ("uretprobe", "probed"), ("uprobe", "probed_xol"),
        ("uretprobe", "probed_xol"), ("usdt", "eprof:region__begin"),
        ("usdt", "eprof:region__end")))
    bt = subprocess.Popen(["bpftrace", "-e", prog], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    try:
        seen = []
        for line in bt.stdout:  # "Attaching 6 probes..." once attached (warnings before)
            seen.append(line)
            if "Attaching" in line:
                break
        else:
            sys.exit(f"bpftrace failed: {''.join(seen)}")
        time.sleep(0.5)
        return json.loads(subprocess.run(args, check=True, capture_output=True,
                                         text=True).stdout)
    finally:
        bt.terminate()
        bt.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eprof", default=os.environ.get("EPROF", os.path.join(ROOT, "build", "eprof")))
    ap.add_argument("--calls", type=int, default=200000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--bpftrace", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="eprof-region-bench-")
    exe = os.path.join(tmp, "region_cost")
    subprocess.run(["cc", "-O2", "-g", "-I", os.path.join(ROOT, "include"), "-o", exe,
                    os.path.join(HERE, "region_cost.c")], check=True)
    args = [exe, str(a.calls), str(a.rounds)]
    bare = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
    data = os.path.join(tmp, "r.data")
    r = subprocess.run([a.eprof, "record", "-q", "-o", data, "--region", f"{exe}:probed",
                        "--region", f"{exe}:probed_xol", "--", *args],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"eprof record failed: {r.stderr}")
    traced = json.loads(r.stdout)
    rep = json.loads(subprocess.run([a.eprof, "report", data, "--json"], check=True,
                                    capture_output=True, text=True).stdout)
    counts = {x["name"]: x["count"] for x in rep["regions"]}
    want = a.calls * a.rounds
    out = {
        "calls_per_loop": a.calls, "rounds": a.rounds,
        "bare": bare, "traced": traced,
        "func_cost_ns": round(traced["func_ns"] - traced["base_ns"], 1),
        "xol_cost_ns": round(traced["xol_ns"] - traced["base_ns"], 1),
        "usdt_cost_ns": round(traced["usdt_ns"] - traced["base_ns"], 1),
        "untraced_usdt_extra_ns": round(bare["usdt_ns"] - bare["base_ns"], 2),
        "recorded": counts, "expected_each": want,
        "regions_lost": rep["stats"].get("regions_lost"),
    }
    print(f"baseline call            {traced['base_ns']:8.1f} ns")
    print(f"--region (uprobe+uretprobe+event) {out['func_cost_ns']:8.1f} ns per call "
          f"({traced['func_ns'] / traced['base_ns']:.0f}x the call)")
    print(f"--region, first instruction single-stepped {out['xol_cost_ns']:8.1f} ns per call")
    print(f"EPROF_REGION pair (2 USDT uprobes+event) {out['usdt_cost_ns']:8.1f} ns per region")
    print(f"untraced: EPROF_REGION pair adds {out['untraced_usdt_extra_ns']:.2f} ns "
          f"(base {bare['base_ns']:.2f} ns, pair {bare['usdt_ns']:.2f} ns)")
    print(f"recorded {counts} of {want} each, lost {out['regions_lost']}")
    if a.bpftrace:
        out["bpftrace_empty"] = bt = run_bpftrace(exe, args)
        print(f"bpftrace, empty programs: function {bt['func_ns'] - bt['base_ns']:.1f} ns, "
              f"single-stepped {bt['xol_ns'] - bt['base_ns']:.1f} ns, "
              f"USDT pair {bt['usdt_ns'] - bt['base_ns']:.1f} ns")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    ok = all(counts.get(k) == want for k in ("probed", "probed_xol", "bench"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Cost of `eprof record --offcpu` on a context-switch storm.

The workload (offcpu_pingpong.c, built here) hands a token between two threads over
pipes; the work per turn sets the rate, about 50,000 context switches per second by
default on this kind of machine (the rate of the bare run is printed). Runs bare, then
each configuration, interleaved for N rounds, and reports per configuration the median
over rounds of the ratio to the bare run of the same round: wall time of the ping-pong
(measured inside the workload) and CPU time of the whole tree (profiler included).

  tools/bench/offcpu.py                     # 5 rounds
  tools/bench/offcpu.py --rounds 7 --work 6000 --turns 40000 --json out.json
Run as root. eprof: --eprof PATH, $EPROF, or ./build/eprof.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
import benchlib as bl  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

CONFIGS = {
    "record": [],
    "record --offcpu": ["--offcpu"],
    "--offcpu-stack-rate 0": ["--offcpu-stack-rate", "0"],
    "--offcpu-stack-rate 0 -g fp": ["--offcpu-stack-rate", "0", "-g", "fp"],
    "--offcpu-min-us 1000": ["--offcpu-min-us", "1000"],
}


def build(tmp):
    exe = os.path.join(tmp, "pingpong")
    subprocess.run(["cc", "-O2", "-pthread", "-o", exe, os.path.join(HERE, "offcpu_pingpong.c")],
                   check=True)
    return exe


def run_one(argv, tmp, name):
    out = os.path.join(tmp, name + ".out")
    r = bl.run_tree(argv, stdout=out, stderr_path=os.path.join(tmp, name + ".err"))
    with open(out) as f:
        secs, cs_rate, _ = f.read().split()
    return float(secs), float(cs_rate), r.cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eprof")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--turns", type=int, default=40000)
    ap.add_argument("--work", type=int, default=6000, help="loop iterations per turn")
    ap.add_argument("--freq", type=int, default=99)
    ap.add_argument("--json")
    a = ap.parse_args()
    eprof = a.eprof or os.environ.get("EPROF") or os.path.join(HERE, "..", "..", "build", "eprof")
    res = {k: {"wall": [], "cpu": [], "lost": [], "recorded": [], "short": [], "nostack": []}
           for k in CONFIGS}
    bare_rates = []
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(tmp)
        wl = [exe, str(a.turns), str(a.work)]
        for r in range(a.rounds):
            bsecs, brate, bcpu = run_one(wl, tmp, "bare")
            bare_rates.append(brate)
            for name, extra in CONFIGS.items():
                data = os.path.join(tmp, "o.eprof")
                argv = [eprof, "record", "-q", "-F", str(a.freq), *extra, "-o", data, "--", *wl]
                secs, _, cpu = run_one(argv, tmp, "cfg")
                res[name]["wall"].append(secs / bsecs)
                res[name]["cpu"].append(cpu / bcpu)
                rep = bl.eprof_report(eprof, data, limit=1)
                st = rep.get("stats", {})
                res[name]["lost"].append(st.get("offcpu_events_lost", 0))
                res[name]["short"].append(st.get("offcpu_short_skipped", 0))
                res[name]["nostack"].append(st.get("offcpu_no_stack", 0))
                res[name]["recorded"].append((rep.get("offcpu") or {}).get("intervals", 0))
            print(f"round {r + 1}/{a.rounds}: bare {bsecs:.3f} s, "
                  f"{brate:,.0f} context switches/s", file=sys.stderr)
    print(f"ping-pong: {a.turns} turns, work {a.work}; bare run: "
          f"{bl.median(bare_rates):,.0f} context switches/s (median); -F {a.freq}")
    print(f"{'configuration':30} {'wall':>7} {'CPU':>7} {'recorded':>9} {'no stack':>9} "
          f"{'skipped':>8} {'lost':>6}")
    summary = {"bare_cs_per_s": bl.median(bare_rates), "configs": {}}
    for name, v in res.items():
        row = {k: bl.median(x) for k, x in v.items()}
        summary["configs"][name] = row
        print(f"{name:30} {row['wall']:7.3f} {row['cpu']:7.3f} {row['recorded']:9.0f} "
              f"{row['nostack']:9.0f} {row['short']:8.0f} {row['lost']:6.0f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()

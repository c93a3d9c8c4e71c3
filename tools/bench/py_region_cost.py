#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Cost of --region py:FUNC (docs/python.md), and of the exact alternative it does not use.

Two self-timed workloads, each inside a function work():
  calls     fib(25) 60 times: a Python call every ~40 ns
  switches  time.sleep(0.0002) 3000 times: two context switches per iteration
Tools, interleaved per round (bare A B C ..., N rounds); each figure is the median over rounds of
the ratio of the work loop's own time to the bare run of the same round:
  eprof              record -F 999 (Python frames, no region)
  eprof py:work      + --region py:work (one region per run; names compared once per code object,
                     two pointer reads per frame and sample, a frame walk at each switch-out)
  eprof py:fib       + --region py:fib (every frame of the stack matches: the worst case)
  usdt-traps         bpftrace with EMPTY programs on python:function__entry/__return (USDT with
                     semaphores: only interpreters built with dtrace, here Debian's python3.11):
                     the floor of an exact method that traps at every Python call
Then, with the kernel's BPF run-time statistics (as tools/bench/python.py does): ns per run of
on_sample() while eprof samples a fib loop by PID with and without --region py:fib, and ns per
run of py_region_switch (the sched_switch program: the switch-out walk) during the switches
workload.
Run as root. Only ratios within one run mean anything on a shared machine.

  tools/bench/py_region_cost.py [--rounds 5] [--json out.json]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
import benchlib as bl  # noqa: E402

SCRIPT = r"""
import sys, time
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
def work(kind):
    if kind == "calls":
        for _ in range(60):
            fib(25)
    else:
        for _ in range(3000):
            time.sleep(0.0002)
t0 = time.monotonic()
work(sys.argv[1])
print(time.monotonic() - t0)
time.sleep(0.5)  # time for the bench to read the BPF statistics before the recorder stops
"""

PYTHONS = (("debian-3.11", "/usr/bin/python3.11"), ("pyenv-3.12", None))


def argv_for(tool, eprof, py, script, kind, out):
    rec = [eprof, "record", "-F", str(bl.FREQ), "-q", "-o", out]
    if tool == "bare":
        return [py, script, kind]
    if tool == "eprof":
        return rec + ["--", py, script, kind]
    if tool == "eprof py:work":
        return rec + ["--region", "py:work", "--", py, script, kind]
    if tool == "eprof py:fib":
        return rec + ["--region", "py:fib", "--", py, script, kind]
    if tool == "usdt-traps":
        prog = (f"usdt:{py}:python:function__entry {{}} "
                f"usdt:{py}:python:function__return {{}}")
        return ["bpftrace", "-q", "-e", prog, "-c", f"{py} {script} {kind}"]
    raise ValueError(tool)


def seconds(argv, cwd):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                       timeout=900)
    if r.returncode:
        raise RuntimeError(f"exit {r.returncode}: {' '.join(argv)}\n{r.stderr[-2000:]}")
    return float(r.stdout.strip().splitlines()[-1])


def switch_progs():
    """{id: (run_time_ns, run_cnt)} of the loaded programs named py_region_switch."""
    r = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True)
    try:
        progs = json.loads(r.stdout) if r.stdout.strip() else []
    except ValueError:
        progs = []
    return {p["id"]: (p.get("run_time_ns", 0), p.get("run_cnt", 0)) for p in progs
            if p.get("name", "").startswith("py_region_switc")}


def switch_cost(eprof, py, script, tmp):
    """py_region_switch's run time (on all CPUs, for every task switched) per sleep of the
    switches workload (3000 switch-outs of the target): an upper bound per target switch."""
    import time
    before = set(switch_progs())
    e = subprocess.Popen(argv_for("eprof py:work", eprof, py, script, "switches",
                                  os.path.join(tmp, "s.data")),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp)
    last = None
    try:
        while e.poll() is None:
            new = {k: v for k, v in switch_progs().items() if k not in before}
            if len(new) == 1:
                last = next(iter(new.values()))
            time.sleep(0.1)
    finally:
        e.wait(timeout=120)
    return last[0] / 3000 if last and last[1] else None


def has_usdt(py):
    r = subprocess.run(["readelf", "-n", py], capture_output=True, text=True)
    return "function__entry" in r.stdout and shutil.which("bpftrace") is not None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--eprof")
    ap.add_argument("--json")
    ap.add_argument("--stats-only", action="store_true",
                    help="only the BPF run-time statistics, no wall-time rounds")
    args = ap.parse_args()
    if os.geteuid() != 0:
        bl.die("run as root")
    eprof = bl.find_eprof(args.eprof)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "work.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        for name, py in PYTHONS if not args.stats_only else ():
            py = py if py and os.access(py, os.X_OK) else (None if py else bl.find_python("3.12.1"))
            if not py:
                print(f"{name}: not installed, skipped")
                continue
            tools = ["eprof", "eprof py:work", "eprof py:fib"]
            if has_usdt(py):
                tools.append("usdt-traps")
            for kind in ("calls", "switches"):
                ratios = {t: [] for t in tools}
                bare = []
                for r in range(args.rounds):
                    b = seconds(argv_for("bare", eprof, py, script, kind, None), tmp)
                    bare.append(b)
                    for t in tools:
                        out = os.path.join(tmp, "r.data")
                        ratios[t].append(seconds(argv_for(t, eprof, py, script, kind, out),
                                                 tmp) / b)
                    print(f"  {name} {kind} round {r + 1}: bare {b:.3f} s, " +
                          ", ".join(f"{t} x{ratios[t][-1]:.3f}" for t in tools), flush=True)
                res = {"python": name, "workload": kind, "bare_s": bl.median(bare),
                       "ratio": {t: bl.median(v) for t, v in ratios.items()}}
                results.append(res)
                print(f"{name} {kind}: bare {res['bare_s']:.3f} s; " +
                      ", ".join(f"{t} x{v:.3f}" for t, v in res["ratio"].items()), flush=True)
    stats = "/proc/sys/kernel/bpf_stats_enabled"
    if os.path.exists(stats) and shutil.which("bpftool"):
        import python as pyb  # tools/bench/python.py: on_sample cost by BPF run-time stats
        with open(stats) as f:
            old = f.read().strip()
        try:
            with open(stats, "w") as f:
                f.write("1")
            with tempfile.TemporaryDirectory() as tmp:
                script = os.path.join(tmp, "work.py")
                with open(script, "w") as f:
                    f.write(SCRIPT)
                for name, py in PYTHONS:
                    py = py if py and os.access(py, os.X_OK) else (
                        None if py else bl.find_python("3.12.1"))
                    if not py:
                        continue
                    res = {"python": name, "ns_per_sample": {}, "ns_per_switch": []}
                    for label, extra in (("eprof", []), ("eprof py:fib", ["--region", "py:fib"])):
                        vals = [c[0] for c in (pyb.bpf_cost(eprof, py, tmp, extra)
                                               for _ in range(args.rounds)) if c]
                        res["ns_per_sample"][label] = bl.median(vals) if vals else None
                    vals = [c for c in (switch_cost(eprof, py, script, tmp)
                                        for _ in range(args.rounds)) if c]
                    res["ns_per_switch"] = bl.median(vals) if vals else None
                    results.append(res)
                    print(f"{name}: on_sample ns/target sample " +
                          ", ".join(f"{k} {v:.0f}" if v else f"{k} -"
                                    for k, v in res["ns_per_sample"].items()) +
                          f"; py_region_switch ns per target switch-out "
                          f"{res['ns_per_switch'] or 0:.0f}",
                          flush=True)
        finally:
            with open(stats, "w") as f:
                f.write(old)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()

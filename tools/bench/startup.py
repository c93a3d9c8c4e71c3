#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Start-up cost of a record (docs/commands/record.md, issue 32's target: 0.15 s, 0.25 s
with --mem).

`eprof record -o F -- /bin/true` in several configurations (plain, --mem, --mem=1, --offcpu,
--io, a few together, the least: --no-metrics --no-python --no-cuda --no-auto-regions), each
run N rounds; wall time (spawn to reap) and CPU time (user + system of eprof and what it
reaped) are the medians. /bin/true runs for ~1 ms, so what is measured is the recorder's
start-up (BPF load, /proc scans, attach) and its end (detach, write).

Peers measured in the same rounds, interleaved: `perf record -g -o F -- /bin/true` and, when
installed, `bpftrace -e 'BEGIN { exit(); }'` (its own start-up: parse, compile, load, attach).
--base PATH adds a second eprof binary (a build of main, say), interleaved with the first, so
the two are compared on the same machine at the same moment.

  tools/bench/startup.py [--rounds 7] [--eprof PATH] [--base PATH] [--configs plain,mem,...]
                         [--json F]
Run as root. Machines here are noisy: compare only figures of one run.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the tree
import benchlib as bl  # noqa: E402

CONFIGS = {
    "plain": [],
    "mem": ["--mem"],
    "mem1": ["--mem=1"],
    "offcpu": ["--offcpu"],
    "io": ["--io"],
    "offcpu+mem": ["--offcpu", "--mem"],
    "offcpu+mem+io": ["--offcpu", "--mem", "--io"],
    "least": ["--no-metrics", "--no-python", "--no-cuda", "--no-auto-regions"],
}
TARGET = {"plain": 0.15, "mem": 0.25}


def eprof_argv(eprof, extra, out):
    return [eprof, "record", "-q", "-o", out] + extra + ["--", "/bin/true"]


def peers(tmp):
    p = {}
    if os.access(bl.PERF, os.X_OK):
        p["perf record -g"] = [bl.PERF, "record", "-q", "-g", "-o", os.path.join(tmp, "perf.data"),
                               "--", "/bin/true"]
    bt = shutil.which("bpftrace")
    if bt:
        p["bpftrace BEGIN{exit()}"] = [bt, "-e", "BEGIN { exit(); }"]
    return p


def measure(args):
    tmp = tempfile.mkdtemp(prefix="eprof-startup-")
    out = os.path.join(tmp, "eprof.data")
    err = os.path.join(tmp, "stderr")
    bins = {"eprof": args.eprof}
    if args.base:
        bins["base"] = args.base
    runs = {}  # (label, config) -> [Run]
    cmds = []
    for cfg in args.configs:
        for label, exe in bins.items():
            cmds.append(((label, cfg), eprof_argv(exe, CONFIGS[cfg], out)))
    for name, argv in peers(tmp).items():
        cmds.append(((name, ""), argv))
    for argv in (c[1] for c in cmds):  # warm the page cache and the kernel's BTF
        bl.run_tree(argv, stderr_path=err, cwd=tmp)
    for r in range(args.rounds):
        # each round in another order: a burst of load does not fall on one row alone
        order = cmds[r % len(cmds):] + cmds[:r % len(cmds)]
        for key, argv in order:
            runs.setdefault(key, []).append(bl.run_tree(argv, stderr_path=err, cwd=tmp))
    shutil.rmtree(tmp, ignore_errors=True)
    rows = []
    for (label, cfg), rs in runs.items():
        rows.append({"binary": label, "config": cfg,
                     "args": " ".join(CONFIGS.get(cfg, [])),
                     "wall_s": bl.median([x.wall for x in rs]),
                     "cpu_s": bl.median([x.cpu for x in rs]),
                     "wall_min_s": min(x.wall for x in rs),
                     "rounds": len(rs), "target_wall_s": TARGET.get(cfg) if label == "eprof" else None})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eprof")
    ap.add_argument("--base", help="a second eprof binary, measured in the same rounds")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--configs", default=",".join(CONFIGS),
                    help="comma-separated, of: " + ", ".join(CONFIGS))
    ap.add_argument("--json")
    args = ap.parse_args()
    if os.geteuid() != 0:
        bl.die("run as root (eprof record loads BPF)")
    args.eprof = bl.find_eprof(args.eprof)
    args.configs = [c for c in args.configs.split(",") if c]
    for c in args.configs:
        if c not in CONFIGS:
            bl.die(f"unknown config '{c}' (known: {', '.join(CONFIGS)})")
    if args.base and not os.access(args.base, os.X_OK):
        bl.die(f"--base {args.base}: not an executable")
    if args.rounds < 1:
        bl.die("--rounds must be at least 1")
    rows = measure(args)
    print(f"# {bl.load_note()}; {args.rounds} rounds, interleaved, medians; "
          f"eprof = {args.eprof}" + (f", base = {args.base}" if args.base else ""))
    print(f"{'binary':<24} {'config':<15} {'wall s':>7} {'CPU s':>7} {'min wall':>8}  target")
    for r in rows:
        tgt = r["target_wall_s"]
        mark = "" if tgt is None else f"{tgt:.2f} {'ok' if r['wall_s'] <= tgt else 'MISSED'}"
        print(f"{r['binary']:<24} {r['config']:<15} {r['wall_s']:7.3f} {r['cpu_s']:7.3f} "
              f"{r['wall_min_s']:8.3f}  {mark}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load": bl.load_note(), "rounds": args.rounds, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    try:
        main()
    except bl.BenchError as e:
        bl.die(str(e))

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Profiling overhead of eprof against perf on the workloads of BENCHMARKS.md.

For each workload, runs bare, then each profiler, interleaved (bare A B C ..., bare
A B C ..., N rounds) and reports per tool the median over rounds of the pairwise
ratio to the bare run of the same round, for wall time and for the CPU time of the
whole process tree (profiler + workload, from wait4's rusage). Also the output
size, bytes per sample, samples per expected sample (bare CPU s x 999 Hz) and lost
samples, and the fixed start-up + tear-down cost around /bin/true.

  tools/bench/overhead.py                      # xz, gcc, py; 5 rounds (~10 min)
  tools/bench/overhead.py --quick              # 2 rounds, short inputs (< 2 min)
  tools/bench/overhead.py --workloads xz,py --rounds 7 --json out.json
  tools/bench/overhead.py --tools eprof,perf-g,perf-g-nobpf
Run as root (both profilers need it). eprof: --eprof PATH, $EPROF, or
/tmp/build-bench/eprof. Machines here are noisy: only ratios within one run mean
anything.
"""
import argparse
import json
import os
import re
import shlex
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the tree
import benchlib as bl  # noqa: E402

DEFAULT_TOOLS = ["perf-g", "perf-dwarf", "bpftrace", "eprof", "eprof-fp"]
ALL_TOOLS = ["perf-g", "perf-g-nobpf", "perf-dwarf", "perf-dwarf-nobpf", "perf-nocg",
             "bpftrace", "eprof", "eprof-fp"]
BPFTRACE = "/usr/bin/bpftrace"
# The one-liner of BENCHMARKS.md: frame-pointer stacks counted in a BPF map, printed at exit.
BPFTRACE_PROG = "profile:hz:999 { @[ustack, kstack] = count(); }"
# Figures of BENCHMARKS.md (wall ratio, median of 5 pairs) for side-by-side reading.
REFERENCE = {
    "perf-g": {"xz": 1.120, "py": 1.153, "gcc": 1.145},
    "perf-g-nobpf": {"xz": 1.057, "py": 1.074, "gcc": 1.070},
    "perf-dwarf": {"xz": 1.141, "py": 1.145, "gcc": 1.147},
    "perf-dwarf-nobpf": {"xz": 1.063, "py": 1.056, "gcc": 1.055},
    "perf-nocg": {"xz": 1.056, "py": 1.063, "gcc": 1.056},
    "libbpf-tools profile": {"xz": 1.041, "py": 1.022, "gcc": 1.035},
    "bpftrace": {"xz": 1.071, "py": 1.089, "gcc": 1.081},
}


def tool_argv(tool, eprof, out, cmd):
    """The whole command line of a tool profiling cmd."""
    f = str(bl.FREQ)
    if tool == "bpftrace":
        # bpftrace runs one command given as a string (-c), split on spaces with no shell
        # quoting, and exits when it does: a script that execs the real command keeps
        # arguments with spaces or newlines (the py workload) intact.
        script = out + ".sh"
        with open(script, "w") as fh:
            fh.write("exec " + " ".join(shlex.quote(x) for x in cmd) + "\n")
        return [BPFTRACE, "-o", out, "-e", BPFTRACE_PROG.replace("999", f),
                "-c", f"/bin/sh {script}"]
    perf = [bl.PERF, "record", "-F", f, "-o", out]
    table = {
        "perf-g": perf + ["-g"],
        "perf-g-nobpf": perf + ["-g", "--no-bpf-event"],
        "perf-dwarf": perf + ["--call-graph", "dwarf"],
        "perf-dwarf-nobpf": perf + ["--call-graph", "dwarf", "--no-bpf-event"],
        "perf-nocg": perf,
        "eprof": [eprof, "record", "-F", f, "-q", "-o", out],
        "eprof-fp": [eprof, "record", "-F", f, "-g", "fp", "-q", "-o", out],
    }
    return table[tool] + ["--"] + cmd


def inspect_output(tool, eprof, out):
    """Size, sample count and loss of a profiler's output file."""
    info = {"size": os.path.getsize(out)}
    if tool.startswith("eprof"):
        rep = bl.eprof_report(eprof, out, limit=1)
        n = rep.get("samples", 0)
        info.update(samples=n, lost=rep.get("lost", 0),
                    truncated=rep.get("truncated_samples", 0),
                    unknown_leaf=rep.get("unknown_leaf_samples", 0),
                    ustack_err=rep.get("stats", {}).get("user_stack_errors", 0))
    elif tool == "bpftrace":
        # Its map, printed at exit: "@[\n stack...\n]: count" per distinct stack pair.
        with open(out, errors="replace") as f:
            n = sum(int(m) for m in re.findall(r"^\]: (\d+)$", f.read(), re.M))
        info.update(samples=n, lost=0)
    else:
        n, lost = bl.perf_sample_count(out)
        info.update(samples=n, lost=lost)
    info["bytes_per_sample"] = info["size"] / n if n else None
    return info


def measure(argv, tmp, name):
    """Runs argv once, its stderr kept in tmp for the error message."""
    err = os.path.join(tmp, name + ".err")
    return bl.run_tree(argv, stderr_path=err)


def clean(*paths):
    for p in paths:
        for q in (p, p + ".old", p + ".sh"):
            try:
                os.unlink(q)
            except FileNotFoundError:
                pass


def run_workload(name, cmd, tools, rounds, eprof, tmp, log):
    rows = {t: [] for t in ["bare"] + tools}
    for r in range(rounds):
        bare = measure(cmd, tmp, "bare")
        rows["bare"].append({"wall": bare.wall, "cpu": bare.cpu})
        line = [f"  round {r + 1}/{rounds}: bare {bare.wall:.2f}s"]
        for t in tools:
            out = os.path.join(tmp, f"{t}.data")
            clean(out)
            try:
                run = measure(tool_argv(t, eprof, out, cmd), tmp, t)
                info = inspect_output(t, eprof, out)
            finally:
                clean(out)
            info.update(wall=run.wall, cpu=run.cpu, wall_ratio=run.wall / bare.wall,
                        cpu_ratio=run.cpu / bare.cpu if bare.cpu else None,
                        sample_ratio=info["samples"] / (bare.cpu * bl.FREQ) if bare.cpu else None)
            rows[t].append(info)
            line.append(f"{t} {run.wall / bare.wall:.3f}")
        log(" ".join(line))
    return rows


def summarize(rows, tools):
    s = {}
    bare = rows["bare"]
    s["bare"] = {"wall": bl.median([x["wall"] for x in bare]),
                 "cpu": bl.median([x["cpu"] for x in bare])}
    for t in tools:
        xs = rows[t]
        s[t] = {k: bl.median([x.get(k) for x in xs])
                for k in ("wall_ratio", "cpu_ratio", "wall", "cpu", "size", "samples",
                          "bytes_per_sample", "sample_ratio", "lost", "truncated", "unknown_leaf",
                          "ustack_err")
                if any(x.get(k) is not None for x in xs)}
        s[t]["lost_max"] = max(x.get("lost", 0) for x in xs)
    return s


def fixed_costs(tools, eprof, n, tmp, log):
    """Median wall of `tool -- /bin/true` and bare /bin/true."""
    res = {"bare": []}
    for t in tools:
        res[t] = []
    for i in range(n):
        res["bare"].append(measure(["/bin/true"], tmp, "true").wall)
        for t in tools:
            out = os.path.join(tmp, f"true-{t}.data")
            clean(out)
            try:
                res[t].append(measure(tool_argv(t, eprof, out, ["/bin/true"]), tmp, t).wall)
            finally:
                clean(out)
    med = {t: bl.median(v) for t, v in res.items()}
    log("  " + "  ".join(f"{t} {v:.3f}s" for t, v in med.items()))
    return med


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, help="rounds per workload (default 5, --quick 2)")
    ap.add_argument("--workloads", default="xz,gcc,py", help="comma list of xz,gcc,py")
    ap.add_argument("--tools", default=",".join(DEFAULT_TOOLS),
                    help=f"comma list of {','.join(ALL_TOOLS)}")
    ap.add_argument("--quick", action="store_true",
                    help="2 rounds, xz on 4 MB, gcc -O0, fib(30), /bin/true x3")
    ap.add_argument("--true-runs", type=int, help="runs around /bin/true (default 10, --quick 3)")
    ap.add_argument("--no-true", action="store_true", help="skip the /bin/true fixed cost")
    ap.add_argument("--python", help="pyenv CPython version (3.11.7, 3.12.1, 3.13.0)")
    ap.add_argument("--fib", type=int, help="fib(N) for the py workload (default 33, --quick 30)")
    ap.add_argument("--eprof", help="eprof binary")
    ap.add_argument("--json", help="write all measurements to this file")
    ap.add_argument("--tmpdir", help="where outputs are written (default $TMPDIR or /tmp)")
    a = ap.parse_args()

    rounds = a.rounds or (2 if a.quick else 5)
    true_runs = a.true_runs or (3 if a.quick else 10)
    tools = [t for t in a.tools.split(",") if t]
    for t in tools:
        if t not in ALL_TOOLS:
            bl.die(f"unknown tool {t} (known: {', '.join(ALL_TOOLS)})")
    if "bpftrace" in tools and not os.access(BPFTRACE, os.X_OK):
        if a.tools != ",".join(DEFAULT_TOOLS):
            bl.die(f"{BPFTRACE} not found: apt-get install bpftrace")
        print(f"note: {BPFTRACE} not found (apt-get install bpftrace): left out", file=sys.stderr)
        tools.remove("bpftrace")
    if os.geteuid() != 0:
        bl.die("run as root: perf and eprof both need it for these measurements")
    eprof = bl.find_eprof(a.eprof)
    bl.prepare_workloads()
    wls = bl.workloads(quick=a.quick, py_version=a.python, fib_n=a.fib)
    names = [w for w in a.workloads.split(",") if w]
    for w in names:
        if w not in ("xz", "gcc", "py"):
            bl.die(f"unknown workload {w}")
        if w not in wls:
            bl.die(f"workload {w} unavailable (no pyenv CPython {a.python or '3.11.7/3.12.1/3.13.0'})")

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    log(f"eprof: {eprof}\n{bl.load_note()}; {rounds} rounds; tools: bare {' '.join(tools)}")
    results = {"eprof": eprof, "rounds": rounds, "quick": a.quick, "tools": tools,
               "load_before": bl.load_note(), "workloads": {}}
    failed = False
    with tempfile.TemporaryDirectory(prefix="eprof-overhead-", dir=a.tmpdir) as tmp:
        for w in names:
            cmd = wls[w]
            log(f"{w}: {shown(cmd)}")
            try:
                rows = run_workload(w, cmd, tools, rounds, eprof, tmp, log)
            except bl.BenchError as e:
                log(f"FAILED: {e}")
                failed = True
                continue
            results["workloads"][w] = {"cmd": cmd, "runs": rows, "summary": summarize(rows, tools)}
        if not a.no_true:
            log(f"/bin/true fixed cost (median of {true_runs}):")
            try:
                results["true"] = fixed_costs(tools, eprof, true_runs, tmp, log)
            except bl.BenchError as e:
                log(f"FAILED: {e}")
                failed = True
    results["load_after"] = bl.load_note()

    report(results, tools, names)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
        print(f"\nmeasurements written to {a.json}")
    if failed:
        print("\nSOME RUNS FAILED (see above)")
        sys.exit(1)


def shown(cmd):
    return " ".join(repr(c) if any(ch in c for ch in " \n'") else c for c in cmd)


def fnum(x, fmt):
    return "-" if x is None or x != x else format(x, fmt)


def report(res, tools, names):
    print(f"\n# Overhead at {bl.FREQ} Hz: median over {res['rounds']} rounds of the pairwise "
          f"ratio to the bare run of the same round")
    print(f"# {res['load_before']} (before), {res['load_after']} (after)")
    for w in names:
        if w not in res["workloads"]:
            continue
        s = res["workloads"][w]["summary"]
        print(f"\n## {w}: bare wall {s['bare']['wall']:.2f} s, CPU {s['bare']['cpu']:.2f} s")
        print(f"{'tool':18} {'wall x':>7} {'CPU x':>7} {'ref':>6} {'output':>9} {'B/sample':>9} "
              f"{'samples':>8} {'smp/exp':>7} {'lost':>5}  notes")
        for t in tools:
            x = s[t]
            ref = REFERENCE.get(t, {}).get(w)
            note = ""
            if t.startswith("eprof") and x.get("samples"):
                note = (f"truncated {100 * x.get('truncated', 0) / x['samples']:.1f}%, "
                        f"unknown leaf {100 * x.get('unknown_leaf', 0) / x['samples']:.1f}%")
            if x.get("lost_max"):
                note += f" LOST up to {x['lost_max']}"
            print(f"{t:18} {fnum(x.get('wall_ratio'), '.3f'):>7} {fnum(x.get('cpu_ratio'), '.3f'):>7} "
                  f"{fnum(ref, '.3f'):>6} {bl.fmt_size(x.get('size', float('nan'))):>9} "
                  f"{fnum(x.get('bytes_per_sample'), '.1f'):>9} {fnum(x.get('samples'), '.0f'):>8} "
                  f"{fnum(x.get('sample_ratio'), '.2f'):>7} {fnum(x.get('lost'), '.0f'):>5}  {note}")
    if "true" in res:
        t = res["true"]
        print("\n## start-up + tear-down around /bin/true (median wall; minus bare)")
        for k, v in t.items():
            extra = "" if k == "bare" else f"   +{v - t['bare']:.3f} s"
            print(f"{k:18} {v:7.3f} s{extra}")
        print("   (BENCHMARKS.md: perf 1.09 s default, 0.18 s --no-bpf-event; bpftrace 0.31 s; "
              "libbpf-tools profile 0.08 s)")

    # Summary: one line per tool across workloads, and eprof against perf -g of this run.
    print("\n## summary (wall ratio to bare; ref = BENCHMARKS.md)")
    hdr = "".join(f"{w:>14}" for w in names if w in res["workloads"])
    print(f"{'tool':18}{hdr}")
    for t in tools:
        cells = []
        for w in names:
            if w not in res["workloads"]:
                continue
            v = res["workloads"][w]["summary"][t].get("wall_ratio")
            ref = REFERENCE.get(t, {}).get(w)
            cells.append(f"{fnum(v, '.3f')}" + (f" ({ref:.3f})" if ref else "        "))
        print(f"{t:18}" + "".join(f"{c:>14}" for c in cells))
    for t in [x for x in tools if x.startswith("eprof")]:
        for base in [x for x in tools if x.startswith("perf") or x == "bpftrace"]:
            diffs = []
            for w in names:
                if w in res["workloads"]:
                    s = res["workloads"][w]["summary"]
                    diffs.append(f"{w} {s[t]['wall_ratio'] - s[base]['wall_ratio']:+.3f}")
            print(f"{t} minus {base}: " + ", ".join(diffs))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Overhead of Python stack sampling at 999 Hz on a pure-Python loop (docs/python.md).

For each CPython (3.11, 3.12, 3.13 from ~/.pyenv), runs a recursive fib loop
bare and under each profiler, interleaved (bare A B C, bare A B C, ... N rounds),
and reports per tool the median over rounds of the ratio to the bare run of the
same round. The time compared is the one the script measures around its own
work loop, so profiler start-up and tear-down are left out: what remains is
the per-sample cost the target pays (BPF runs in the sampled thread's context).

  tools/bench/python.py                 # 5 rounds, ~2 s of work per run
  tools/bench/python.py --rounds 3 --versions 3.12.1 --json out.json
Tools: eprof (Python frames, the default), eprof --no-python, and on 3.12+
perf record -F 999 -g with the interpreter run as python -X perf.
Run as root. Only ratios within one run mean anything on these noisy machines.

Because the wall ratios of a 2-core VM shared with other jobs swing by tens of
percent, the script also measures the cost of on_sample() itself with the
kernel's BPF run-time statistics (kernel.bpf_stats_enabled, read from the
fdinfo of the program that our eprof process holds) while eprof samples a running
fib loop by PID: all of the program's run time (on every CPU, other tasks'
samples included) divided by the target's samples (its CPU seconds x 999),
with and without Python frames; ns x 999 Hz is then an upper bound of the
share of the target's CPU time the sampling takes.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
import benchlib as bl  # noqa: E402

SCRIPT = r"""
import sys, time
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
t0 = time.perf_counter()
for _ in range({reps}):
    fib(25)
print(time.perf_counter() - t0)
"""


def tool_argv(tool, eprof, py, script, out):
    if tool == "bare":
        return [py, script]
    if tool == "eprof":
        return [eprof, "record", "-F", str(bl.FREQ), "-q", "-o", out, "--", py, script]
    if tool == "eprof-no-python":
        return [eprof, "record", "-F", str(bl.FREQ), "-q", "-o", out, "--no-python", "--", py,
                script]
    if tool == "perf-g+Xperf":
        return [bl.PERF, "record", "-F", str(bl.FREQ), "-g", "-q", "-o", out, "--", py, "-X",
                "perf", script]
    raise ValueError(tool)


def work_seconds(argv, tmp):
    """The work loop's own time, printed by the script as its last line."""
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp,
                       timeout=600)
    if r.returncode:
        raise RuntimeError(f"exit {r.returncode}: {' '.join(argv)}\n{r.stderr[-2000:]}")
    return float(r.stdout.strip().splitlines()[-1])


LOOP = r"""
import sys, time
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
end = time.monotonic() + float(sys.argv[1])
print("ready", flush=True)
while time.monotonic() < end:
    fib(20)
"""


def on_sample_stats(eprof_pid):
    """(run_time_ns, run_cnt) of eprof_pid's perf_event program (on_sample), from the fdinfo
    of its program fds, or None."""
    fddir = f"/proc/{eprof_pid}/fdinfo"
    try:
        fds = os.listdir(fddir)
    except OSError:
        return None
    for fd in fds:
        try:
            with open(os.path.join(fddir, fd)) as f:
                kv = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        except OSError:
            continue
        if kv.get("prog_type", "").strip() == "7" and "run_cnt" in kv:  # BPF_PROG_TYPE_PERF_EVENT
            return int(kv["run_time_ns"]), int(kv["run_cnt"])
    return None


def cpu_seconds(pid):
    """utime + stime of a process, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bpf_cost(eprof, py, tmp, extra, seconds=3.0):
    """ns per on_sample() run while eprof samples a fib loop by PID."""
    import time
    script = os.path.join(tmp, "fib_forever.py")
    with open(script, "w") as f:
        f.write(LOOP)
    p = subprocess.Popen([py, script, "90"], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    out = os.path.join(tmp, "cost.data")
    e = subprocess.Popen([eprof, "record", "-p", str(p.pid), "-F", str(bl.FREQ), "-q", "-o", out,
                          "-d", "80", *extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        a = None
        deadline = time.monotonic() + 60
        while a is None and time.monotonic() < deadline:
            time.sleep(0.2)
            a = on_sample_stats(e.pid)
        time.sleep(1.0)  # past attach and the first thread scan
        a = on_sample_stats(e.pid)
        c0 = cpu_seconds(p.pid)
        time.sleep(seconds)
        b = on_sample_stats(e.pid)
        dt = cpu_seconds(p.pid) - c0
    finally:
        e.terminate()
        e.wait(timeout=60)
        p.kill()
        p.wait()
    if not a or not b or b[1] <= a[1]:
        return None
    # The program runs on every CPU's timer, for other tasks too (they return at once): all of
    # its time is charged to the target's samples (its CPU seconds x 999), an upper bound.
    if dt <= 0.5:
        return None
    return (b[0] - a[0]) / (dt * bl.FREQ), b[1] - a[1]


def python_samples(eprof, path):
    rep = json.loads(subprocess.run([eprof, "report", path, "--json", "--limit", "1"],
                                    capture_output=True, text=True, check=True).stdout)
    return rep["samples"], rep["stats"].get("python_samples", 0)


def bench_version(ver, args, eprof, tmp):
    py = bl.find_python(ver)
    if not py:
        print(f"{ver}: not installed, skipped")
        return None
    script = os.path.join(tmp, "fib_loop.py")
    with open(script, "w") as f:
        f.write(SCRIPT.format(reps=args.reps))
    tools = ["eprof", "eprof-no-python"]
    if ver >= "3.12" and os.access(bl.PERF, os.X_OK):
        tools.append("perf-g+Xperf")
    ratios = {t: [] for t in tools}
    bare_s = []
    py_share = []
    for r in range(0 if args.cost_only else args.rounds):
        bare = work_seconds(tool_argv("bare", eprof, py, script, None), tmp)
        bare_s.append(bare)
        for t in tools:
            out = os.path.join(tmp, f"{t}.data")
            s = work_seconds(tool_argv(t, eprof, py, script, out), tmp)
            ratios[t].append(s / bare)
            if t == "eprof":
                n, pyn = python_samples(eprof, out)
                py_share.append(pyn / n if n else 0.0)
            if os.path.exists(out):
                os.unlink(out)
        print(f"  {ver} round {r + 1}: bare {bare:.3f} s, " +
              ", ".join(f"{t} x{ratios[t][-1]:.3f}" for t in tools), flush=True)
    res = {"python": ver, "bare_s": bl.median(bare_s) if bare_s else 0,
           "ratio": {t: bl.median(v) if v else 0 for t, v in ratios.items()},
           "python_sample_share": bl.median(py_share) if py_share else 0, "ns_per_sample": {}}
    if os.path.exists("/proc/sys/kernel/bpf_stats_enabled"):
        with open("/proc/sys/kernel/bpf_stats_enabled") as f:
            old = f.read().strip()
        try:
            with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
                f.write("1")
            for name, extra in (("eprof", []), ("eprof-no-python", ["--no-python"])):
                vals = []
                for _ in range(args.rounds):
                    c = bpf_cost(eprof, py, tmp, extra)
                    if c:
                        vals.append(c[0])
                res["ns_per_sample"][name] = bl.median(vals) if vals else None
                print(f"  {ver} on_sample {name}: {vals}", flush=True)
        finally:
            with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
                f.write(old)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eprof")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=80, help="fib(25) calls per run (~2 s)")
    ap.add_argument("--versions", default=",".join(bl.PY_VERSIONS))
    ap.add_argument("--json")
    ap.add_argument("--cost-only", action="store_true", help="only the on_sample cost part")
    args = ap.parse_args()
    if os.geteuid() != 0:
        bl.die("run as root")
    eprof = bl.find_eprof(args.eprof)
    results = []
    with tempfile.TemporaryDirectory(prefix="eprof-pybench-") as tmp:
        for ver in args.versions.split(","):
            res = bench_version(ver, args, eprof, tmp)
            if res:
                results.append(res)
    if not args.cost_only:
        print(f"\nwork-loop time ratio to bare, median of {args.rounds} rounds (999 Hz):")
        print(f"{'python':8} {'bare s':>7} {'eprof':>7} {'no-py':>7} {'perf+Xperf':>10} {'py samples':>10}")
    for r in ([] if args.cost_only else results):
        rt = r["ratio"]
        perf = f"{rt['perf-g+Xperf']:.3f}" if "perf-g+Xperf" in rt else "-"
        print(f"{r['python']:8} {r['bare_s']:7.3f} {rt['eprof']:7.3f} {rt['eprof-no-python']:7.3f} "
              f"{perf:>10} {100 * r['python_sample_share']:9.1f}%")
    print("\non_sample() cost, median ns per sample (BPF run-time stats), and its share of the "
          "target's CPU at 999 Hz:")
    for r in results:
        ns = r["ns_per_sample"]
        if ns.get("eprof") and ns.get("eprof-no-python"):
            print(f"{r['python']:8} with Python frames {ns['eprof']:8.0f} ns ({ns['eprof'] * 999 / 1e7:.2f}%)"
                  f"   without {ns['eprof-no-python']:8.0f} ns ({ns['eprof-no-python'] * 999 / 1e7:.2f}%)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()

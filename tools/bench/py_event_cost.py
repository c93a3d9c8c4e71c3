#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What Python frames cost in the stacks that are not CPU samples: allocations, off-CPU
intervals and their wakers (docs/python.md).

Per event, from the kernel's BPF run-time statistics (kernel.bpf_stats_enabled=1 while a
record runs, restored after; it adds two clock reads per program run, so the figures are
upper bounds): the run time of eprof's programs divided by the events they handled, with
Python frames and with --no-python, on Python workloads attached by PID:

  mem      CPython string churn (tools/bench/mem_bench.py's workload) 30 Python frames
           down, --mem=1 and --mem: mem_alloc ns per allocation call (entry and return
           programs of the session; every call is recorded with --mem=1)
  offcpu   a consumer thread blocked in q.get() for each of 4,000 items that a producer,
           30 frames down, puts after a 0.2 ms sleep; --offcpu with every interval's
           stacks (--offcpu-sample-us 0 --offcpu-stack-rate 0): offcpu_rseq +
           offcpu_waking ns per blocked interval sent (its stack, and its waker's)

and the wall-time ratio to a bare run of the same round (median of --reps, interleaved), and
the recorder's CPU time per event (decoding, unwinding, resolving Python frames; it includes
the recorder's start-up and symbolization, so it is an upper bound too).

  --torch  also the torch job (tests/fixtures/python/torch_train.py, launched, for
           --torch-seconds): training throughput under `record -F 999`, `--mem`,
           `--mem --no-python` and `--mem` with programs that return at once (the uprobe
           floor) against the bare run, median of --reps interleaved rounds.

  --depths 0,30,90  only the --mem=1 cost per allocation against the Python stack's depth
           (the workload's frames plus that many), with and without Python frames.

Usage: tools/bench/py_event_cost.py [--reps N] [--eprof PATH] [--torch] [--only mem,offcpu]
       tools/bench/py_event_cost.py --depths 0,30,90 [--reps N]
Run as root.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True
import benchlib  # noqa: E402

PY = "/usr/bin/python3"
TORCH = os.path.join(benchlib.REPO, "tests", "fixtures", "python", "torch_train.py")
STATS = "/proc/sys/kernel/bpf_stats_enabled"

# Both wait for a go-file so the recorder is attached first, then time their own work.
GO = ("import os, sys, time\n"
      "go = sys.argv[1]\n"
      "while not os.path.exists(go): time.sleep(0.002)\n"
      "os.unlink(go)\n"
      "t = time.monotonic()\n")
# Allocations made DEPTH Python frames down (ML code runs 30-60 frames deep).
DEPTH = 30
MEM_D = GO + ("def build(n):\n"
            "    return [('%d-' % i) * 120 for i in range(n)]\n"
            "def churn():\n"
            "    for r in range(6):\n"
            "        l = build(100000)\n"
            "        d = [dict(a=s, b=len(s)) for s in l]\n"
            "        del l, d\n"
            "def deep(n):\n"
            "    return deep(n - 1) if n else churn()\n"
            "deep({depth})\n"
            "print('elapsed', time.monotonic() - t)\n")
MEM = MEM_D.replace("{depth}", str(DEPTH))
# The consumer blocks in q.get() for each item; the producer, DEPTH frames down, sleeps
# 0.2 ms before each put: an off-CPU interval with a stack and a waker stack per item.
OFFCPU = GO + ("import queue, threading\n"
               "q = queue.Queue()\n"
               "def consume():\n"
               "    while q.get() is not None: pass\n"
               "def produce(n):\n"
               "    for i in range(n):\n"
               "        time.sleep(0.0002)\n"
               "        q.put(i)\n"
               "    q.put(None)\n"
               "def deep(n):\n"
               "    return deep(n - 1) if n else produce(4000)\n"
               "th = threading.Thread(target=consume); th.start()\n"
               f"deep({DEPTH}); th.join()\n"
               "print('elapsed', time.monotonic() - t)\n")

WORKLOADS = {
    "mem": (MEM, {"--mem=1": ["--mem=1"], "--mem": ["--mem"]}, ("mem_alloc",)),
    "offcpu": (OFFCPU, {"--offcpu": ["--offcpu", "--offcpu-sample-us", "0",
                                      "--offcpu-stack-rate", "0"]},
               ("offcpu_rseq", "offcpu_waking")),
}


def prog_ids(pid):
    """BPF program ids held by process pid (its fds' fdinfo)."""
    ids = []
    for fd in glob.glob(f"/proc/{pid}/fdinfo/*"):
        try:
            with open(fd) as f:
                for line in f:
                    if line.startswith("prog_id:"):
                        ids.append(int(line.split()[1]))
        except OSError:
            pass
    return ids


def prog_stats(ids):
    """{name: (run_time_ns, run_cnt)} summed over the programs of those ids."""
    out = {}
    for i in ids:
        r = subprocess.run(["bpftool", "-j", "prog", "show", "id", str(i)], capture_output=True,
                           text=True)
        if r.returncode:
            continue
        p = json.loads(r.stdout)
        t, n = out.get(p.get("name", "?"), (0, 0))
        out[p.get("name", "?")] = (t + p.get("run_time_ns", 0), n + p.get("run_cnt", 0))
    return out


def report(eprof, path):
    r = subprocess.run([eprof, "report", path, "--json", "--limit", "1"], capture_output=True,
                       text=True)
    return json.loads(r.stdout) if r.returncode == 0 else {}


def run_once(eprof, src, args, tmp, progs):
    """(seconds of work, {prog: ns}, report, recorder CPU s) of one run; args None: bare."""
    go = os.path.join(tmp, "go")
    if os.path.exists(go):
        os.unlink(go)
    target = subprocess.Popen([PY, "-c", src, go], stdout=subprocess.PIPE, text=True)
    rec, data, before = None, os.path.join(tmp, "r.eprof"), {}
    if args is not None:
        rec = subprocess.Popen([eprof, "record", "-q", *args, "-p", str(target.pid), "-o", data])
        time.sleep(1.5)
        ids = prog_ids(rec.pid)
        before = prog_stats(ids)
    open(go, "w").close()
    out, _ = target.communicate(timeout=600)
    secs = float(out.split()[-1])
    ns, rep, cpu = {}, {}, 0.0
    if rec:
        after = prog_stats(ids)
        ns = {p: after.get(p, (0, 0))[0] - before.get(p, (0, 0))[0] for p in progs}
        end = time.monotonic() + 120
        while time.monotonic() < end:
            pid, status, ru = os.wait4(rec.pid, os.WNOHANG)
            if pid:
                rec.returncode = os.waitstatus_to_exitcode(status)
                cpu = ru.ru_utime + ru.ru_stime
                break
            time.sleep(0.05)
        else:
            rec.kill()
            raise benchlib.BenchError(f"eprof record did not stop after its target: {args}")
        rep = report(eprof, data)
    return secs, ns, rep, cpu


def events_of(wl, rep):
    """Allocator calls seen (--mem), or blocked intervals sent with their stacks."""
    if wl == "mem":
        return rep.get("memory", {}).get("calls_seen", 0)
    st = rep.get("stats", {})
    return st.get("offcpu_intervals", 0) - st.get("offcpu_unsampled", 0) - \
        st.get("offcpu_no_stack", 0)


def bench_events(eprof, reps, only):
    old = open(STATS).read().strip()
    try:
        with open(STATS, "w") as f:
            f.write("1")
        for wl, (src, configs, progs) in WORKLOADS.items():
            if only and wl not in only:
                continue
            modes = {"bare": None}
            for name, args in configs.items():
                modes[name] = args
                modes[name + " --no-python"] = args + ["--no-python"]
            res = {m: [] for m in modes}
            with tempfile.TemporaryDirectory() as tmp:
                for _ in range(reps):
                    for m, args in modes.items():
                        res[m].append(run_once(eprof, src, args, tmp, progs))
            print(f"\n== {wl}: {' + '.join(progs)} (median of {reps}, interleaved)")
            print(f"{'mode':24} {'work s':>7} {'ratio':>6} {'events':>9} {'BPF ns/event':>13} "
                  f"{'recorder ns/event':>18}")
            for m in modes:
                secs = [r[0] for r in res[m]]
                ratio = [s / b[0] for s, b in zip(secs, res["bare"])]
                per = [sum(r[1].values()) / max(1, events_of(wl, r[2])) for r in res[m]]
                rec = [1e9 * r[3] / max(1, events_of(wl, r[2])) for r in res[m]]
                evs = [events_of(wl, r[2]) for r in res[m]]
                print(f"{m:24} {statistics.median(secs):7.3f} {statistics.median(ratio):6.2f} "
                      f"{statistics.median(evs):9.0f} "
                      f"{statistics.median(per) if m != 'bare' else 0:13.0f} "
                      f"{statistics.median(rec) if m != 'bare' else 0:18.0f}")
    finally:
        with open(STATS, "w") as f:
            f.write(old)


def bench_depths(eprof, reps, depths):
    """mem_alloc ns per --mem=1 allocation against the depth of the Python stack."""
    old = open(STATS).read().strip()
    res = {}
    try:
        with open(STATS, "w") as f:
            f.write("1")
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(reps):
                for d in depths:
                    src = MEM_D.replace("{depth}", str(d))
                    for m, args in (("python", ["--mem=1"]),
                                    ("no-python", ["--mem=1", "--no-python"])):
                        _, ns, rep, _ = run_once(eprof, src, args, tmp, ("mem_alloc",))
                        res.setdefault((d, m), []).append(
                            sum(ns.values()) / max(1, events_of("mem", rep)))
    finally:
        with open(STATS, "w") as f:
            f.write(old)
    print(f"\n== --mem=1 mem_alloc ns per allocation by Python depth (median of {reps})")
    print(f"{'frames below':>12} {'with Python':>12} {'--no-python':>12} {'added':>8}")
    added = []
    for d in depths:
        w, n = statistics.median(res[(d, "python")]), statistics.median(res[(d, "no-python")])
        added.append((d, w - n))
        print(f"{d:12} {w:12.0f} {n:12.0f} {w - n:8.0f}")
    if len(added) > 1:
        (d0, a0), (d1, a1) = added[0], added[-1]
        print(f"per Python frame: {(a1 - a0) / (d1 - d0):.0f} ns")


def torch_run(eprof, args, tmp, secs):
    cmd = [PY, TORCH, str(secs), "--workers", "1"]
    if args is not None:
        cmd = [eprof, "record", "-q", *args, "-o", os.path.join(tmp, "t.eprof"), "--", *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    for line in r.stdout.splitlines():
        if line.startswith("throughput"):
            return float(line.split()[1])
    raise benchlib.BenchError(f"no throughput from {cmd}: {r.stdout} {r.stderr}")


def bench_torch(eprof, reps, secs):
    modes = {"bare": None, "record -F 999": ["-F", "999"], "--mem": ["--mem"],
             "--mem --no-python": ["--mem", "--no-python"],
             "--mem (programs return at once)": ["--mem"]}
    env_null = {"--mem (programs return at once)": "1"}
    res = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(reps):
            for m, args in modes.items():
                if m in env_null:
                    os.environ["EPROF_MEM_NULL"] = env_null[m]
                try:
                    res[m].append(torch_run(eprof, args, tmp, secs))
                finally:
                    os.environ.pop("EPROF_MEM_NULL", None)
    print(f"\n== torch_train.py {secs} --workers 1 (median of {reps}, interleaved)")
    print(f"{'mode':32} {'steps/s':>8} {'ratio':>6}")
    for m in modes:
        ratio = [s / b for s, b in zip(res[m], res["bare"])]
        print(f"{m:32} {statistics.median(res[m]):8.2f} {statistics.median(ratio):6.2f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--eprof")
    ap.add_argument("--torch", action="store_true")
    ap.add_argument("--torch-seconds", type=float, default=5)
    ap.add_argument("--depths", default="", help="e.g. 0,30,90: --mem=1 cost per allocation "
                    "by the number of Python frames below the workload's (only that)")
    ap.add_argument("--only", default="", help="mem,offcpu (default: both; none with --torch "
                    "and --only torch)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        benchlib.die("run as root (BPF)")
    eprof = benchlib.find_eprof(a.eprof)
    only = [x for x in a.only.split(",") if x]
    print(benchlib.load_note())
    if a.depths:
        bench_depths(eprof, a.reps, [int(x) for x in a.depths.split(",")])
        return
    if only != ["torch"]:
        bench_events(eprof, a.reps, only)
    if a.torch or only == ["torch"]:
        bench_torch(eprof, a.reps, a.torch_seconds)


if __name__ == "__main__":
    main()

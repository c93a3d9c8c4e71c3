#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Cost of eprof record --mem on malloc-heavy programs, attached by PID (or launched).

Each workload waits for a go-file, so the profiler attaches first, then times
its own work (the wall time of the part the profiler slows down; start-up of
the profiler and the target is not in it). Modes run interleaved, A B C A B C,
and the ratio to the bare run of the same round is reported (median of --reps).

  workloads: CPython string churn, perl hashes (../shared/BENCHMARKS.md),
             and the allocator microbenchmark mem_micro.c (ns per call)
  modes:     bare, eprof --mem (default sampling), eprof --mem=1,
             eprof --mem with a uretprobe on every call (EPROF_MEM_PROBES=uretprobe),
             eprof --mem probing free's first instruction (EPROF_MEM_ENTRY=start),
             eprof --mem whose programs return at once (EPROF_MEM_NULL=1: the uprobe floor),
             eprof --mem=1 without user stack copies (EPROF_MEM_STACK=0: frame pointers only),
             eprof --mem=1 copying 2 KiB of stack per allocation (EPROF_MEM_STACK=2048),
             eprof --mem=1 matching frees in BPF as --mem=N does (EPROF_MEM_MATCH=bpf),
             bpftrace counting uprobes on malloc and free (reference),
             heaptrack (reference, --launch only)
  --launch:  eprof runs the workload (record -- CMD): sampled --mem then samples inside the
             process (libeprof_mem.so); extra modes: uprobes (--mem with
             EPROF_MEM_INTERPOSE=0, the uprobes as on attach), interp1 (--mem=1 through the
             interposer's markers, EPROF_MEM_INTERPOSE=1), chan1 (--mem=1 through the
             interposer's channel, the default since it was measured: records and in-process
             stacks on a socket, no trap; also attached), uprobes1 (--mem=1 with the
             allocator uprobes, EPROF_MEM_INTERPOSE=0: the default before; also attached),
             interp-null (the interposer preloaded with
             nothing recorded: EPROF_MEM_SAMPLE unset), interp-all (the interposer's
             markers hit on every call but nothing probed: the unprobed call cost)

Usage: tools/bench/mem_bench.py [--reps N] [--eprof PATH] [--modes a,b] [--workloads a,b]
                                [--launch]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib  # noqa: E402

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"

PY_WORK = ("for r in range(10):\n"
           "    l = [('%d-' % i) * 120 for i in range(100000)]\n"
           "    d = [dict(a=s, b=len(s)) for s in l]\n"
           "    del l, d\n")
PY = ("import os, sys, time\n"
      "go = sys.argv[1]\n"
      "while not os.path.exists(go): time.sleep(0.002)\n"
      "os.unlink(go)\n"
      "t = time.monotonic()\n" + PY_WORK +
      "print('elapsed', time.monotonic() - t)\n")
PERL = ('use Time::HiRes qw(time sleep); my $go = $ARGV[0];'
        'sleep(0.002) until -e $go; unlink $go; my $t = time;'
        'for my $r (1..5) { my %h; $h{$_} = ("x" x 100) . $_ for 1..200000; undef %h; }'
        'print "elapsed ", time - $t, "\\n";')

MODES = {
    "bare": None,
    "null": ["--mem"],
    "default": ["--mem"],
    "mem1": ["--mem=1"],
    "mem1-nostack": ["--mem=1"],
    "mem1-2k": ["--mem=1"],
    "mem1-bpfmatch": ["--mem=1"],
    "uretprobe": ["--mem"],
    "entry0": ["--mem"],
    "bpftrace": None,
    "heaptrack": None,
    "uprobes": ["--mem"],
    "interp1": ["--mem=1"],
    "chan1": ["--mem=1"],
    "uprobes1": ["--mem=1"],
    "interp-null": None,
    "interp-all": None,
}
MODE_ENV = {"uretprobe": {"EPROF_MEM_PROBES": "uretprobe"}, "entry0": {"EPROF_MEM_ENTRY": "start"},
            "null": {"EPROF_MEM_NULL": "1"}, "mem1-nostack": {"EPROF_MEM_STACK": "0"},
            "mem1-2k": {"EPROF_MEM_STACK": "2048"}, "mem1-bpfmatch": {"EPROF_MEM_MATCH": "bpf"},
            "uprobes": {"EPROF_MEM_INTERPOSE": "0"}, "interp1": {"EPROF_MEM_INTERPOSE": "1"},
            "chan1": {"EPROF_MEM_INTERPOSE": "chan"}, "uprobes1": {"EPROF_MEM_INTERPOSE": "0"}}


def workload_cmd(name, go, tmp):
    if name == "python":
        return ["/usr/bin/python3", "-c", PY, go]
    if name == "perl":
        return ["/usr/bin/perl", "-e", PERL, go]
    if name == "micro":
        exe = os.path.join(tmp, "mem_micro")
        if not os.path.exists(exe):
            subprocess.run(["cc", "-O2", "-o", exe, os.path.join(HERE, "mem_micro.c")], check=True)
        return [exe, "100000", "64", "10", go]
    raise ValueError(name)


def parse(out):
    vals = {}
    for line in out.splitlines():
        parts = line.split()
        for i in range(0, len(parts) - 1, 2):
            try:
                vals[parts[i]] = float(parts[i + 1])
            except ValueError:
                pass
    return vals


def interposer(eprof):
    return os.path.join(os.path.dirname(os.path.realpath(eprof)), "libeprof_mem.so")


def run_launched(eprof, workload, mode, tmp):
    """eprof (or heaptrack) starts the workload; it times its own work after the go-file."""
    go = os.path.join(tmp, "go")
    if os.path.exists(go):
        os.unlink(go)
    cmd = workload_cmd(workload, go, tmp)
    env = dict(os.environ, **MODE_ENV.get(mode, {}))
    out = os.path.join(tmp, f"{mode}.data")
    if mode in ("interp-null", "interp-all"):
        env["LD_PRELOAD"] = interposer(eprof)
        if mode == "interp-all":
            env["EPROF_MEM_SAMPLE"] = "1"
    elif mode == "heaptrack":
        cmd = ["heaptrack", "-o", os.path.join(tmp, "ht"), *cmd]
    elif MODES[mode] is not None:
        cmd = [eprof, "record", "-q", *MODES[mode], "-o", out, "--", *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env)
    time.sleep(1.5)
    open(go, "w").close()
    stdout, _ = proc.communicate(timeout=600)
    stats = {}
    if MODES[mode] is not None and mode != "heaptrack":
        rep = subprocess.run([eprof, "report", out, "--json", "--limit", "1"],
                             capture_output=True, text=True)
        if rep.returncode == 0:
            import json
            mem = json.loads(rep.stdout).get("memory", {})
            stats = {"calls": mem.get("calls_seen", 0), "lost": mem.get("events_lost", 0)}
    for f in os.listdir(tmp):
        if f.startswith("ht"):
            os.unlink(os.path.join(tmp, f))
    return parse(stdout), stats


def wait_ready(prof, timeout=30.0):
    """Until the recorder has its allocator probes in (a fixed sleep let a slow start-up under
    load overlap the timed work), then its stderr is drained in the background."""
    import threading
    end = time.monotonic() + timeout
    for line in prof.stderr:
        if "allocator probes" in line or time.monotonic() > end:
            break
    threading.Thread(target=prof.stderr.read, daemon=True).start()
    time.sleep(0.3)


def run_once(eprof, workload, mode, tmp):
    go = os.path.join(tmp, "go")
    if os.path.exists(go):
        os.unlink(go)
    target = subprocess.Popen(workload_cmd(workload, go, tmp), stdout=subprocess.PIPE, text=True)
    prof = None
    if mode == "bpftrace":
        prog = (f"uprobe:{LIBC}:malloc {{ @m = count(); }} "
                f"uprobe:{LIBC}:free {{ @f = count(); }}")
        prof = subprocess.Popen(["bpftrace", "-p", str(target.pid), "-e", prog],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(3.0)
    elif MODES[mode] is not None:
        env = dict(os.environ, **MODE_ENV.get(mode, {}))
        out = os.path.join(tmp, f"{mode}.data")
        prof = subprocess.Popen([eprof, "record", "-v", *MODES[mode], "-p", str(target.pid),
                                 "-o", out], env=env, stderr=subprocess.PIPE, text=True)
        wait_ready(prof)
    open(go, "w").close()
    stdout, _ = target.communicate(timeout=600)
    stats = {}
    if prof:
        if mode == "bpftrace":
            prof.send_signal(2)
        prof.wait(timeout=120)
        if mode != "bpftrace":
            rep = subprocess.run([eprof, "report", os.path.join(tmp, f"{mode}.data"), "--json",
                                  "--limit", "1"], capture_output=True, text=True)
            if rep.returncode == 0:
                import json
                mem = json.loads(rep.stdout).get("memory", {})
                stats = {"calls": mem.get("calls_seen", 0), "lost": mem.get("events_lost", 0)}
    return parse(stdout), stats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--eprof")
    ap.add_argument("--modes", default="bare,null,default,mem1,uretprobe,entry0,bpftrace")
    ap.add_argument("--workloads", default="micro,python,perl")
    ap.add_argument("--launch", action="store_true",
                    help="eprof launches the workload (the in-process sampler) instead of -p")
    a = ap.parse_args()
    if os.geteuid() != 0:
        benchlib.die("run as root (BPF)")
    eprof = benchlib.find_eprof(a.eprof)
    modes = a.modes.split(",")
    if "bpftrace" in modes and (a.launch or not shutil.which("bpftrace")):
        modes.remove("bpftrace")
    if "heaptrack" in modes and (not a.launch or not shutil.which("heaptrack")):
        modes.remove("heaptrack")
    run = run_launched if a.launch else run_once
    tmp = tempfile.mkdtemp(prefix="eprof-mem-bench-")
    for wl in a.workloads.split(","):
        res = {m: [] for m in modes}
        extra = {m: {} for m in modes}
        for _ in range(a.reps):
            for m in modes:
                vals, st = run(eprof, wl, m, tmp)
                res[m].append(vals)
                extra[m] = st
        print(f"\n== {wl} (median of {a.reps}, interleaved; ratio to bare of the same round)")
        if wl == "micro":
            base_m = statistics.median(v["malloc_ns"] for v in res["bare"])
            base_f = statistics.median(v["free_ns"] for v in res["bare"])
            print(f"{'mode':10} {'malloc ns':>10} {'free ns':>10} {'+malloc':>9} {'+free':>9}")
            for m in modes:
                mm = statistics.median(v["malloc_ns"] for v in res[m])
                ff = statistics.median(v["free_ns"] for v in res[m])
                print(f"{m:10} {mm:10.1f} {ff:10.1f} {mm - base_m:9.1f} {ff - base_f:9.1f}")
            continue
        print(f"{'mode':10} {'seconds':>8} {'ratio':>7}  calls seen / events lost")
        for m in modes:
            secs = [v.get("elapsed", float("nan")) for v in res[m]]
            ratios = [s / b["elapsed"] for s, b in zip(secs, res["bare"])]
            st = extra[m]
            info = f"{st.get('calls', '')} / {st.get('lost', '')}" if st else ""
            print(f"{m:10} {statistics.median(secs):8.3f} {statistics.median(ratios):7.2f}  {info}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

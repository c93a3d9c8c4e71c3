#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What attaching costs the recorder on a real PyTorch job, against perf in the same run.

One job (tests/fixtures/python/torch_train.py, one DataLoader worker, Debian's python3-torch)
runs for the whole benchmark. Each round attaches to it for --seconds, one after the other:

  perf          perf record -g -F HZ -p PID -- sleep S
  eprof empty   eprof record -F HZ -p PID -d S with an empty build-id cache
  eprof warm    the same with the cache the previous records filled
  eprof timers  warm, EPROF_MAPWATCH=0: the features re-read /proc/PID/maps on their timers

and the recorder's own CPU time (user + sys of the process and its children, from wait4) is
printed per round, with the medians and their ratio to perf's at the end. Issue 32's targets:
empty <= max(0.6 s, 2.5x perf), warm <= max(0.3 s, 1.2x perf).

  tools/bench/attach_cost.py [--rounds 3] [--seconds 4] [--freq 99] [--eprof PATH] [--json OUT]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
import benchlib as bl  # noqa: E402

PY = "/usr/bin/python3"
JOB = os.path.join(bl.REPO, "tests", "fixtures", "python", "torch_train.py")


def cpu_of(argv, env=None):
    """Runs argv; its CPU seconds (user + sys, children included) from wait4."""
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise bl.BenchError(f"{argv[0]} failed: {err.strip()[-300:]}")
    return ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--freq", type=int, default=99)
    ap.add_argument("--eprof")
    ap.add_argument("--json")
    args = ap.parse_args()
    if os.geteuid() != 0:
        bl.die("run as root (BPF)")
    if subprocess.run([PY, "-c", "import torch"], capture_output=True).returncode:
        bl.die("python3-torch is not installed (tools/bench/torch_job.py installs it)")
    if not shutil.which("perf"):
        bl.die("perf is not installed (apt-get install linux-perf)")
    eprof = bl.find_eprof(args.eprof)
    d = tempfile.mkdtemp(prefix="eprof-attach-cost-")
    warm_cache = os.path.join(d, "warm")
    per_round = args.seconds + 12
    job = subprocess.Popen([PY, JOB, str(args.rounds * 4 * per_round + 30), "--workers", "1",
                            "--ready"], stdout=subprocess.PIPE, text=True)
    modes = ("perf", "eprof empty", "eprof warm", "eprof timers")
    cpu = {m: [] for m in modes}
    try:
        if job.stdout.readline().strip() != "ready":
            raise bl.BenchError("the job did not start")
        pid = str(job.pid)
        s = str(args.seconds)
        data = os.path.join(d, "a.data")
        # the warm cache is filled once before the rounds
        cpu_of([eprof, "record", "-q", "-F", str(args.freq), "-p", pid, "-d", "1", "-o", data],
               env=dict(os.environ, XDG_CACHE_HOME=warm_cache))
        for r in range(args.rounds):
            empty = os.path.join(d, f"empty{r}")
            runs = {
                "perf": ([bl.PERF, "record", "-q", "-g", "-F", str(args.freq), "-p", pid, "-o",
                          os.path.join(d, "perf.data"), "--", "sleep", s], None),
                "eprof empty": ([eprof, "record", "-q", "-F", str(args.freq), "-p", pid, "-d", s,
                                 "-o", data], dict(os.environ, XDG_CACHE_HOME=empty)),
                "eprof warm": ([eprof, "record", "-q", "-F", str(args.freq), "-p", pid, "-d", s,
                                "-o", data], dict(os.environ, XDG_CACHE_HOME=warm_cache)),
                "eprof timers": ([eprof, "record", "-q", "-F", str(args.freq), "-p", pid, "-d",
                                  s, "-o", data],
                                 dict(os.environ, XDG_CACHE_HOME=warm_cache, EPROF_MAPWATCH="0")),
            }
            line = []
            for m in modes:
                argv, env = runs[m]
                c = cpu_of(argv, env)
                cpu[m].append(c)
                line.append(f"{m} {c:.2f}")
            shutil.rmtree(empty, ignore_errors=True)
            print(f"round {r + 1}: " + ", ".join(line) + " CPU-s", flush=True)
    except bl.BenchError as e:
        bl.die(str(e))
    finally:
        job.kill()
        job.wait()
        shutil.rmtree(d, ignore_errors=True)
    med = {m: statistics.median(v) for m, v in cpu.items()}
    base = med["perf"]
    print(f"median CPU-s at {args.freq} Hz, {args.seconds:g} s attached "
          f"(load {os.getloadavg()[0]:.1f}):")
    for m in modes:
        print(f"  {m:13s} {med[m]:.2f}  ({med[m] / base:.2f}x perf)")
    targets = {"eprof empty": max(0.6, 2.5 * base), "eprof warm": max(0.3, 1.2 * base)}
    for m, t in targets.items():
        print(f"  target {m}: <= {t:.2f}: {'met' if med[m] <= t else 'NOT met'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"freq": args.freq, "seconds": args.seconds, "rounds": cpu,
                       "median": med, "targets": targets}, f, indent=1)


if __name__ == "__main__":
    main()

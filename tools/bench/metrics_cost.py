#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What the resource metrics cost (docs/metrics.md).

eprof record -p on a 50-thread worker pool (tools/bench/metrics_load.c threads 50, each thread
~200 us of work then a 1 ms sleep), N rounds, with metrics and with --no-metrics interleaved:
  1. The recorder: the CPU time its thread spent in the readings (/proc preads, the BPF map
     lookups, the events made), which it measures itself (CLOCK_THREAD_CPUTIME_ID around each
     reading; meta metrics_cpu_ns), over the record's length. Also the whole eprof process's
     CPU time (wait4 rusage; the pool is not its child) on and off, a cross-check that is only
     as good as the machine is quiet.
  2. The kernel side: the BPF programs run in the target's context, at each context switch
     (sched_switch) and each socket send/recv (sock_*_length). The kernel's own BPF run-time
     statistics (BPF_ENABLE_STATS, enabled only while this measures: it adds two clock reads
     to every BPF program of the machine) give their run count and time while the pool runs.
  3. Optionally (--pingpong) a pipe and a Unix-socket ping-pong under eprof with and without
     metrics: throughput, for the cost per switch or socket call seen from the workload.

  tools/bench/metrics_cost.py [--rounds 3] [--seconds 5] [--threads 50] [--pingpong]
                              [--eprof PATH] [--json F]
Run as root. Machines here are noisy: only the ratios within one run mean anything.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the tree
import benchlib as bl  # noqa: E402


def build_load(tmp):
    exe = os.path.join(tmp, "metrics_load")
    subprocess.run(["cc", "-O2", "-pthread", "-o", exe, os.path.join(bl.HERE, "metrics_load.c")],
                   check=True)
    return exe


BPF_ENABLE_STATS = 32
SYS_BPF = 321  # x86_64


def enable_bpf_stats():
    """An fd that keeps the kernel's BPF run-time statistics on until closed."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.create_string_buffer(8)  # union bpf_attr { __u32 type; } = BPF_STATS_RUN_TIME (0)
    fd = libc.syscall(SYS_BPF, BPF_ENABLE_STATS, attr, 8)
    if fd < 0:
        bl.die(f"BPF_ENABLE_STATS failed: errno {ctypes.get_errno()}")
    return fd


def bpf_prog_stats(prefix):
    """run_cnt and run_time_ns of the newest loaded program of each name starting with prefix."""
    out = json.loads(bl.capture(["bpftool", "prog", "show", "--json"]))
    best = {}
    for p in out:
        name = p.get("name", "")
        if name.startswith(prefix) and p["id"] > best.get(name, {"id": -1})["id"]:
            best[name] = p
    return {n: (p["id"], p.get("run_cnt", 0), p.get("run_time_ns", 0)) for n, p in best.items()}


def recorder_part(eprof, load, tmp, args):
    total = args.rounds * 2 * (args.seconds + 1.5) + 2 * (args.seconds + 8) + 10
    pool = subprocess.Popen([load, "threads", str(args.threads), str(total)],
                            stdout=subprocess.DEVNULL)
    time.sleep(0.5)
    cpu = {"off": [], "on": []}
    self_ns = []
    switches = None
    kernel = {}
    try:
        for r in range(args.rounds):
            for mode in ("off", "on"):
                out = os.path.join(tmp, f"pool-{mode}.data")
                argv = [eprof, "record", "-q", "-p", str(pool.pid), "-d", str(args.seconds),
                        "-o", out] + (["--no-metrics"] if mode == "off" else [])
                run = bl.run_tree(argv)
                cpu[mode].append(run.cpu)
                if mode == "on":
                    m = json.loads(bl.capture([eprof, "report", out, "--json"]))["metrics"]
                    self_ns.append(m["collection_cpu_ns"])
                    switches = (m["nvcsw"] + m["nivcsw"]) / m["wall_s"]
        # the kernel side: BPF statistics over one more record of the pool
        fd = enable_bpf_stats()
        try:
            rec = subprocess.Popen([eprof, "record", "-q", "-p", str(pool.pid), "-d",
                                    str(args.seconds + 6), "-o", os.path.join(tmp, "st.data")])
            for _ in range(100):  # until its programs are loaded (slow on a loaded machine)
                time.sleep(0.2)
                if "metrics_switch" in bpf_prog_stats("metrics_"):
                    break
            time.sleep(0.5)
            a = bpf_prog_stats("metrics_")
            t0 = time.perf_counter()
            time.sleep(args.seconds)
            b = bpf_prog_stats("metrics_")
            dt = time.perf_counter() - t0
            rec.wait()
        finally:
            os.close(fd)
        for name in b:
            if name not in a or a[name][0] != b[name][0]:
                continue
            cnt = b[name][1] - a[name][1]
            ns = b[name][2] - a[name][2]
            kernel[name] = {"runs_per_s": cnt / dt, "ns_per_run": ns / cnt if cnt else 0,
                            "core_fraction": ns / dt / 1e9}
    finally:
        pool.kill()
        pool.wait()
    diffs = [(on - off) / args.seconds for off, on in zip(cpu["off"], cpu["on"])]
    return {
        "recorder_cpu_s_per_s_off": bl.median(cpu["off"]) / args.seconds,
        "recorder_cpu_s_per_s_on": bl.median(cpu["on"]) / args.seconds,
        "eprof_cpu_difference_core_fraction": bl.median(diffs),
        "metrics_recorder_core_fraction": bl.median(self_ns) / 1e9 / args.seconds,
        "pool_switches_per_s": switches,
        "bpf": kernel,
        "metrics_kernel_core_fraction": sum(k["core_fraction"] for k in kernel.values()),
    }


def rate_of(eprof, load, tmp, mode, kind, seconds):
    out = os.path.join(tmp, f"pp-{mode}.data")
    argv = [eprof, "record", "-q", "-o", out] + (["--no-metrics"] if mode == "off" else [])
    txt = bl.capture(argv + ["--", load, kind, str(seconds)])
    return float(txt.split()[0])


def kernel_part(eprof, load, tmp, args):
    res = {}
    for kind in ("pingpong", "socket"):
        per = []
        rates = {"off": [], "on": []}
        for r in range(args.rounds):
            for mode in ("off", "on"):
                rates[mode].append(rate_of(eprof, load, tmp, mode, kind, 2))
            off, on = rates["off"][-1], rates["on"][-1]
            per.append((1 / on - 1 / off) * 1e9)
        res[kind] = {"round_trips_per_s_off": bl.median(rates["off"]),
                     "round_trips_per_s_on": bl.median(rates["on"]),
                     "ns_per_round_trip": bl.median(per)}
    # a pipe round trip is 2 switches; a socket one 2 switches, 2 sends and 2 receives
    res["ns_per_switch"] = res["pingpong"]["ns_per_round_trip"] / 2
    res["ns_per_socket_op"] = (res["socket"]["ns_per_round_trip"] -
                               res["pingpong"]["ns_per_round_trip"]) / 4
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eprof")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--threads", type=int, default=50)
    ap.add_argument("--pingpong", action="store_true",
                    help="also time pipe and socket ping-pongs with and without metrics")
    ap.add_argument("--json")
    args = ap.parse_args()
    if os.geteuid():
        bl.die("run as root")
    eprof = bl.find_eprof(args.eprof)
    with tempfile.TemporaryDirectory() as tmp:
        load = build_load(tmp)
        rec = recorder_part(eprof, load, tmp, args)
        ker = kernel_part(eprof, load, tmp, args) if args.pingpong else {}
    total = rec["metrics_recorder_core_fraction"] + rec["metrics_kernel_core_fraction"]
    out = {"eprof": eprof, "rounds": args.rounds, "seconds": args.seconds,
           "threads": args.threads, "load": bl.load_note(), **rec, **ker,
           "metrics_total_core_fraction": total}
    print(f"# {bl.load_note()}; {args.rounds} rounds, off/on interleaved, medians")
    print(f"{args.threads}-thread pool, {rec['pool_switches_per_s']:.0f} context switches/s, "
          f"recorded with -p for {args.seconds:g} s")
    print(f"recorder, its readings (self-measured): "
          f"{rec['metrics_recorder_core_fraction'] * 100:.4f}% of a core")
    print(f"recorder, whole process (rusage): {rec['recorder_cpu_s_per_s_off'] * 100:.2f}% of a "
          f"core without metrics, {rec['recorder_cpu_s_per_s_on'] * 100:.2f}% with "
          f"(difference {rec['eprof_cpu_difference_core_fraction'] * 100:+.3f}%, noise-bound)")
    for name, k in sorted(rec["bpf"].items()):
        print(f"kernel, BPF {name}: {k['runs_per_s']:.0f} runs/s x {k['ns_per_run']:.0f} ns = "
              f"{k['core_fraction'] * 100:.4f}% of a core")
    if ker:
        print(f"pipe ping-pong: {ker['pingpong']['round_trips_per_s_off']:.0f} -> "
              f"{ker['pingpong']['round_trips_per_s_on']:.0f} round trips/s "
              f"({ker['ns_per_switch']:.0f} ns per context switch)")
        print(f"unix socket ping-pong: {ker['socket']['round_trips_per_s_off']:.0f} -> "
              f"{ker['socket']['round_trips_per_s_on']:.0f} round trips/s "
              f"({ker['ns_per_socket_op']:.0f} ns per send or receive)")
    print(f"total: {total * 100:.4f}% of a core (target 0.5%)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

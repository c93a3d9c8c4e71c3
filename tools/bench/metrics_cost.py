#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What the resource metrics cost (docs/metrics.md), measured against --no-metrics in the same run.

Two parts, each interleaved off/on for N rounds (medians of the pairs):
  1. The recorder: eprof record -p on a 50-thread worker pool (tools/bench/metrics_load.c
     threads 50), its own CPU time (wait4 rusage of eprof alone: the pool is not its child)
     with metrics and without. The difference over the record's length is the collection's
     cost in fractions of one core (the /proc reads, the BPF map reads, the events written).
  2. The kernel side: the BPF programs run in the target's context, at each context switch
     (sched_switch) and each socket send/recv (sock_*_length). A pipe ping-pong and a Unix
     socket ping-pong are timed under eprof with and without metrics: the difference per
     round trip over its 2 switches (and 2 sends, 2 receives) is the cost per event, which
     times the pool's switch rate (from its own metrics) gives the kernel-side cost.

  tools/bench/metrics_cost.py [--rounds 3] [--seconds 5] [--threads 50] [--eprof PATH] [--json F]
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


def recorder_part(eprof, load, tmp, args):
    total = args.rounds * 2 * (args.seconds + 1.5) + 10
    pool = subprocess.Popen([load, "threads", str(args.threads), str(total)],
                            stdout=subprocess.DEVNULL)
    time.sleep(0.5)
    cpu = {"off": [], "on": []}
    switches = None
    try:
        for r in range(args.rounds):
            for mode in ("off", "on"):
                out = os.path.join(tmp, f"pool-{mode}.data")
                argv = [eprof, "record", "-q", "-p", str(pool.pid), "-d", str(args.seconds),
                        "-o", out] + (["--no-metrics"] if mode == "off" else [])
                run = bl.run_tree(argv)
                cpu[mode].append(run.cpu)
                if mode == "on" and switches is None:
                    m = json.loads(bl.capture([eprof, "report", out, "--json"]))["metrics"]
                    switches = (m["nvcsw"] + m["nivcsw"]) / m["wall_s"]
    finally:
        pool.kill()
        pool.wait()
    diffs = [(on - off) / args.seconds for off, on in zip(cpu["off"], cpu["on"])]
    return {
        "recorder_cpu_s_per_s_off": bl.median(cpu["off"]) / args.seconds,
        "recorder_cpu_s_per_s_on": bl.median(cpu["on"]) / args.seconds,
        "metrics_recorder_core_fraction": bl.median(diffs),
        "pool_switches_per_s": switches,
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
    ap.add_argument("--json")
    args = ap.parse_args()
    if os.geteuid():
        bl.die("run as root")
    eprof = bl.find_eprof(args.eprof)
    with tempfile.TemporaryDirectory() as tmp:
        load = build_load(tmp)
        rec = recorder_part(eprof, load, tmp, args)
        ker = kernel_part(eprof, load, tmp, args)
    kernel_frac = rec["pool_switches_per_s"] * max(ker["ns_per_switch"], 0) / 1e9
    out = {"eprof": eprof, "rounds": args.rounds, "seconds": args.seconds,
           "threads": args.threads, "load": bl.load_note(), **rec, **ker,
           "metrics_kernel_core_fraction": kernel_frac,
           "metrics_total_core_fraction": rec["metrics_recorder_core_fraction"] + kernel_frac}
    print(f"# {bl.load_note()}; {args.rounds} rounds, off/on interleaved, medians")
    print(f"recorder CPU, {args.threads}-thread pool, -p for {args.seconds:g} s: "
          f"{rec['recorder_cpu_s_per_s_off'] * 100:.2f}% of a core without metrics, "
          f"{rec['recorder_cpu_s_per_s_on'] * 100:.2f}% with: "
          f"metrics +{rec['metrics_recorder_core_fraction'] * 100:.3f}%")
    print(f"pool context switches: {rec['pool_switches_per_s']:.0f}/s")
    print(f"pipe ping-pong: {ker['pingpong']['round_trips_per_s_off']:.0f} -> "
          f"{ker['pingpong']['round_trips_per_s_on']:.0f} round trips/s: "
          f"{ker['ns_per_switch']:.0f} ns per context switch")
    print(f"unix socket ping-pong: {ker['socket']['round_trips_per_s_off']:.0f} -> "
          f"{ker['socket']['round_trips_per_s_on']:.0f} round trips/s: "
          f"{ker['ns_per_socket_op']:.0f} ns per send or receive")
    print(f"kernel side for the pool: {kernel_frac * 100:.3f}% of a core; "
          f"total {out['metrics_total_core_fraction'] * 100:.3f}% of a core")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

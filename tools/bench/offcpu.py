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
  tools/bench/offcpu.py --cost              # direct cost: BPF run time + recorder CPU

--cost attaches `eprof record --offcpu -p` for a few seconds to a running ping-pong with
kernel.bpf_stats_enabled=1 (restored after) and reports the time spent in each off-CPU
BPF program and in the recorder per second: on a shared, noisy machine this is steadier
than wall-time ratios. Run as root. eprof: --eprof PATH, $EPROF, or ./build/eprof.
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


def bpf_prog_stats():
    out = json.loads(bl.capture(["bpftool", "-j", "prog", "show"]))
    return {p["name"]: (p.get("run_time_ns", 0), p.get("run_cnt", 0))
            for p in out if p.get("name", "").startswith("offcpu_")}


def proc_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cost(eprof, exe, work, extra, secs=4.0):
    """Per-second cost of the off-CPU programs and the recorder on a running ping-pong."""
    import time
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        old = f.read().strip()
    wl = subprocess.Popen([exe, "100000000", str(work)], stdout=subprocess.DEVNULL)
    rec = None
    try:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("1")
        time.sleep(0.3)
        with tempfile.TemporaryDirectory() as tmp:
            rec = subprocess.Popen([eprof, "record", "-q", "--offcpu", *extra, "-p", str(wl.pid),
                                    "-d", str(secs + 2), "-o", os.path.join(tmp, "c.eprof")])
            time.sleep(1.0)  # past the start-up
            s0, c0, t0 = bpf_prog_stats(), proc_cpu_s(rec.pid), time.monotonic()
            with open(f"/proc/{wl.pid}/status") as f:
                sw0 = sum(int(l.split()[1]) for l in f if "ctxt_switches" in l)
            time.sleep(secs)
            s1, c1, t1 = bpf_prog_stats(), proc_cpu_s(rec.pid), time.monotonic()
            with open(f"/proc/{wl.pid}/status") as f:
                sw1 = sum(int(l.split()[1]) for l in f if "ctxt_switches" in l)
            rec.wait()
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(old)
        wl.kill()
        wl.wait()
        if rec and rec.poll() is None:
            rec.kill()
    dt = t1 - t0
    progs = {n: ((s1[n][0] - s0.get(n, (0, 0))[0]) / dt, (s1[n][1] - s0.get(n, (0, 0))[1]) / dt)
             for n in s1}
    return {"seconds": dt, "switches_per_s": (sw1 - sw0) / dt,
            "bpf_ns_per_s": sum(v[0] for v in progs.values()),
            "recorder_cpu_per_s": (c1 - c0) / dt, "progs": progs}


def main_cost(a, eprof):
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(tmp)
        for label, extra in (("--offcpu", []), ("--offcpu --offcpu-stack-rate 0", ["--offcpu-stack-rate", "0"]),
                             ("--offcpu --offcpu-min-us 1000", ["--offcpu-min-us", "1000"])):
            c = cost(eprof, exe, a.work, extra)
            total = c["bpf_ns_per_s"] / 1e9 + c["recorder_cpu_per_s"]
            print(f"{label}: {c['switches_per_s']:,.0f} context switches/s of the ping-pong; "
                  f"BPF {c['bpf_ns_per_s'] / 1e7:.2f}% of a CPU, recorder "
                  f"{100 * c['recorder_cpu_per_s']:.2f}% of a CPU; total {100 * total:.2f}% of a "
                  f"CPU = {100 * total / os.cpu_count():.2f}% of the machine ({os.cpu_count()} CPUs)")
            for n, (ns, cnt) in sorted(c["progs"].items()):
                if cnt:
                    print(f"    {n:28} {cnt:10,.0f} calls/s {ns / cnt:8.0f} ns/call")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eprof")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--turns", type=int, default=40000)
    ap.add_argument("--work", type=int, default=6000, help="loop iterations per turn")
    ap.add_argument("--freq", type=int, default=99)
    ap.add_argument("--json")
    ap.add_argument("--cost", action="store_true")
    a = ap.parse_args()
    eprof = a.eprof or os.environ.get("EPROF") or os.path.join(HERE, "..", "..", "build", "eprof")
    if a.cost:
        return main_cost(a, eprof)
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

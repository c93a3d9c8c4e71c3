#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Cost of `eprof record --offcpu` on a context-switch storm.

The workload (offcpu_pingpong.c, built here) hands a token between two threads over
pipes, both pinned to one CPU: a CPU-bound job whose every turn blocks one thread and
wakes the other. The work per turn is calibrated so that the bare run makes --rate
context switches per second (default 50,000, counted over all its threads). Runs bare,
then each configuration, interleaved for N rounds, and reports per configuration the
median over rounds of the ratio to the bare run of the same round: wall time of the
ping-pong (measured inside the workload: the job's slowdown, since everything the BPF
programs do lands on its CPU) and CPU time of the whole tree (the recorder included,
which runs on the other CPU).

  tools/bench/offcpu.py                     # 7 rounds at 50,000 switches/s
  tools/bench/offcpu.py --rounds 9 --rate 60000 --json out.json
  tools/bench/offcpu.py --spread            # threads free to run on two CPUs (wakeup-
                                            # latency bound: wall ratios mean little)
  tools/bench/offcpu.py --cost              # direct cost: BPF run time + recorder CPU

--cost attaches `eprof record --offcpu -p` for a few seconds to a running ping-pong with
kernel.bpf_stats_enabled=1 (restored after) and reports the time spent in each off-CPU
BPF program and in the recorder per context switch: bpf_stats itself adds two clock reads
to every run, so these per-program figures are upper bounds. Run as root. eprof: --eprof
PATH, $EPROF, or ./build/eprof.
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
    "--offcpu -g fp": ["--offcpu", "-g", "fp"],
    "--offcpu-sample-us 0": ["--offcpu-sample-us", "0"],
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


def calibrate(exe, rate, pin):
    """Work per turn for `rate` switches/s: the time of a switch is linear in the work."""
    pts = []
    for work in (3000, 15000):
        r = subprocess.run([exe, "30000", str(work), *pin], capture_output=True, text=True,
                           check=True)
        pts.append((work, 1.0 / float(r.stdout.split()[1])))
    (w1, t1), (w2, t2) = pts
    slope = (t2 - t1) / (w2 - w1)
    if slope <= 0:
        return 12000
    return max(100, int(w1 + (1.0 / rate - t1) / slope))


def bpf_prog_stats():
    out = json.loads(bl.capture(["bpftool", "-j", "prog", "show"]))
    return {p["name"]: (p.get("run_time_ns", 0), p.get("run_cnt", 0))
            for p in out if p.get("name", "").startswith("offcpu_")}


def proc_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def switches(pid):
    """Context switches of all threads of pid so far."""
    n = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/status") as f:
                n += sum(int(l.split()[1]) for l in f if "ctxt_switches" in l)
        except OSError:
            pass
    return n


def cost(eprof, exe, work, pin, extra, secs=4.0):
    """Per-switch cost of the off-CPU programs and the recorder on a running ping-pong."""
    import time
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        old = f.read().strip()
    wl = subprocess.Popen([exe, "100000000", str(work), *pin], stdout=subprocess.DEVNULL)
    rec = None
    try:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("1")
        time.sleep(0.5)
        c0, n0, t0 = proc_cpu_s(wl.pid), switches(wl.pid), time.monotonic()
        time.sleep(secs / 2)
        c1, n1, t1 = proc_cpu_s(wl.pid), switches(wl.pid), time.monotonic()
        bare = {"switches_per_s": (n1 - n0) / (t1 - t0), "cpu_ns_per_switch": 1e9 * (c1 - c0) / (n1 - n0)}
        with tempfile.TemporaryDirectory() as tmp:
            rec = subprocess.Popen([eprof, "record", "-q", "--offcpu", *extra, "-p", str(wl.pid),
                                    "-d", str(secs + 2.5), "-o", os.path.join(tmp, "c.eprof")])
            time.sleep(1.5)  # past the start-up
            s0, r0, c0, n0, t0 = (bpf_prog_stats(), proc_cpu_s(rec.pid), proc_cpu_s(wl.pid),
                                  switches(wl.pid), time.monotonic())
            time.sleep(secs)
            s1, r1, c1, n1, t1 = (bpf_prog_stats(), proc_cpu_s(rec.pid), proc_cpu_s(wl.pid),
                                  switches(wl.pid), time.monotonic())
            rec.wait()
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(old)
        wl.kill()
        wl.wait()
        if rec and rec.poll() is None:
            rec.kill()
    n = n1 - n0
    progs = {k: ((s1[k][0] - s0.get(k, (0, 0))[0]) / n, (s1[k][1] - s0.get(k, (0, 0))[1]) / n)
             for k in s1}
    return {"bare": bare, "switches_per_s": n / (t1 - t0),
            "cpu_ns_per_switch": 1e9 * (c1 - c0) / n,
            "bpf_ns_per_switch": sum(v[0] for v in progs.values()),
            "recorder_ns_per_switch": 1e9 * (r1 - r0) / n, "progs": progs}


def main_cost(a, eprof, exe, work, pin):
    for label, extra in (("--offcpu", []), ("--offcpu --offcpu-sample-us 0", ["--offcpu-sample-us", "0"]),
                         ("--offcpu --offcpu-min-us 1000", ["--offcpu-min-us", "1000"])):
        c = cost(eprof, exe, work, pin, extra)
        b = c["bare"]
        print(f"{label}: {c['switches_per_s']:,.0f} switches/s (bare {b['switches_per_s']:,.0f}); "
              f"per switch: BPF {c['bpf_ns_per_switch']:.0f} ns, recorder "
              f"{c['recorder_ns_per_switch']:.0f} ns; the job's CPU {c['cpu_ns_per_switch']:.0f} ns "
              f"(bare {b['cpu_ns_per_switch']:.0f} ns)")
        for n, (ns, cnt) in sorted(c["progs"].items()):
            if cnt >= 0.005:
                print(f"    {n:28} {cnt:6.2f} calls/switch {ns / cnt:8.0f} ns/call")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eprof")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--rate", type=int, default=50000, help="context switches/s of the bare run")
    ap.add_argument("--work", type=int, help="loop iterations per turn (default: calibrated)")
    ap.add_argument("--seconds", type=float, default=3.0, help="length of a bare run")
    ap.add_argument("--spread", action="store_true", help="do not pin the threads to one CPU")
    ap.add_argument("--freq", type=int, default=99)
    ap.add_argument("--json")
    ap.add_argument("--cost", action="store_true")
    a = ap.parse_args()
    eprof = a.eprof or os.environ.get("EPROF") or os.path.join(HERE, "..", "..", "build", "eprof")
    pin = [] if a.spread else ["pin"]
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(tmp)
        work = a.work or calibrate(exe, a.rate, pin)
        if a.cost:
            return main_cost(a, eprof, exe, work, pin)
        turns = max(1000, int(a.rate * a.seconds / 2))
        res = {k: {"wall": [], "cpu": [], "lost": [], "recorded": [], "short": [], "nostack": []}
               for k in CONFIGS}
        bare_rates = []
        wl = [exe, str(turns), str(work), *pin]
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
                res[name]["nostack"].append(st.get("offcpu_no_stack", 0) +
                                            st.get("offcpu_unsampled", 0))
                res[name]["recorded"].append((rep.get("offcpu") or {}).get("intervals", 0))
            print(f"round {r + 1}/{a.rounds}: bare {bsecs:.3f} s, "
                  f"{brate:,.0f} context switches/s", file=sys.stderr)
    print(f"ping-pong: {turns} turns, work {work}, {'spread' if a.spread else 'pinned to one CPU'}; "
          f"bare run: {bl.median(bare_rates):,.0f} context switches/s (median); -F {a.freq}; "
          f"median of {a.rounds} rounds")
    print(f"{'configuration':30} {'wall':>7} {'CPU':>7} {'recorded':>9} {'no stack':>9} "
          f"{'skipped':>8} {'lost':>6}")
    summary = {"bare_cs_per_s": bl.median(bare_rates), "work": work, "pinned": not a.spread,
               "configs": {}}
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

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How much a SIGKILLed recorder keeps (issue 32, item 5).

    tools/bench/crash_safety.py [--rounds N] [--seconds S] [--freq F] [--load K] [--eprof PATH]

Each round starts a CPU-bound program (one spinning thread), attaches `eprof record -p PID
-F F`, waits until the recorder says it is recording (`-v`: "attach took"), lets it record
S seconds (default 3), SIGKILLs it and reads what the file kept. The figure is the samples
kept against what the spinner's CPU time over the same S seconds stands for (its CPU
seconds in that window x F): a recorder that wrote everything but the last flush interval
keeps (S - interval) / S of it. --load K runs K busy loops alongside (a loaded machine).
Prints one line per round and the median; --json OUT writes them.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

SPIN = r"""
int main(void) { volatile unsigned long x = 0; for (;;) x++; }
"""


def thread_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_round(eprof, spin, seconds, freq, work):
    target = subprocess.Popen([spin])
    out = os.path.join(work, "crash.data")
    log = os.path.join(work, "crash.log")
    try:
        with open(log, "w") as lf:
            rec = subprocess.Popen([eprof, "record", "-v", "-F", str(freq), "-p", str(target.pid),
                                    "-o", out], stdout=lf, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open(log) as f:
                if "attach took" in f.read():
                    break
            if rec.poll() is not None:
                raise benchlib.BenchError(f"eprof exited early: {open(log).read()}")
            time.sleep(0.01)
        else:
            raise benchlib.BenchError("eprof never said it was recording")
        cpu0 = thread_cpu_s(target.pid)
        time.sleep(seconds)
        cpu1 = thread_cpu_s(target.pid)
        rec.send_signal(signal.SIGKILL)
        rec.wait()
    finally:
        target.kill()
        target.wait()
    r = subprocess.run([eprof, "report", "--json", out], capture_output=True, text=True)
    if r.returncode != 0:
        raise benchlib.BenchError(f"eprof report failed on the killed recording: {r.stderr}")
    kept = json.loads(r.stdout)["samples"]
    expected = (cpu1 - cpu0) * freq
    return kept, expected


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--freq", type=int, default=999)
    ap.add_argument("--load", type=int, default=0)
    ap.add_argument("--eprof")
    ap.add_argument("--json")
    a = ap.parse_args()
    eprof = benchlib.find_eprof(a.eprof)
    loads = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(a.load)]
    rows = []
    try:
        with tempfile.TemporaryDirectory() as work:
            spin = os.path.join(work, "spin")
            subprocess.run(["cc", "-O1", "-x", "c", "-o", spin, "-"], input=SPIN, text=True,
                           check=True)
            for i in range(a.rounds):
                kept, expected = one_round(eprof, spin, a.seconds, a.freq, work)
                rows.append({"kept": kept, "expected": round(expected), "share": kept / expected})
                print(f"round {i + 1}: kept {kept} of {expected:.0f} samples "
                      f"({100 * kept / expected:.1f}%)", flush=True)
    finally:
        for p in loads:
            p.kill()
    med = statistics.median(r["share"] for r in rows)
    print(f"median kept: {100 * med:.1f}% ({a.seconds:g} s at {a.freq} Hz, load {a.load}, "
          f"SIGKILL; eprof {eprof})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rounds": rows, "median_share": med, "load": a.load,
                       "seconds": a.seconds, "freq": a.freq}, f, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Long fuzzing runs counted in CPU time, resumable (called by `tools/fuzz --long`).

Each target is fuzzed round-robin, in slices of --slice CPU seconds, until the ledger
(tests/fuzz/ledger.tsv, committed: one line per run: target, CPU s, executions, exit code,
findings, date) shows TOTAL CPU seconds for it, counting earlier runs: a long campaign can
be spread over several sittings, each resuming from the corpus the last one grew (the work
corpus BUILD/corpus/TARGET, and tests/fuzz/grown/TARGET.tar.xz, where `tools/fuzz
--save-corpus` keeps it for sittings on other machines). Fuzzers run at
nice 19. A slice ends by SIGINT (libFuzzer exits cleanly), also when BUILD/PAUSE appears,
so a benchmark can have the machine: the run waits until PAUSE is gone. (Stopping a
fuzzer with SIGSTOP instead would make libFuzzer report the paused unit as a timeout.)
Ctrl-C ends the current slice, records it and stops. Exits 1 when a run found anything.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import time

GROUPS = {t: "reader report folded flamegraph pprof trace".split()
          for t in "reader report folded flamegraph pprof trace".split()}
GROUPS.update({"elf": ["elf", "cfi"], "cfi": ["elf", "cfi"]})
BIG = set("reader report folded flamegraph pprof trace elf cfi usdt".split())


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        s = f.read().rsplit(")", 1)[1].split()
    return (int(s[11]) + int(s[12])) / os.sysconf("SC_CLK_TCK")


def ledger_rows(path):
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                p = line.rstrip("\n").split("\t")
                if len(p) >= 5:
                    rows.append((p[0], float(p[1]), int(p[2]), p[3], p[4]))
    return rows


def done(path, t):
    return sum(r[1] for r in ledger_rows(path) if r[0] == t)


def grown_dir(fz, build, t):
    """The committed grown corpus of t, unpacked under BUILD/grown/ (as tools/fuzz does)."""
    arc = os.path.join(fz, "grown", t + ".tar.xz")
    d = os.path.join(build, "grown", t)
    if not os.path.exists(arc):
        return None
    stamp = d + ".stamp"
    if not os.path.isdir(d) or not os.path.exists(stamp) or \
            os.path.getmtime(arc) > os.path.getmtime(stamp):
        subprocess.run(["rm", "-rf", d], check=True)
        os.makedirs(d)
        subprocess.run(["tar", "-C", d, "-xJf", arc], check=True)
        open(stamp, "w").close()
    return d


MIN_SLICE = 5  # CPU seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("total", type=float, help="CPU seconds per target, earlier runs included")
    ap.add_argument("targets", nargs="+")
    ap.add_argument("--build", required=True)
    ap.add_argument("--slice", type=float, default=300)
    ap.add_argument("--ledger", help="default: tests/fuzz/ledger.tsv")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    fz = os.path.join(root, "tests", "fuzz")
    ledger = a.ledger or os.path.join(fz, "ledger.tsv")
    pause = os.path.join(a.build, "PAUSE")
    stop = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    found = False
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:symbolize=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    # A target within MIN_SLICE of the total is done: no slice that short is run, and the
    # loop must not wait for one (it spun when a slice had stopped a second short).
    while not stop and any(a.total - done(ledger, t) > MIN_SLICE for t in a.targets):
        for t in a.targets:
            left = min(a.slice, a.total - done(ledger, t))
            while left > MIN_SLICE and not stop:
                while os.path.exists(pause) and not stop:
                    time.sleep(1)
                if stop:
                    break
                work = os.path.join(a.build, "corpus", t)
                out = os.path.join(a.build, "findings", t) + "/"
                os.makedirs(work, exist_ok=True)
                os.makedirs(out, exist_ok=True)
                dirs = [os.path.join(fz, k, m) for m in GROUPS.get(t, [t])
                        for k in ("corpus", "regressions") if os.path.isdir(os.path.join(fz, k, m))]
                grown = grown_dir(fz, a.build, t)
                if grown:
                    dirs.append(grown)
                log = os.path.join(a.build, "logs", f"long-{t}.log")
                os.makedirs(os.path.dirname(log), exist_ok=True)
                before = set(os.listdir(out))
                cmd = ["nice", "-n", "19", os.path.join(a.build, "fuzz_" + t), "-timeout=20",
                       "-rss_limit_mb=2560", f"-max_len={65536 if t in BIG else 8192}",
                       "-print_final_stats=1", f"-artifact_prefix={out}", work, *dirs]
                with open(log, "w") as lf:
                    pr = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT, cwd=root, env=env,
                                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
                used = 0.0
                while pr.poll() is None:
                    time.sleep(1)
                    try:
                        used = cpu_s(pr.pid)
                    except OSError:
                        break
                    if used >= left or os.path.exists(pause) or stop:
                        pr.send_signal(signal.SIGINT)
                        break
                rc = pr.wait()
                with open(log, errors="replace") as f:
                    txt = f.read()
                m = re.findall(r"stat::number_of_executed_units:\s*(\d+)", txt) or \
                    re.findall(r"^#(\d+)\s", txt, re.M)
                runs = int(m[-1]) if m else 0
                new = sorted(set(os.listdir(out)) - before)
                with open(ledger, "a") as f:
                    f.write(f"{t}\t{used:.0f}\t{runs}\t{rc}\t{','.join(new) or 'ok'}\t"
                            f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n")
                print(f"{t}: {used:.0f} CPU s, {runs} runs{', FOUND ' + ' '.join(new) if new else ''}",
                      flush=True)
                left -= used
                if new:
                    found = True
                    print(f"    reproducer in {out} (log: {log})", flush=True)
                    left = 0
    print(f"{'target':12} {'CPU s':>8} {'runs':>12} {'exec/s':>8}  findings")
    for t in a.targets:
        rows = [r for r in ledger_rows(ledger) if r[0] == t]
        cpu = sum(r[1] for r in rows)
        runs = sum(r[2] for r in rows)
        finds = sorted({x for r in rows for x in r[4].split(",") if x != "ok"})
        print(f"{t:12} {cpu:8.0f} {runs:12,} {runs / cpu if cpu else 0:8,.0f}  "
              f"{' '.join(finds) or 'none'}")
    return 1 if found or any(r[4] != "ok" for r in ledger_rows(ledger) if r[0] in a.targets) else 0


if __name__ == "__main__":
    sys.exit(main())

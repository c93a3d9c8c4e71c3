#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""record -p with the CUPTI collector injected, without a GPU (the fake driver and CUPTI of
tests/fixtures/fakecuda), measured:

  - how long the borrowed target thread is stopped per injection and per retraction
    (eprof's own account, `record -v`), the target launching 10,000 kernels/s meanwhile;
  - 10,000 launches/s for a few seconds after the attach: exact kernel counts, joins, losses;
  - the collector's cost per record in the target: a launch loop as fast as it goes, bare,
    under `record -p --no-inject` (uprobes) and under `record -p` (uprobes + collector),
    interleaved, median of the rounds;
  - top --gpu -p: seconds from its start to a snapshot with GPU time per kernel.

  tools/bench/attach.py [--eprof PATH] [--rounds 5]
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import build_fake_cuda, find_eprof  # noqa: E402


def drain(path, stop):
    """A stand-in recorder: takes the collector's messages and drops them."""
    import socket
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    srv.bind(path)
    srv.listen(4)
    srv.settimeout(0.2)

    def reader(c):
        with c:
            while c.recv(65536):
                pass
    while not stop.is_set():
        try:
            c, _ = srv.accept()
        except OSError:
            continue
        threading.Thread(target=reader, args=(c,), daemon=True).start()
    srv.close()


class App:
    def __init__(self, d, env_extra=None):
        env = dict(os.environ, EPROF_LIBCUPTI=f"{d}/libfakecupti.so", **(env_extra or {}))
        self.p = subprocess.Popen([f"{d}/fake_attach"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, env=env)
        self.pid = int(self.p.stdout.readline().split()[1])

    def cmd(self, c):
        self.p.stdin.write(c + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def quit(self):
        self.cmd("quit")
        self.p.wait()


class Record:
    def __init__(self, eprof, pid, data, *extra):
        self.lines = []
        self.p = subprocess.Popen([eprof, "record", "-v", "-p", str(pid), "-o", data, *extra],
                                  stderr=subprocess.PIPE, text=True)
        threading.Thread(target=lambda: [self.lines.append(x) for x in self.p.stderr],
                         daemon=True).start()

    def wait(self, text, timeout=20):
        end = time.time() + timeout
        while time.time() < end and not any(text in x for x in self.lines):
            time.sleep(0.01)
        if not any(text in x for x in self.lines):
            raise RuntimeError("no '%s' in:\n%s" % (text, "".join(self.lines)))

    def stop(self):
        self.p.send_signal(signal.SIGINT)
        self.p.wait(timeout=120)
        time.sleep(0.1)
        return "".join(self.lines)


def stops(log, what):
    return [float(x) for x in re.findall(rf"{what} .*?stopped ([0-9.]+) ms", log)]


def report(eprof, data):
    import json
    r = subprocess.run([eprof, "report", data, "--json"], capture_output=True, text=True,
                       check=True)
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--eprof")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    eprof = find_eprof(args.eprof)
    if not os.path.exists(os.path.join(os.path.dirname(eprof), "libeprof_cupti.so")):
        print("skipped: eprof built without CUPTI")
        return 0
    d = tempfile.mkdtemp(prefix="eprof-attach-bench-")
    build_fake_cuda(d, attach_program=True)
    data = f"{d}/a.data"
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")

    # 1. stop times, the target launching 10,000/s on a thread of its own
    app = App(d)
    app.cmd("bg 10000")
    inj, ret = [], []
    for _ in range(args.rounds * 4):
        rec = Record(eprof, app.pid, data)
        rec.wait("recording GPU activity")
        time.sleep(0.2)
        log = rec.stop()
        inj += stops(log, "injected into pid")
        ret += stops(log, "retracted from pid")
    app.cmd("stop")
    ok = app.cmd("check")
    app.quit()
    print(f"target thread stopped per injection: median {statistics.median(inj):.2f} ms, "
          f"max {max(inj):.2f} ms ({len(inj)} injections); per retraction: median "
          f"{statistics.median(ret):.2f} ms, max {max(ret):.2f} ms ({len(ret)}); target: {ok}")

    # 2. 10,000 launches/s for 5 s after the attach: exact counts
    app = App(d)
    rec = Record(eprof, app.pid, data)
    rec.wait("recording GPU activity")
    ran = app.cmd("run 50000 10000")
    app.cmd("sync")
    rec.stop()
    r = report(eprof, data)
    g, st = r["gpu"], r["stats"]
    k = {x["name"]: x["count"] for x in g["kernels"]}
    print(f"10,000 launches/s ({ran}): kernels {k}, joined {g['activities_with_launch_stack']} of "
          f"{g['activities']}, GPU records lost {st['gpu_records_lost']}, malformed "
          f"{st['gpu_bad_records']}, zero-time {st['gpu_records_zero_time']}, CUDA events lost "
          f"{st['cuda_events_lost']}")
    app.quit()

    # 3. the collector's cost per record in the target, interleaved: the collector on the fake
    # CUPTI with a stand-in recorder (no uprobes), against the fake CUPTI with a client that
    # does nothing; and the whole of record -p against record -p --no-inject
    n = 200000
    sock = f"{d}/drain.sock"
    stop = threading.Event()
    threading.Thread(target=drain, args=(sock, stop), daemon=True).start()
    time.sleep(0.3)
    lib = os.path.join(os.path.dirname(eprof), "libeprof_cupti.so")
    res = {"bare": [], "fake CUPTI, no-op client": [], "fake CUPTI + collector": [],
           "uprobes (--no-inject)": [], "uprobes + fake CUPTI + collector": []}
    for _ in range(args.rounds):
        for mode in res:
            coll = mode == "fake CUPTI + collector"
            app = App(d, {"CUDA_INJECTION64_PATH": lib, "EPROF_CUPTI_SOCK": sock} if coll
                      else None)
            rec = None
            if "no-op" in mode:
                assert app.cmd("noop") == "noop 0"
            elif mode != "bare" and not coll:
                extra = ["--no-inject"] if "no-inject" in mode else []
                rec = Record(eprof, app.pid, data, *extra)
                rec.wait("CUDA functions in")  # the uprobes are in
                if not extra:
                    rec.wait("recording GPU activity")
                time.sleep(0.2)
            secs = float(app.cmd(f"run {n}").split()[2])
            res[mode].append(secs / n * 1e9)
            if rec:
                rec.stop()
            app.quit()
    med = {m: statistics.median(v) for m, v in res.items()}
    print("launch loop, ns per launch (median of %d): " % args.rounds +
          ", ".join(f"{m} {v:.0f}" for m, v in med.items()))
    stop.set()
    c = med["fake CUPTI + collector"] - med["fake CUPTI, no-op client"]
    print(f"the collector: +{c:.0f} ns per launch over a CUPTI client that does nothing = "
          f"+{c / 2:.0f} ns per record (an API record and a kernel record per launch); "
          f"record -p over record -p --no-inject: "
          f"+{med['uprobes + fake CUPTI + collector'] - med['uprobes (--no-inject)']:.0f} ns")

    # 4. top --gpu -p: time to the first snapshot with GPU time per kernel
    app = App(d)
    app.cmd("bg 2000")
    t0 = time.time()
    p = subprocess.Popen([eprof, "top", "--batch", "--gpu", "-d", "0.5", "-n", "6", "-p",
                          str(app.pid)], stdout=subprocess.PIPE, text=True)
    first = None
    for line in p.stdout:
        if first is None and "attach_k_us20" in line and "%" in line.split()[0]:
            first = time.time() - t0
    p.wait()
    app.cmd("stop")
    app.quit()
    print(f"top --gpu -p: kernel time shown {first:.2f} s after top started"
          if first else "top --gpu -p: no kernel time shown")
    return 0


if __name__ == "__main__":
    sys.exit(main())

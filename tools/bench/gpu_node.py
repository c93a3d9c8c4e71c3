#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A GPU training node without a GPU: does the recorder keep up?

  tools/bench/gpu_node.py --procs P --launch-rate R --seconds S --json OUT
                          [--mode both|launched|attach] [--freq HZ] [--eh-frame-mb 300]
                          [--cuda-stack-rate N] [--eprof PATH] [--cache DIR] [--warmup SEC]
                          [--stall-recorder MS] [--perf] [--work DIR]

P processes (ranks) each make R kernel launches a second (0: as fast as they can) for S
seconds, on the fake CUDA driver and the fake libcupti of tests/fixtures/fakecuda. A rank is
Python: each step recurses 60-120 frames deep (the depth varies step to step, as a model's
modules nest) and launches a batch of kernels at the bottom through ctypes into a stand-in
for libtorch_cuda.so (tools/bench/standin_elf.py: a generated library whose .eh_frame is
300 MB, 4.2 million FDEs, cached under ~/.cache/eprof-bench), which calls the driver's
cuLaunchKernel. Each launch runs a 5 us kernel on the fake GPU; CUPTI sees an API callback
and a kernel record per launch.

It runs the node bare, then under `eprof record -- NODE` (launched: the collector loaded
through CUDA_INJECTION64_PATH), then under `eprof record -p NODE_PID` (attach: the collector
injected into each rank), in the same invocation, and writes per mode:

  launches            the launches the ranks made in their S seconds (their own counters)
  kernels_recorded    kernels in the file (`eprof report --json`: gpu.kernels)
  api_joined_pct      100 x kernels joined to their launch call (the uprobe side) / launches
  events_lost         the file's loss counters added up, each loss once (samples, CUDA API
                      events, GPU records, other events); lost_by_counter has each
  recorder_cpu_cores  eprof's CPU time (all its threads, /proc/PID/stat) over the ranks'
                      launch window, per second of it; recorder_threads has each thread's
  throughput_ratio    launches / the bare run's launches (the ranks pace themselves at R:
                      below 1 only when they cannot keep their rate)
  data                the eprof.data path

and the recorder's peak RSS, its -v log, and the load average. --stall-recorder MS stops
the recorder (SIGSTOP) for MS ms once a second from the ranks' window on: a recorder that a
busy node keeps off the CPU, reproducibly; --perf records the recorder with perf. The ranks
sleep --warmup seconds after loading CUDA before their window (a job's set-up; eprof's scan
for libraries loaded with dlopen runs every 200-800 ms in launched mode).
"""
import argparse
import ctypes
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
REPO = os.path.dirname(os.path.dirname(HERE))
CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")
KERNEL = b"node_k_us5"
PYTHON = "/usr/bin/python3"  # a CPython eprof reads frames of (3.10-3.13)


# --- a rank ------------------------------------------------------------------------------

def rank(a):
    """One process of the node: launches for a.seconds at a.rate, then writes its counters."""
    cuda = ctypes.CDLL(a.libcuda)
    stand = ctypes.CDLL(a.standin)
    cuda.cuModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                         ctypes.c_char_p]
    launch = stand.standin_launch
    launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    launch.restype = ctypes.c_int
    cu_launch = ctypes.cast(cuda.cuLaunchKernel, ctypes.c_void_p)
    cuda.cuInit(0)
    kernel = ctypes.c_void_p()
    if cuda.cuModuleGetFunction(ctypes.byref(kernel), None, KERNEL):
        sys.exit("cuModuleGetFunction failed")
    stream = ctypes.c_void_p(7)
    batch = max(1, min(100, a.rate // 100)) if a.rate else 100
    errors = 0

    def leaf():
        nonlocal errors
        for _ in range(batch):
            errors += launch(cu_launch, kernel, stream) != 0
        return batch

    # Three functions that call each other, as a model's modules do; the depth is the
    # number of Python frames below step().
    def block(d):
        return attention(d - 1) if d > 0 else leaf()

    def attention(d):
        return mlp(d - 1) if d > 0 else leaf()

    def mlp(d):
        return block(d - 1) if d > 0 else leaf()

    if a.go:
        with open(a.ready, "w") as f:
            f.write(str(os.getpid()))
        while not os.path.exists(a.go):
            time.sleep(0.005)
    else:
        time.sleep(a.warmup)
    n = steps = 0
    t0 = time.monotonic()
    end = t0 + a.seconds
    while True:
        now = time.monotonic()
        if now >= end:
            break
        depth = 60 + (steps * 37) % 61  # 60..120, varying
        n += block(depth - 3)  # step -> block chain: 'depth' frames from rank() down
        steps += 1
        if a.rate:
            ahead = t0 + n / a.rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    t1 = time.monotonic()
    cuda.cuCtxSynchronize()
    tmp = a.result + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"pid": os.getpid(), "launches": n, "errors": errors, "start": t0,
                   "end": t1}, f)
    os.rename(tmp, a.result)
    if a.go:  # attach mode: stay alive until the recorder has retracted
        while not os.path.exists(a.go + ".quit"):
            time.sleep(0.01)


def node(a):
    """The node: P ranks, as torchrun starts them."""
    procs = []
    for i in range(a.procs):
        argv = [PYTHON, os.path.abspath(__file__), "--rank", "--libcuda", a.libcuda,
                "--standin", a.standin, "--launch-rate", str(a.rate), "--seconds",
                str(a.seconds), "--warmup", str(a.warmup), "--result",
                os.path.join(a.results, f"rank{i}.json")]
        if a.go:
            argv += ["--go", a.go, "--ready", os.path.join(a.results, f"rank{i}.ready")]
        procs.append(subprocess.Popen(argv))
    rc = 0
    for p in procs:
        rc |= p.wait()
    sys.exit(rc)


# --- the bench ---------------------------------------------------------------------------

def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def proc_cpu(pid):
    """(CPU seconds of the process, {thread name: CPU seconds}) from /proc."""
    tck = os.sysconf("SC_CLK_TCK")

    def stat(path):
        with open(path) as f:
            s = f.read()
        comm = s[s.index("(") + 1:s.rindex(")")]
        v = s[s.rindex(")") + 2:].split()
        return comm, (int(v[11]) + int(v[12])) / tck

    _, total = stat(f"/proc/{pid}/stat")
    threads = {}
    for t in glob.glob(f"/proc/{pid}/task/*/stat"):
        try:
            comm, c = stat(t)
        except (OSError, ValueError):
            continue
        key = f"{comm}/{os.path.basename(os.path.dirname(t))}"
        threads[key] = c
    return total, threads


def perf_attach(a, pid, work, mode):
    """--perf: `perf record -g` on the recorder for the run (its perf.data path, the process)."""
    if not a.perf:
        return None
    out = os.path.join(work, f"{mode}.perf.data")
    p = subprocess.Popen(["perf", "record", "-q", "--call-graph", "dwarf,16384", "-F", "499",
                          "-p", str(pid), "-o", out], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    return p, out


def perf_stop(p):
    if p:
        p[0].send_signal(signal.SIGINT)
        p[0].wait(timeout=120)


class Sampler:
    """eprof's CPU time (whole and per thread) and peak RSS, every 100 ms, monotonic-stamped."""

    def __init__(self, pid, stall_ms=0):
        self.pid, self.samples, self.hwm, self.stall_ms = pid, [], 0, stall_ms
        self.armed = 0.0  # stalls start at this monotonic time (0: not yet)
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop.is_set():
            try:
                total, threads = proc_cpu(self.pid)
                with open(f"/proc/{self.pid}/status") as f:
                    for ln in f:
                        if ln.startswith("VmHWM:"):
                            self.hwm = max(self.hwm, int(ln.split()[1]))
                self.samples.append((time.monotonic(), total, threads))
            except (OSError, ValueError):
                pass
            if self.stall_ms and self.armed and time.monotonic() >= self.armed and \
                    len(self.samples) % 10 == 5:
                # --stall-recorder: the recorder kept off the CPU, as on a machine the job
                # keeps busy (SIGSTOP stops all its threads, as starvation would)
                try:
                    os.kill(self.pid, signal.SIGSTOP)
                    time.sleep(self.stall_ms / 1000)
                finally:
                    os.kill(self.pid, signal.SIGCONT)
            self.stop.wait(0.1)

    def window(self, t0, t1):
        """CPU cores over [t0, t1] (the samples nearest inside), whole and per thread."""
        self.stop.set()
        self.t.join()
        s = [x for x in self.samples if t0 <= x[0] <= t1] or self.samples[-2:]
        if len(s) < 2:
            return None, {}
        a, b = s[0], s[-1]
        dt = b[0] - a[0]
        threads = {k: round((v - a[2].get(k, 0)) / dt, 3) for k, v in b[2].items()}
        threads = {k: v for k, v in sorted(threads.items(), key=lambda kv: -kv[1]) if v > 0.005}
        return round((b[1] - a[1]) / dt, 3), threads


def node_argv(a, libs, results, go=None):
    argv = [PYTHON, os.path.abspath(__file__), "--node", "--procs", str(a.procs), "--libcuda",
            libs["libcuda"], "--standin", libs["standin"], "--launch-rate", str(a.launch_rate),
            "--seconds", str(a.seconds), "--warmup", str(a.warmup), "--results", results]
    return argv + (["--go", go] if go else [])


def rank_results(results, procs):
    r = []
    for i in range(procs):
        with open(os.path.join(results, f"rank{i}.json")) as f:
            r.append(json.load(f))
    return {"launches": sum(x["launches"] for x in r), "errors": sum(x["errors"] for x in r),
            "start": min(x["start"] for x in r), "end": max(x["end"] for x in r),
            "per_rank": [x["launches"] for x in r]}


def fresh(d):
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def run_bare(a, libs, work):
    results = fresh(os.path.join(work, "bare"))
    t0 = time.monotonic()
    subprocess.run(node_argv(a, libs, results), check=True, env=libs["env"])
    r = rank_results(results, a.procs)
    r["wall_s"] = round(time.monotonic() - t0, 2)
    return r


def eprof_args(a):
    x = ["-v"]
    if a.freq:
        x += ["-F", str(a.freq)]
    if a.cuda_stack_rate is not None:
        x += ["--cuda-stack-rate", str(a.cuda_stack_rate)]
    return x


def file_figures(eprof, data, launches):
    rep = json.loads(subprocess.run([eprof, "report", data, "--json", "--limit", "5"],
                                    capture_output=True, text=True, check=True).stdout)
    st, g = rep["stats"], rep.get("gpu") or {}
    lost = {k: v for k, v in st.items() if k.endswith("_lost") and k != "regions_lost"}
    lost["cuda_calls_untracked"] = st.get("cuda_calls_untracked", 0)
    # events_lost counts the CUDA events the ring had no room for, and cuda_events_lost
    # counts them again (with the calls the in-flight table had no room for): once each here
    cuda_rb_full = lost["cuda_events_lost"] - lost["cuda_calls_untracked"]
    total = (lost["samples_lost"] + lost["cuda_events_lost"] + lost["gpu_records_lost"] +
             lost["events_lost"] - cuda_rb_full + lost["offcpu_events_lost"] +
             lost["mem_events_lost"] + lost["io_events_lost"])
    kernels = sum(k["count"] for k in g.get("kernels", []))
    joined = g.get("activities_with_launch_stack", 0)
    return {
        "kernels_recorded": kernels,
        "kernels_joined": joined,
        "api_joined_pct": round(100.0 * joined / launches, 3) if launches else None,
        "events_lost": total,
        "lost_by_counter": lost,
        "api_launches_recorded": g.get("launches", 0),
        "launches_timed": g.get("launches_timed", 0),
        "samples": rep.get("samples"),
        "python_stack_truncated": st.get("python_stack_truncated"),
        "unwind_no_cfi": st.get("unwind_no_cfi"),
        "gpu_bad_records": st.get("gpu_bad_records"),
        "gpu_records_zero_time": st.get("gpu_records_zero_time"),
    }


def finish_run(a, eprof, rec, sampler, results, data, log, bare, t_rec0):
    r = rank_results(results, a.procs)
    cores, threads = sampler.window(r["start"], r["end"])
    out = {"launches": r["launches"], "launch_errors": r["errors"], "per_rank": r["per_rank"]}
    out.update(file_figures(eprof, data, r["launches"]))
    out.update({
        "recorder_cpu_cores": cores,
        "recorder_threads": threads,
        "recorder_peak_rss_mib": round(sampler.hwm / 1024, 1),
        "throughput_ratio": round(r["launches"] / bare["launches"], 4) if bare else None,
        "record_wall_s": round(time.monotonic() - t_rec0, 2),
        "data": data,
        "data_mb": round(os.path.getsize(data) / 1e6, 2),
        "log": log,
        "eprof_exit": rec.returncode,
    })
    return out


def run_launched(a, eprof, libs, work, bare):
    results = fresh(os.path.join(work, "launched"))
    data, log = os.path.join(work, "launched.data"), os.path.join(work, "launched.log")
    t0 = time.monotonic()
    with open(log, "w") as lf:
        rec = subprocess.Popen([eprof, "record", *eprof_args(a), "-o", data, "--",
                                *node_argv(a, libs, results)], stderr=lf, env=libs["env"])
        sampler = Sampler(rec.pid, a.stall_recorder)
        sampler.armed = time.monotonic() + a.warmup + 1  # after the ranks' set-up
        perf = perf_attach(a, rec.pid, work, "launched")
        rec.wait(timeout=a.seconds + a.warmup + 300)
    perf_stop(perf)
    out = finish_run(a, eprof, rec, sampler, results, data, log, bare, t0)
    if perf:
        out["perf_data"] = perf[1]
    return out


def wait_log(log, text, count, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with open(log, errors="replace") as f:
            if f.read().count(text) >= count:
                return True
        time.sleep(0.05)
    return False


def run_attach(a, eprof, libs, work, bare):
    results = fresh(os.path.join(work, "attach"))
    data, log = os.path.join(work, "attach.data"), os.path.join(work, "attach.log")
    go = os.path.join(results, "go")
    env = dict(libs["env"])
    nodep = subprocess.Popen(node_argv(a, libs, results, go), env=env)
    try:
        end = time.monotonic() + 60
        while len(glob.glob(os.path.join(results, "*.ready"))) < a.procs:
            if time.monotonic() > end or nodep.poll() is not None:
                raise RuntimeError("the ranks did not start")
            time.sleep(0.05)
        t0 = time.monotonic()
        with open(log, "w") as lf:
            rec = subprocess.Popen([eprof, "record", *eprof_args(a), "-o", data, "-p",
                                    str(nodep.pid)], stderr=lf)
            sampler = Sampler(rec.pid, a.stall_recorder)
            perf = perf_attach(a, rec.pid, work, "attach")
            if not wait_log(log, "CUPTI collector injected into pid", a.procs, 60):
                print(f"warning: not every rank was injected within 60 s (see {log})",
                      file=sys.stderr)
            open(go, "w").close()
            sampler.armed = time.monotonic()
            while len(glob.glob(os.path.join(results, "rank*.json"))) < a.procs:
                if nodep.poll() is not None:
                    break
                time.sleep(0.05)
            time.sleep(0.2)
            rec.send_signal(signal.SIGINT)
            rec.wait(timeout=300)
        perf_stop(perf)
        out = finish_run(a, eprof, rec, sampler, results, data, log, bare, t0)
        if perf:
            out["perf_data"] = perf[1]
        out["injected"] = open(log, errors="replace").read().count(
            "CUPTI collector injected into pid")
    finally:
        open(go + ".quit", "w").close()
        nodep.wait(timeout=60)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--launch-rate", type=int, default=10000, dest="launch_rate")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--json")
    ap.add_argument("--mode", choices=("both", "launched", "attach"), default="both")
    ap.add_argument("--freq", type=int, help="eprof record -F (default: eprof's own)")
    ap.add_argument("--cuda-stack-rate", type=int)
    ap.add_argument("--eh-frame-mb", type=int, default=300)
    ap.add_argument("--warmup", type=float, default=1.5)
    ap.add_argument("--eprof")
    ap.add_argument("--perf", action="store_true",
                    help="perf record -g the recorder (MODE.perf.data in the work directory)")
    ap.add_argument("--stall-recorder", type=int, default=0, metavar="MS",
                    help="stop the recorder (SIGSTOP) for MS ms once a second: a recorder "
                         "kept off the CPU, reproduced")
    ap.add_argument("--cache", default=os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "eprof-bench"))
    ap.add_argument("--work", help="where data files and logs go (default: a new temp dir)")
    # the ranks and the node (internal)
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--node", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--libcuda", help=argparse.SUPPRESS)
    ap.add_argument("--standin", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--results", help=argparse.SUPPRESS)
    ap.add_argument("--go", help=argparse.SUPPRESS)
    ap.add_argument("--ready", help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.rate = a.launch_rate
    if a.rank:
        return rank(a)
    if a.node:
        return node(a)
    if not a.json:
        ap.error("--json OUT is required")

    from benchlib import build_fake_cuda, find_eprof
    from standin_elf import ensure
    eprof = find_eprof(a.eprof)
    if not os.path.exists(os.path.join(os.path.dirname(eprof), "libeprof_cupti.so")) or \
            not os.path.exists(os.path.join(CUDA, "include", "cupti.h")):
        print("skipped: eprof built without CUPTI, or no CUPTI headers")
        return 0
    work = a.work or tempfile.mkdtemp(prefix="eprof-gpu-node-")
    os.makedirs(work, exist_ok=True)
    t = time.monotonic()
    standin, made = ensure(a.cache, a.eh_frame_mb)
    gen_s = time.monotonic() - t
    fakes = os.path.join(work, "fakecuda")
    os.makedirs(fakes, exist_ok=True)
    build_fake_cuda(fakes)
    env = dict(os.environ, EPROF_LIBCUPTI=f"{fakes}/libfakecupti.so")
    env.pop("CUDA_INJECTION64_PATH", None)
    libs = {"libcuda": f"{fakes}/libcuda.so.1", "standin": standin, "env": env}
    res = {
        "procs": a.procs, "launch_rate": a.launch_rate, "seconds": a.seconds,
        "eprof": eprof, "eprof_args": eprof_args(a), "cpus": os.cpu_count(),
        "standin": {"path": standin, "bytes": os.path.getsize(standin),
                    "generated": made, "seconds": round(gen_s, 2)},
        "load_before": loadavg(),
    }
    print(f"stand-in: {standin} ({os.path.getsize(standin) / 1e6:.0f} MB, "
          f"{'generated' if made else 'cached'} in {gen_s:.1f} s); load {res['load_before']}",
          file=sys.stderr)
    bare = run_bare(a, libs, work)
    res["bare"] = bare
    print(f"bare: {bare['launches']} launches in {a.seconds} s", file=sys.stderr)
    for mode, fn in (("launched", run_launched), ("attach", run_attach)):
        if a.mode not in ("both", mode):
            continue
        r = fn(a, eprof, libs, work, bare)
        res[mode] = r
        print(f"{mode}: launches {r['launches']}, kernels {r['kernels_recorded']}, joined "
              f"{r['api_joined_pct']}%, lost {r['events_lost']} {r['lost_by_counter']}, "
              f"recorder {r['recorder_cpu_cores']} cores {r['recorder_threads']}, "
              f"throughput x{r['throughput_ratio']}, rss {r['recorder_peak_rss_mib']} MiB",
              file=sys.stderr)
    res["load_after"] = loadavg()
    with open(a.json, "w") as f:
        json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

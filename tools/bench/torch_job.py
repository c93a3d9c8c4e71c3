#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A real PyTorch training job under eprof: what it costs and how truthful its stacks are.

The job is tests/fixtures/python/torch_train.py run by Debian's python3-torch (1.13, CPU: oneDNN's
JIT-generated convolution kernels, a DataLoader worker process). Installed with apt-get when
missing (root).

Cost: training throughput (steps/s after the first step, measured by the job itself, so start-up
and tear-down are left out) under `record -F 999`, `record -F 999 --mem` and
`record -F 999 --offcpu`, as a ratio to the bare run of the same round; rounds interleave
(bare, each mode, bare, ...) and the median ratio is printed.

Truth, for a launched and an attached (-p) record:
  - unknown-leaf and truncated shares of the samples;
  - the share of the main thread's samples whose stack reaches the process entry
    (_start, or Py_BytesMain for an embedded interpreter);
  - how many distinct rows anonymous (JIT) code takes in `report --limit 0`;
  - whether Python frames appear in the CPU, --mem and --offcpu stacks (train_step / forward /
    the DataLoader's __next__).

  tools/bench/torch_job.py [--rounds 5] [--seconds 6] [--eprof PATH] [--json OUT]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
import benchlib as bl  # noqa: E402

PY = "/usr/bin/python3"
JOB = os.path.join(bl.REPO, "tests", "fixtures", "python", "torch_train.py")
MODES = {"-F 999": ["-F", "999"], "-F 999 --mem": ["-F", "999", "--mem"],
         "-F 999 --offcpu": ["-F", "999", "--offcpu"]}
ENTRY = ("_start", "Py_BytesMain")
PYFRAME = re.compile(r"\((?:[^()]*\.py):\d+\)$|\.py\)?$")


def ensure_torch():
    if subprocess.run([PY, "-c", "import torch"], capture_output=True).returncode == 0:
        return
    if os.geteuid() != 0:
        bl.die("python3-torch is not installed (apt-get install python3-torch, as root)")
    print("installing python3-torch (apt-get)", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], env=env, check=False)
    if subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends",
                       "python3-torch"], env=env).returncode:
        bl.die("apt-get install python3-torch failed")


def throughput(text):
    m = re.search(r"throughput ([\d.]+) steps/s", text)
    if not m:
        raise bl.BenchError(f"the job printed no throughput:\n{text[-2000:]}")
    return float(m.group(1))


def run_job(eprof, extra, seconds, data):
    argv = [PY, JOB, str(seconds), "--workers", "1"]
    if extra is not None:
        argv = [eprof, "record", "-q", "-o", data, *extra, "--", *argv]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise bl.BenchError(f"{' '.join(argv)} exited {r.returncode}: {r.stderr[-2000:]}")
    return throughput(r.stdout)


def folded(eprof, data, *extra):
    r = subprocess.run([eprof, "flamegraph", data, "--folded", "--lines", *extra],
                       capture_output=True, text=True)
    if r.returncode:
        raise bl.BenchError(f"eprof flamegraph {data} {' '.join(extra)} exited {r.returncode}: "
                            f"{r.stderr[-2000:]}")
    out = []
    for line in r.stdout.splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            out.append((stack.split(";"), int(n)))
    return out


def has_python(stacks, names=("train_step", "forward", "__next__", "_next_data", "_get_data")):
    """Samples (weight) whose stack holds a Python frame, and which of the names appear."""
    w, seen = 0, set()
    for frames, n in stacks:
        py = [f for f in frames if ".py:" in f or f.endswith(".py)")]
        if py:
            w += n
            for f in py:
                fn = f.split(" ", 1)[0]
                for name in names:
                    if fn == name or fn.endswith("." + name):
                        seen.add(name)
    return w, sorted(seen)


def truth(eprof, data, pid):
    rep = json.loads(subprocess.run([eprof, "report", data, "--json", "--limit", "0"],
                                    capture_output=True, text=True, check=True).stdout)
    n = max(rep["samples"], 1)
    anon = [f for f in rep["functions"]
            if f["name"].startswith("[jit]") or "[anon]" in f["name"] or f["module"] == "[anon]"]
    main = folded(eprof, data, "--tid", str(pid)) if pid else []
    main_n = sum(w for _, w in main)
    entry = sum(w for frames, w in main if len(frames) > 1 and frames[1] in ENTRY)
    return {
        "samples": rep["samples"],
        "unknown_leaf_pct": round(100 * rep["unknown_leaf_samples"] / n, 1),
        "truncated_pct": round(100 * rep["truncated_samples"] / n, 1),
        "main_reaching_entry_pct": round(100 * entry / main_n, 1) if main_n else None,
        "anon_rows": len(anon),
        "stacks_scanned": rep["stats"].get("unwind_scanned"),
        "python_in_cpu": has_python(folded(eprof, data)),
        "processes": len(rep.get("processes", [])),
    }


def main_pid(data, eprof):
    """The job's main process: the one whose command line is the job's, without a parent among
    the record's processes."""
    rep = json.loads(subprocess.run([eprof, "report", data, "--json", "--limit", "1"],
                                    capture_output=True, text=True, check=True).stdout)
    procs = rep.get("processes", [])
    pids = {p["pid"] for p in procs}
    roots = [p for p in procs if p.get("ppid") not in pids and "torch_train" in p.get("cmdline", "")]
    return roots[0]["pid"] if roots else (procs[0]["pid"] if procs else None)


def attach(eprof, seconds, d):
    p = subprocess.Popen([PY, JOB, str(seconds + 4), "--workers", "1", "--ready"],
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if line.strip() != "ready":
        p.kill()
        raise bl.BenchError(f"the job did not start: {line!r}")
    data = os.path.join(d, "attach.data")
    subprocess.run([eprof, "record", "-q", "-F", "999", "-p", str(p.pid), "-d", str(seconds),
                    "-o", data], check=True, timeout=120)
    p.wait(timeout=120)
    return truth(eprof, data, p.pid)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--eprof")
    ap.add_argument("--json")
    args = ap.parse_args()
    if os.geteuid() != 0:
        bl.die("run as root (BPF)")
    ensure_torch()
    eprof = bl.find_eprof(args.eprof)
    d = tempfile.mkdtemp(prefix="eprof-torch-bench-")
    ratios = {m: [] for m in MODES}
    bare_all = []
    try:
        for r in range(args.rounds):
            bare = run_job(eprof, None, args.seconds, None)
            bare_all.append(bare)
            line = [f"round {r + 1}: bare {bare:.1f} steps/s"]
            for m, extra in MODES.items():
                tp = run_job(eprof, extra, args.seconds, os.path.join(d, "cost.data"))
                ratios[m].append(tp / bare)
                line.append(f"{m} {tp:.1f} ({tp / bare:.2f})")
            print("; ".join(line), flush=True)
        result = {"bare_steps_per_s": statistics.median(bare_all),
                  "throughput_ratio": {m: round(statistics.median(v), 3)
                                       for m, v in ratios.items()}}
        # truth: launch with each data kind, then attach
        data = os.path.join(d, "launch.data")
        run_job(eprof, ["-F", "999"], args.seconds, data)
        result["launch"] = truth(eprof, data, main_pid(data, eprof))
        mem = os.path.join(d, "mem.data")
        run_job(eprof, ["-F", "999", "--mem"], args.seconds, mem)
        result["python_in_mem"] = has_python(folded(eprof, mem, "--mem"))
        off = os.path.join(d, "offcpu.data")
        run_job(eprof, ["-F", "999", "--offcpu"], args.seconds, off)
        result["python_in_offcpu"] = has_python(folded(eprof, off, "--offcpu"))
        result["attach"] = attach(eprof, args.seconds, d)
    except bl.BenchError as e:
        bl.die(str(e))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print(json.dumps(result, indent=1))
    for m, v in result["throughput_ratio"].items():
        print(f"throughput under {m}: {v:.3f} of bare (median of {args.rounds})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

# SPDX-License-Identifier: MIT
"""The job's processes: `record -p` and `top -p` also profile the descendants that already run
when eprof attaches (DataLoader workers, the ranks under torchrun or mpirun), --no-children
keeps to the listed PIDs, and the per-process tables name each process by its command line."""
import os
import subprocess
import sys
import time

import pytest

from conftest import FIXTURES

TORCH_JOB = os.path.join(FIXTURES, "python", "torch_train.py")
PYTHON = "/usr/bin/python3"


def start_forkexec(bins, child_seconds="2"):
    """forkexec forks at once; its child execs hot3 (CPU-bound) while the parent waits, then
    the parent spins 0.5 s in parent_spin and exits."""
    env = dict(os.environ, PARENT_SECONDS="0.5")
    parent = subprocess.Popen([bins["forkexec-nofp"], bins["hot3-nofp"], child_seconds],
                              env=env, stdout=subprocess.DEVNULL)
    time.sleep(0.4)  # the child runs hot3 before eprof attaches
    return parent


def test_attach_profiles_running_children(need_bpf, ep, bins):
    parent = start_forkexec(bins)
    try:
        ep.run("record", "-F", "499", "-q", "-p", str(parent.pid), "-d", "90", timeout=180)
    finally:
        parent.wait(timeout=30)
    rep = ep.report_json("eprof.data", "--threads")
    procs = {p["pid"]: p for p in rep["processes"]}
    children = [p for p in procs.values() if p["ppid"] == parent.pid]
    assert len(children) == 1, rep["processes"]
    child = children[0]
    # the child that existed before the attach: its own argv, and its samples
    assert child["comm"].startswith("hot3"), child
    assert child["cmdline"].split()[0].endswith("hot3-nofp"), child
    assert child["cmdline"].split()[1:] == ["2"], child
    assert child["samples"] > 200, child
    funcs = {f["name"] for f in ep.report_json("eprof.data", "--pid",
                                                str(child["pid"]))["functions"][:5]}
    assert funcs & {"work_a", "work_b", "work_c"}, funcs
    assert procs[parent.pid]["cmdline"].split()[0].endswith("forkexec-nofp")
    # the record went on while the child ran and stopped when both had exited, not at -d (the
    # child's 2 s of CPU take longer on a busy machine, not 90 s)
    assert rep["duration_s"] < 45
    # the text report lists the processes with their command lines (two processes: no flag)
    text = ep.run("report", "eprof.data").stdout
    head = next(l for l in text.splitlines() if l.strip().startswith("PID") and "PPID" in l)
    assert head.split() == ["PID", "PPID", "Samples", "%", "Threads", "Command"], head
    row = next(l for l in text.splitlines() if l.split()[:2] == [str(child["pid"]),
                                                                  str(parent.pid)])
    assert row.rstrip().endswith(child["cmdline"]), row


def test_no_children_keeps_to_the_listed_pid(need_bpf, ep, bins):
    parent = start_forkexec(bins)
    try:
        ep.run("record", "-F", "499", "-q", "-p", str(parent.pid), "--no-children", "-d", "20")
    finally:
        parent.wait(timeout=30)
    rep = ep.report_json("eprof.data", "--threads")
    assert [p["pid"] for p in rep["processes"]] == [parent.pid], rep["processes"]
    assert rep["functions"][0]["name"] == "parent_spin", rep["functions"][:3]
    assert not any(f["name"].startswith("work_") for f in rep["functions"])


def test_bad_no_children(ep):
    r = ep.run("record", "-a", "--no-children", "-d", "1", check=False)
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = ep.run("top", "--no-children", "--batch", "-n", "1", check=False)
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_top_shows_running_children(need_bpf, ep, bins):
    parent = start_forkexec(bins, "3")
    try:
        r = ep.run("top", "--batch", "-n", "2", "-p", str(parent.pid), timeout=60)
    finally:
        parent.wait(timeout=30)
    last = r.stdout.split("eprof top - ")[-1]
    cpu = next(l for l in last.splitlines() if l.startswith("CPU:"))
    # the child (hot3, 1 core) by its command, next to the waiting parent
    assert "hot3-nofp 3[" in cpu, cpu


def test_torch_worker_under_attach(need_bpf, ep):
    """The DataLoader worker of a real training job, running when eprof attaches: its Python
    frames (__getitem__ of the Dataset) are in the record."""
    if subprocess.run([PYTHON, "-c", "import torch"], capture_output=True).returncode:
        print("skipped: no PyTorch for /usr/bin/python3", file=sys.stderr)
        pytest.skip("skipped: no PyTorch for /usr/bin/python3 (apt-get install python3-torch)")
    job = subprocess.Popen([PYTHON, TORCH_JOB, "8", "--workers", "1", "--ready"],
                           stdout=subprocess.PIPE, text=True)
    try:
        assert job.stdout.readline().strip() == "ready"
        ep.run("record", "-F", "499", "-q", "-p", str(job.pid), "-d", "3")
    finally:
        job.kill()
        job.wait()
    rep = ep.report_json()
    workers = [p for p in rep["processes"] if p["ppid"] == job.pid]
    assert workers, rep["processes"]
    w = workers[0]
    assert w["samples"] > 50, w
    assert TORCH_JOB in w["cmdline"], w
    stacks = ep.folded("eprof.data", "--pid", str(w["pid"]))
    # Python frames carry qualified names and lines: "Shapes.__getitem__ (torch_train.py:32)"
    getitem = sum(n for s, n in stacks if any(f.startswith("Shapes.__getitem__ (") for f in s))
    assert getitem > 0, [s for s, _ in stacks[:5]]

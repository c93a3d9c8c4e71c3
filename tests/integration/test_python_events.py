# SPDX-License-Identifier: MIT
"""Python frames in every stack eprof takes, not only CPU samples: allocations (--mem and
--mem=1), off-CPU blocking and waker stacks, region flamegraphs, CUDA API and launch stacks
(fake driver through ctypes), and the real torch job. --no-python turns them all off."""
import os
import shutil
import subprocess

import pytest

from conftest import FIXTURES
from test_python import PY_IDS, PYDIR, PYFRAME, python_for

pytestmark = pytest.mark.usefixtures("need_bpf")

EVAL = "_PyEval_EvalFrameDefault"


def names(stack):
    """Frame names of a folded stack, (file:line) suffixes dropped."""
    out = []
    for f in stack:
        m = PYFRAME.match(f)
        out.append(m["name"] if m else f)
    return out


def plain(name):
    """3.10 has no qualified names: Queue.get is get there."""
    return name.rpartition(".")[2]


def weight(stacks, *want):
    """Weight of the stacks whose frames contain every name of want, in that order (outer
    first), each matched by its plain name."""
    total = 0
    for stack, n in stacks:
        got = [plain(x) for x in names(stack)]
        pos = 0
        for w in want:
            try:
                pos = got.index(plain(w), pos) + 1
            except ValueError:
                break
        else:
            total += n
    return total


def any_python(stacks, funcs):
    return [s for s, _ in stacks if set(map(plain, names(s))) & set(funcs)]


def interleaved(stack):
    """No native eval frame left between two Python frames of the fixture."""
    idx = [i for i, f in enumerate(stack) if "py_events.py:" in f or "py_cuda.py:" in f]
    return not idx or EVAL not in stack[idx[0]:idx[-1]]


def def_lines(path, func):
    """Lines of the def of func and of the next top-level statement after it."""
    with open(path) as f:
        src = f.read().splitlines()
    start = next(i for i, ln in enumerate(src, 1) if ln.startswith(f"def {func}("))
    end = next(i for i, ln in enumerate(src, 1) if i > start and ln and not ln[0].isspace())
    return start, end


FUNCS = {"make_batch", "consume", "produce", "pace", "phase", "spin", "main"}


@pytest.mark.parametrize("which", PY_IDS)
def test_python_frames_in_mem_offcpu_region_stacks(ep, which):
    py = python_for(which)
    ep.run("record", "-q", "-F", "499", "--mem", "--offcpu", "--region", "py:phase", "--",
           py, os.path.join(PYDIR, "py_events.py"), "2", timeout=120)

    lo, hi = def_lines(os.path.join(PYDIR, "py_events.py"), "make_batch")
    # allocations: the 256 KiB bytearrays are most of the bytes, under make_batch
    mem = ep.folded("eprof.data", "--mem", "--lines")
    total = sum(n for _, n in mem)
    batch = weight(mem, "main", "phase", "make_batch")
    assert batch >= 0.5 * total, f"make_batch has {batch} of {total} bytes"
    for stack, _ in mem:
        assert interleaved(stack), stack
        if "make_batch" in names(stack):
            lines = [int(PYFRAME.match(f)["line"]) for f in stack
                     if PYFRAME.match(f) and PYFRAME.match(f)["name"] == "make_batch"]
            assert lines and all(lo < ln < hi for ln in lines), (lo, hi, stack)

    # off-CPU: the consumer thread blocks in Queue.get, the main thread sleeps in pace()
    off = ep.folded("eprof.data", "--offcpu")
    total = sum(n for _, n in off)
    cons = weight(off, "consume", "Queue.get")
    sleep = weight(off, "main", "phase", "produce", "pace")
    assert cons >= 0.2 * total, f"consume/Queue.get: {cons} of {total} ns"
    assert sleep >= 0.1 * total, f"produce/pace: {sleep} of {total} ns"
    assert all(interleaved(s) for s, _ in off)

    # waker stacks: produce()'s Queue.put wakes the consumer
    wk = ep.folded("eprof.data", "--wakers")
    woke = weight(wk, "produce", "Queue.put")
    assert woke >= 0.3 * sum(n for _, n in wk), wk[:5]

    # the region flamegraph: CPU samples inside phase() calls, spin() under phase()
    reg = ep.folded("eprof.data", "--region", "phase")
    total = sum(n for _, n in reg)
    assert total >= 50, f"{total} samples inside phase"
    assert weight(reg, "phase", "spin") >= 0.5 * total, reg[:5]


def test_no_python_turns_every_stack_off(ep):
    py = python_for("debian-3.11")
    ep.run("record", "-q", "-F", "499", "--no-python", "--mem", "--offcpu", "--",
           py, os.path.join(PYDIR, "py_events.py"), "1.5", timeout=120)
    for view in ("--cpu", "--mem", "--offcpu", "--wakers"):
        stacks = ep.folded("eprof.data", view)
        assert stacks, view
        assert not any_python(stacks, FUNCS), (view, any_python(stacks, FUNCS)[:2])
    # the native eval frames stay where the Python frames would be
    assert any(EVAL in s for s, _ in ep.folded("eprof.data", "--mem"))


def test_python_frames_in_every_allocation(ep):
    """--mem=1: every allocation walks the Python frames, not only the sampled ones."""
    py = python_for("debian-3.11")
    ep.run("record", "-q", "--mem=1", "--", py, os.path.join(PYDIR, "py_events.py"), "1",
           timeout=120)
    rep = ep.report_json()
    mem = ep.folded("eprof.data", "--mem")
    total = sum(n for _, n in mem)
    assert weight(mem, "main", "phase", "make_batch") >= 0.5 * total
    assert all(interleaved(s) for s, _ in mem)
    assert rep["stats"]["decode_errors"] == 0


# --- CUDA: the fake driver of tests/fixtures/fakecuda, called from Python ------------------

CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")
FAKE = os.path.join(FIXTURES, "fakecuda")


@pytest.fixture(scope="module")
def fake_libcuda(eprof, tmp_path_factory):
    if not os.path.exists(os.path.join(os.path.dirname(eprof), "libeprof_cupti.so")):
        pytest.skip("skipped: eprof was built without CUPTI (no libeprof_cupti.so)")
    if not os.path.exists(os.path.join(CUDA, "include", "cupti.h")):
        pytest.skip(f"skipped: no CUPTI headers in {CUDA}")
    d = tmp_path_factory.mktemp("pycuda")
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-g", f"-I{CUDA}/include", "-o",
                    str(d / "libfakecupti.so"), os.path.join(FAKE, "fake_cupti.c"), "-lpthread"],
                   check=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-g", "-Wl,-soname,libcuda.so.1", "-o",
                    str(d / "libcuda.so.1"), os.path.join(FAKE, "fake_cuda.c"), "-ldl"],
                   check=True)
    return {"cuda": str(d / "libcuda.so.1"), "cupti": str(d / "libfakecupti.so")}


def record_py_cuda(ep, fake_libcuda, *extra):
    env = dict(os.environ, EPROF_LIBCUPTI=fake_libcuda["cupti"])
    env.pop("CUDA_INJECTION64_PATH", None)
    ep.run("record", "-q", *extra, "--", python_for("debian-3.11"),
           os.path.join(PYDIR, "py_cuda.py"), fake_libcuda["cuda"], "4", env=env, timeout=120)


def leaf_callers(stacks):
    """{leaf: set of Python functions above it} over the stacks."""
    out = {}
    for stack, _ in stacks:
        py = {n for n in names(stack) if n in ("train_step", "forward", "backward",
                                                 "copy_batch", "sync", "launch")}
        out.setdefault(stack[-1], set()).update(py)
    return out


def test_python_frames_in_cuda_stacks(ep, fake_libcuda):
    record_py_cuda(ep, fake_libcuda)
    gpu = ep.folded("eprof.data", "--gpu", "--lines")
    lo, hi = def_lines(os.path.join(PYDIR, "py_cuda.py"), "launch")
    # 4 steps: 8 launches of kernel_ms20 (20 ms), 4 of kernel_b (5 ms), 4 copies (0.1 ms)
    by_leaf = {}
    for stack, ns in gpu:
        by_leaf[stack[-1]] = by_leaf.get(stack[-1], 0) + ns
        assert interleaved(stack), stack
        # the Python line that launched the kernel
        if "kernel" in stack[-1]:
            lines = [int(m["line"]) for m in map(PYFRAME.match, stack)
                     if m and m["name"] == "launch"]
            assert lines and all(lo < ln < hi for ln in lines), (lo, hi, stack)
    assert by_leaf == {"[gpu] kernel_ms20": 160_000_000, "[gpu] kernel_b": 20_000_000,
                       "[gpu] memcpy HtoD": 400_000}, by_leaf
    assert weight(gpu, "train_step", "forward", "launch") == 160_000_000
    assert weight(gpu, "train_step", "backward", "launch") == 20_000_000
    assert weight(gpu, "train_step", "copy_batch") == 400_000
    api = leaf_callers(ep.folded("eprof.data", "--cuda-api"))
    assert {"train_step", "forward", "launch"} <= api["[cuda] cuLaunchKernel"], api
    assert {"train_step", "sync"} <= api["[cuda] cuCtxSynchronize"], api
    assert "copy_batch" in api["[cuda] cuMemcpyHtoD_v2"], api
    # the critical path runs through the kernels, on the Python line that launched them
    cp = ep.folded("eprof.data", "--critical-path")
    assert weight(cp, "train_step", "forward") >= 160_000_000 * 0.9, cp


def test_no_python_cuda_stacks(ep, fake_libcuda):
    record_py_cuda(ep, fake_libcuda, "--no-python")
    for view in ("--gpu", "--cuda-api"):
        stacks = ep.folded("eprof.data", view)
        assert stacks and not any_python(stacks, {"train_step", "forward", "launch"}), view


# --- the real job: Debian's python3-torch, a DataLoader worker ------------------------------

def test_torch_job_python_frames(ep):
    py = "/usr/bin/python3"
    if subprocess.run([py, "-c", "import torch"], capture_output=True).returncode:
        pytest.skip("skipped: no python3-torch (apt-get install python3-torch)")
    ep.run("record", "-q", "--mem", "--offcpu", "--", py,
           os.path.join(PYDIR, "torch_train.py"), "4", "--workers", "1", timeout=180)
    mem = ep.folded("eprof.data", "--mem")
    total = sum(n for _, n in mem)
    assert weight(mem, "train_step") >= 0.3 * total, "train_step allocates most bytes"
    assert weight(mem, "train_step", "forward") > 0, "no allocation under train_step/forward"
    # A module's code object is freed once the module has run, often before its frame is
    # decoded, and its memory may hold another code object by then: what importlib's exec
    # runs is a <module>, importlib's own code or the marker of a freed module, never a
    # stranger such as `Transformer.__init__` (issue 33; 0.4-0.7% of samples before).
    for stack, _ in ep.folded("eprof.data") + mem:
        py = [f for f in stack if PYFRAME.match(f) or f.startswith("[python: ")]
        for outer, inner in zip(py, py[1:]):
            if outer.startswith("_call_with_frames_removed (<frozen importlib._bootstrap"):
                assert inner.startswith(("<module> (", "[python: <module> of an import")) \
                    or "(<frozen importlib._bootstrap" in inner, (outer, inner)
    off = ep.folded("eprof.data", "--offcpu")
    # the main thread waits for the worker's batches under the DataLoader's __next__
    assert weight(off, "main", "_BaseDataLoaderIter.__next__") > 0 or \
        weight(off, "main", "_MultiProcessingDataLoaderIter._get_data") > 0, \
        "no DataLoader wait in the off-CPU stacks"
    # and the worker process (forked after the attach) blocks in its own loop
    assert weight(off, "_worker_loop") > 0


def test_torch_report_fits(ep):
    """Issue 33: the torch job's text report at default limits is at most 150 lines (214
    before) and still leads with the Python lines tables naming the training script's
    lines."""
    py = "/usr/bin/python3"
    if subprocess.run([py, "-c", "import torch"], capture_output=True).returncode:
        pytest.skip("skipped: no python3-torch (apt-get install python3-torch)")
    ep.run("record", "-q", "-F", "499", "--mem", "--offcpu", "--", py,
           os.path.join(PYDIR, "torch_train.py"), "4", "--workers", "1", timeout=180)
    text = ep.run("report", "eprof.data").stdout
    lines = text.splitlines()
    assert len(lines) <= 150, f"{len(lines)} lines:\n{text}"
    for table in ("CPU time", "memory allocated"):
        head = next(i for i, ln in enumerate(lines) if f"Python lines: {table} " in ln)
        rows = []
        for ln in lines[head + 1:]:
            if not ln.strip() or ln.startswith(("...", "#")):
                break
            rows.append(ln)
        assert rows and any("(torch_train.py:" in r for r in rows), (table, rows)
    # the secondary tables are still there, shorter
    assert "Allocated by stack (leaf first)" in text and "Blocking stack" in text


# --- eprof top: system-wide (the default) finds interpreters as a record does ---------------

def top_rows(out):
    snap = out.split("eprof top - ")[-1]
    return [ln.split()[4] for ln in snap.splitlines()
            if len(ln.split()) >= 6 and ln.split()[0].replace(".", "").isdigit()]


@pytest.mark.serial  # system-wide: sees every other test's processes
def test_top_python_frames(ep):
    py = python_for("debian-3.11")
    p = subprocess.Popen([py, os.path.join(PYDIR, "two_hot.py"), "12"], stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        # no -p: every process; the interpreter is found by the poll's scan of /proc
        rows = top_rows(ep.run("top", "--batch", "-n", "3", "-d", "0.7", "-F", "199",
                               timeout=60).stdout)
        assert "hot_a" in rows, rows
        rows = top_rows(ep.run("top", "--batch", "-n", "2", "-d", "0.7", "-F", "199",
                               "--no-python", "-p", str(p.pid), timeout=60).stdout)
        assert "hot_a" not in rows and EVAL in rows, rows
    finally:
        p.kill()
        p.wait()

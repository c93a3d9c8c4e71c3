# SPDX-License-Identifier: MIT
"""The Python user's view (issue 33): --view python|mixed|native on every reader command."""
import json
import os
import re
import subprocess

import pytest

from test_python import PYDIR, PY_IDS, python_for

# "qualname (file.py:LINE)"; frozen modules and exec'd code name no .py file:
# "(<frozen importlib._bootstrap>:1178)", "(<string>:1)"
PYFRAME = re.compile(r"^\S+ \((?P<file>[^()]+):(?P<line>\d+)\)$")


# interpreter frames between a Python frame and the native code it calls
CALLS = ("_PyEval", "PyEval", "_PyObject_Vectorcall", "PyObject_Vectorcall", "_PyObject_Call",
         "PyObject_Call", "_PyFunction_Vectorcall", "cfunction_", "method_vectorcall")


def is_py(frame):
    return bool(PYFRAME.match(frame))


@pytest.mark.parametrize("which", ["debian-3.11", "pyenv-3.12"])
def test_views(need_bpf, ep, which):
    py = python_for(which)
    ep.run("record", "-q", "-F", "499", "-o", "eprof.data", "--", py,
           os.path.join(PYDIR, "two_hot.py"), "1.5", timeout=120)
    mixed = ep.folded("eprof.data")
    pyv = ep.folded("eprof.data", "--view", "python")
    native = ep.folded("eprof.data", "--view", "native")
    total = sum(n for _, n in mixed)
    # Each view has every sample: frames go, samples stay.
    assert sum(n for _, n in pyv) == total and sum(n for _, n in native) == total
    with_py = 0
    for stack, n in pyv:
        py_idx = [i for i, f in enumerate(stack) if is_py(f)]
        if not py_idx or any("<frozen " in f for f in stack):
            # start-up imports run through importlib's C calls (exec of a module): such a
            # native frame stays between Python frames (open, closing note of stop 29)
            continue
        with_py += n
        # comm, then only Python frames, then at most the native leaf: one function and the
        # functions inlined into it (_PyObject_Malloc;pymalloc_alloc), no call machinery
        # between them (the leaf itself may be the interpreter's: where the sample was)
        assert py_idx == list(range(1, py_idx[-1] + 1)), stack
        assert not any(f.startswith(CALLS) for f in stack[py_idx[-1] + 1:-1]), stack
        assert not any(f.startswith(("_start", "Py_RunMain", "_PyEval")) for f in stack), stack
    assert with_py >= 0.8 * total, (with_py, total)
    assert max(len(s) for s, _ in pyv) < max(len(s) for s, _ in mixed)
    assert not any(is_py(f) for s, _ in native for f in s)
    # hot_a's share is the same in every view that shows it
    share = {}
    for name, stacks in (("mixed", mixed), ("python", pyv)):
        a = sum(n for s, n in stacks if any(f.startswith("hot_a (") for f in s))
        b = sum(n for s, n in stacks if any(f.startswith("hot_b (") for f in s))
        share[name] = a / max(a + b, 1)
    assert share["mixed"] == share["python"], share
    # Every reader command takes it; a bad value is a usage error.
    rep = ep.report_json("eprof.data", "--view", "python")
    assert any(f["name"] == "hot_a" for f in rep["functions"])
    assert not any(f["name"].startswith("Py_RunMain") for f in rep["functions"])
    ep.run("trace", "eprof.data", "--view", "python", "-o", "t.json")
    assert json.load(open(os.path.join(ep.dir, "t.json")))
    ep.run("export", "eprof.data", "--format", "pprof", "--view", "native", "-o", "p.pb.gz")
    ep.run("diff", "eprof.data", "eprof.data", "--view", "python")
    ep.run("flamegraph", "eprof.data", "--view", "python", "-o", "f.svg")
    r = ep.run("report", "eprof.data", "--view", "pythn", check=False)
    assert r.returncode == 2 and "--view" in r.stderr, r.stderr


# --- oracles: Python lines tables against known truths ---------------------------------------

def marked_line(script, mark):
    with open(os.path.join(PYDIR, script)) as f:
        return next(i for i, ln in enumerate(f, 1) if ln.rstrip().endswith("# " + mark))


def def_range(script, func):
    """Lines of func's body: from its def to the next top-level statement."""
    with open(os.path.join(PYDIR, script)) as f:
        src = f.read().splitlines()
    start = next(i for i, ln in enumerate(src, 1) if ln.startswith(f"def {func}("))
    end = next((i for i, ln in enumerate(src, 1) if i > start and ln and not ln[0].isspace()),
               len(src) + 1)
    return range(start, end)


def cpu_shares(ep, *view):
    """Share of f60, f30 and f10 in their CPU time, from python_lines.cpu, and the rows."""
    rows = ep.report_json("eprof.data", *view)["python_lines"]["cpu"]
    by_func = {}
    for r in rows:
        if r["file"].endswith("cpu_shares.py"):
            by_func[r["function"]] = by_func.get(r["function"], 0) + r["value"]
    total = sum(by_func.get(f, 0) for f in ("f60", "f30", "f10"))
    assert total > 0, rows[:5]
    return {f: 100.0 * by_func.get(f, 0) / total for f in ("f60", "f30", "f10")}, rows


def check_cpu_oracle(ep, ms_min):
    # 60/30/10 of the CPU time in rounds of 20 ms of time.process_time(). The samples are a
    # cpu-clock tick of the running task: over N of them, a function's count is its CPU time
    # over the period give or take one sample per round it ran in, at random phase, so
    # sqrt(R) of N over R rounds: for N = 2,000 at 1 ms (R = 100), 10 samples = 0.5 points;
    # an attached record's window cuts a round at each end (at most 1.2 ms each, 0.1 point).
    # Even as independent draws, sqrt(0.25 / N) is 1.3 points at the N = 1,500 that ms_min
    # asks for at least (1.1 at 2,000), so 3 points is 2.3 to 2.7 of them. Measured: within
    # 0.4 points launched (3.11-3.13) and attached.
    shares, rows = cpu_shares(ep, "--view", "python")
    assert cpu_shares(ep)[0] == shares  # the innermost Python frame is the same in every view
    n = sum(r["value"] for r in rows if r["file"].endswith("cpu_shares.py")) / 1.0e6
    print(f"cpu shares (python view): {shares}, {n:.0f} ms of samples")
    for f, truth in (("f60", 60), ("f30", 30), ("f10", 10)):
        assert abs(shares[f] - truth) <= 3, (f, shares)
    for r in rows:
        if r["file"].endswith("cpu_shares.py") and r["function"] in shares:
            assert r["line"] in def_range("cpu_shares.py", r["function"]), r
    # each function's hottest line is its marked loop
    for f in ("f60", "f30", "f10"):
        top = max((r for r in rows if r["function"] == f), key=lambda r: r["value"])
        assert top["line"] == marked_line("cpu_shares.py", f.upper() + "_LINE"), top
    assert n >= ms_min, n


@pytest.mark.parametrize("which", ["debian-3.11", "pyenv-3.11", "pyenv-3.12", "pyenv-3.13"])
def test_cpu_shares_oracle_launched(need_bpf, ep, which):
    py = python_for(which)
    ep.run("record", "-q", "-F", "999", "-o", "eprof.data", "--", py,
           os.path.join(PYDIR, "cpu_shares.py"), "2.5", timeout=180)
    check_cpu_oracle(ep, 2000)  # 2.5 s of CPU at 999 Hz: about 2,500 samples of 1 ms


@pytest.mark.parametrize("which", ["debian-3.11", "pyenv-3.12"])
def test_cpu_shares_oracle_attached(need_bpf, ep, which):
    py = python_for(which)
    p = subprocess.Popen([py, os.path.join(PYDIR, "cpu_shares.py"), "30", "--ready"],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        # recorded until the program has had 2.2 s of CPU, however busy the machine (8 s of
        # wall time gave it 0.96 s beside two busy loops, two test workers and two builds)
        ep.record_for_cpu(p.pid, 2.2, "-F", "999", "-o", "eprof.data")
    finally:
        p.kill()
        p.wait()
    check_cpu_oracle(ep, 1500)


def tracemalloc_top(py):
    r = subprocess.run([py, os.path.join(PYDIR, "mem_lines.py"), "--trace"], capture_output=True,
                       text=True, check=True, timeout=60)
    return [s for s in json.loads(r.stdout) if s["file"].endswith("mem_lines.py")][:3]


@pytest.mark.parametrize("which", ["debian-3.11", "pyenv-3.11", "pyenv-3.12", "pyenv-3.13"])
@pytest.mark.parametrize("rate,tolerance", [("1", 0.10), ("16384", 0.25)])
def test_memory_lines_oracle(need_bpf, ep, which, rate, tolerance):
    """python_lines.memory's top 3 lines are tracemalloc's statistics("lineno") top 3.

    Every allocation of the three lines stays live, so tracemalloc's live bytes are the
    allocated bytes. The fixture waits 1 s before and 2 s after allocating: eprof finds a
    launched interpreter within 100 ms and reads code objects from the live process.
    --mem=1: exact but for allocator rounding and dict resizes (measured within 2.5%).
    --mem=16384: the smallest line has 100 allocations of 30,000 bytes, each picked with
    probability 1 - e^(-30000/16384) = 0.84 and counted for 1/0.84 of itself: a relative
    standard error of sqrt(0.16 / 84) = 4.4%, so 25% is over 5 of them (measured within
    10%)."""
    py = python_for(which)
    truth = tracemalloc_top(py)
    assert [s["line"] for s in truth] == [marked_line("mem_lines.py", m) for m in
                                          ("BLOCKS_LINE", "STRINGS_LINE", "LEAK_LINE")], truth
    ep.run("record", "-q", f"--mem={rate}", "-o", "eprof.data", "--", py,
           os.path.join(PYDIR, "mem_lines.py"), timeout=180)
    rows = ep.report_json("eprof.data", "--view", "python")["python_lines"]["memory"]
    got = rows[:3]
    print(f"--mem={rate}: eprof {[(r['line'], r['value']) for r in got]}, "
          f"tracemalloc {[(s['line'], s['size']) for s in truth]}")
    assert [r["line"] for r in got] == [s["line"] for s in truth], got
    assert all(r["file"].endswith("mem_lines.py") for r in got), got
    for r, s in zip(got, truth):
        assert abs(r["value"] - s["size"]) <= tolerance * s["size"], (r, s)

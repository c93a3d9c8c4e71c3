# SPDX-License-Identifier: MIT
"""The Python user's view (issue 33): --view python|mixed|native on every reader command."""
import json
import os
import re

import pytest

from test_python import PYDIR, PY_IDS, python_for

PYFRAME = re.compile(r"^\S+ \((?P<file>[^():]+\.py):(?P<line>\d+)\)$")


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
        if not py_idx:
            continue
        with_py += n
        # comm, then only Python frames, then at most the native leaf: one function and the
        # functions inlined into it (_PyObject_Malloc;pymalloc_alloc), no call machinery
        assert py_idx == list(range(1, py_idx[-1] + 1)), stack
        assert not any(f.startswith(CALLS) for f in stack[py_idx[-1] + 1:]), stack
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

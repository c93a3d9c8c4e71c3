#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Self-time shares of eprof against perf on the same workload.

For each workload (gcc -O1 sqlite3.c, CPython fib), records it once with
`perf record -F 999 -g` and once with `eprof record -F 999` (separate runs), takes
the top functions by self time from `perf report --no-children --sort symbol`
(names without [.]/[k] and without C++ parameter lists, merged by that name) and
compares eprof's self_pct for the same names (summed over modules). A function
passes when |eprof - perf| <= max(1 point, 15% of perf's value).

  tools/bench/accuracy.py                     # gcc and py, top 8, DWARF eprof
  tools/bench/accuracy.py --workloads py --fib 36 --callgraph fp
  tools/bench/accuracy.py --quick             # gcc -O0, fib(36)
  tools/bench/accuracy.py --keep DIR          # keep both recordings in DIR
  tools/bench/accuracy.py --reuse DIR         # compare what --keep left, no recording
Exit status: 0 all pass, 1 a function failed, 2 a run failed.
The "2sd" column is twice the binomial standard error of the difference of two
independent sampled shares: a failure well inside it is sampling noise.
"""
import argparse
import math
import os
import re
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the tree
import benchlib as bl  # noqa: E402

_PERF_LINE = re.compile(r"^\s*([\d.]+)%\s*\t\[(.)\] (.*)$")
_CLONE = re.compile(r"(\s+\[clone [^\]]*\])+$")
_QUALS = re.compile(r"(\s*(const|volatile|noexcept|&&|&))+$")


def strip_params(name):
    """'ns::f<int>(a, b) const [clone .isra.0]' -> 'ns::f<int> [clone .isra.0]'; drops a
    template function's return type ('void f<int>(int)' -> 'f<int>') as perf's
    demangled names carry one and eprof's do not."""
    m = _CLONE.search(name)
    suffix = m.group(0) if m else ""
    s = name[:m.start()] if m else name
    s = _QUALS.sub("", s) if s.rstrip().endswith(("const", "volatile", "noexcept", "&")) else s
    if s.endswith(")"):
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            if s[i] == ")":
                depth += 1
            elif s[i] == "(":
                depth -= 1
                if depth == 0:
                    # '(' right after a space: not a parameter list ("(anonymous namespace)")
                    if i > 0 and s[i - 1] != " ":
                        s = s[:i]
                    break
    # Return type: the last space outside <> and () that does not belong to "operator x".
    depth = 0
    cut = -1
    for i, c in enumerate(s):
        if c in "<(":
            depth += 1
        elif c in ">)" and depth > 0:
            if not (c == ">" and s[i - 1] == "-"):  # operator->
                depth -= 1
        elif c == " " and depth == 0 and not s[:i].endswith("operator"):
            cut = i
    if cut >= 0 and "<" in s:
        tail = s[cut + 1:]
        if tail and not tail.startswith(("[", "const")):
            s = tail
    return s + suffix


def perf_self(path, top_n):
    """{name: pct} merged by stripped name, and the list of the top_n by share."""
    out = bl.capture([bl.PERF, "report", "-i", path, "--no-children", "--sort", "symbol",
                      "--stdio", "-g", "none", "--percent-limit", "0", "-t", "\t"], timeout=900)
    shares = {}
    kinds = {}
    for line in out.splitlines():
        # "  1.83%  \t[.] name   \t-  -": the tab ends the space-padded name; the IPC
        # columns perf 6.x adds after it are dropped.
        fields = line.split("\t")
        if line.startswith("#") or len(fields) < 2:
            continue
        m = _PERF_LINE.match(fields[0] + "\t" + fields[1].rstrip())
        if not m:
            continue
        pct, kind, name = float(m.group(1)), m.group(2), strip_params(m.group(3))
        shares[name] = shares.get(name, 0.0) + pct
        kinds[name] = kind
    if not shares:
        raise bl.BenchError(f"no symbols in perf report of {path}:\n{out[:2000]}")
    # perf leaves symbols that cc1's .dynsym lacks as one "0x..." entry per address:
    # those are ranked out and their sum compared on a line of its own.
    top = sorted((k for k in shares if not unsymbolized(k)), key=lambda k: -shares[k])[:top_n]
    return shares, kinds, top


def eprof_self(eprof, path):
    rep = bl.eprof_report(eprof, path, limit=0)
    shares = {}
    for f in rep.get("functions", []):
        shares[f["name"]] = shares.get(f["name"], 0.0) + f.get("self_pct", 0.0)
        if f.get("kind") == "unknown" or unsymbolized(f["name"]):
            shares[UNSYM] = shares.get(UNSYM, 0.0) + f.get("self_pct", 0.0)
    return rep, shares


UNSYM = "(all unsymbolized addresses)"


def unsymbolized(name):
    return name.startswith("0x") or name.startswith("[unknown]") or name == "[unknown]"


def compare(wname, cmd, eprof, tmp, top_n, callgraph, keep, reuse):
    pdata = os.path.join(reuse or tmp, f"{wname}.perf.data")
    edata = os.path.join(reuse or tmp, f"{wname}.eprof.data")
    f = str(bl.FREQ)
    print(f"\n## {wname}: {' '.join(cmd) if wname != 'py' else cmd[0] + ' -c fib(...)'}",
          flush=True)
    if reuse:
        prun = erun = bl.Run(float("nan"), 0, 0, 0)
        keep = None
    else:
        prun = bl.run_tree([bl.PERF, "record", "-F", f, "-g", "-o", pdata, "--"] + cmd,
                           stderr_path=os.path.join(tmp, "perf.err"))
        # perf knows nothing of Python: compare the same native attribution (with Python
        # frames on, eprof charges the interpreter loop's self time to the Python functions).
        eargv = [eprof, "record", "-F", f, "-q", "--no-python", "-o", edata]
        if callgraph:
            eargv += ["-g", callgraph]
        erun = bl.run_tree(eargv + ["--"] + cmd, stderr_path=os.path.join(tmp, "eprof.err"))
    pn, plost = bl.perf_sample_count(pdata)
    pshares, pkinds, top = perf_self(pdata, top_n)
    rep, eshares = eprof_self(eprof, edata)
    en = rep.get("samples", 0)
    pw = "reused" if reuse else f"wall {prun.wall:.2f} s"
    ew = "reused" if reuse else f"wall {erun.wall:.2f} s"
    print(f"perf: {pn} samples, {plost} lost, {pw} | eprof: {en} samples, "
          f"{rep.get('lost', 0)} lost, {ew}, truncated "
          f"{rep.get('truncated_samples', 0)}, unknown leaf {rep.get('unknown_leaf_samples', 0)}")
    print(f"{'function':58} {'perf%':>7} {'eprof%':>7} {'diff':>7} {'tol':>5} {'2sd':>5}  result")
    fails = 0
    rows = []
    for name in top:
        p = pshares[name]
        e = eshares.get(name)
        tol = max(1.0, 0.15 * p)
        absent = e is None
        if absent:
            e = 0.0
        if abs(e - p) <= tol:
            verdict = "PASS"
        else:
            verdict = "FAIL"
            fails += 1
        if absent:
            verdict += " (absent from eprof's report)"
        q = p / 100
        sd2 = 200 * math.sqrt(q * (1 - q) / max(pn, 1) + q * (1 - q) / max(en, 1))
        shown = f"[{pkinds[name]}] {name}"
        if len(shown) > 58:
            shown = shown[:55] + "..."
        print(f"{shown:58} {p:7.2f} {e:7.2f} {e - p:+7.2f} {tol:5.2f} {sd2:5.2f}  {verdict}")
        rows.append((name, p, e, verdict))
    pu = sum(v for k, v in pshares.items() if unsymbolized(k))
    eu = eshares.get(UNSYM, 0.0)
    print(f"{'(all unsymbolized addresses, not judged)':58} {pu:7.2f} {eu:7.2f} {eu - pu:+7.2f}")
    # What eprof ranks high that perf's top does not hold: a hint at naming differences.
    extra = [n for n in sorted((k for k in eshares if not unsymbolized(k) and k != UNSYM),
                               key=lambda k: -eshares[k])[:top_n] if n not in top]
    if extra:
        print("eprof's top %d not in perf's: %s" % (top_n, "; ".join(
            f"{n} {eshares[n]:.2f}% (perf {pshares.get(n, 0):.2f}%)" for n in extra)))
    if keep:
        os.makedirs(keep, exist_ok=True)
        shutil.copy(pdata, keep)
        shutil.copy(edata, keep)
    for pth in (pdata, edata, pdata + ".old"):
        if not reuse and os.path.exists(pth):
            os.unlink(pth)
    return fails, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default="gcc,py", help="comma list of gcc,py,xz")
    ap.add_argument("--top", type=int, default=8, help="functions compared (default 8)")
    ap.add_argument("--fib", type=int,
                    help="fib(N) for py (default 38: ~5,000 samples, ~5 s; with fewer the "
                         "sampling noise of a 5-10%% function nears the 15%% tolerance)")
    ap.add_argument("--python", help="pyenv CPython version (3.11.7, 3.12.1, 3.13.0)")
    ap.add_argument("--callgraph", choices=["dwarf", "fp"], help="eprof -g (default: its own)")
    ap.add_argument("--quick", action="store_true", help="gcc -O0 and fib(36)")
    ap.add_argument("--eprof", help="eprof binary")
    ap.add_argument("--keep", metavar="DIR", help="copy both recordings of each workload to DIR")
    ap.add_argument("--reuse", metavar="DIR", help="compare the recordings --keep left in DIR "
                    "instead of recording")
    a = ap.parse_args()

    if os.geteuid() != 0:
        bl.die("run as root: perf and eprof both need it")
    eprof = bl.find_eprof(a.eprof)
    bl.prepare_workloads()
    wls = bl.workloads(quick=a.quick, py_version=a.python,
                       fib_n=a.fib or (36 if a.quick else 38))
    print(f"# eprof {eprof}; {bl.load_note()}; top {a.top} by self time, tolerance "
          f"max(1 point, 15% of perf)")
    total_fail = 0
    summary = []
    with tempfile.TemporaryDirectory(prefix="eprof-accuracy-") as tmp:
        for w in [x for x in a.workloads.split(",") if x]:
            if w not in wls:
                bl.die(f"unknown or unavailable workload {w}")
            try:
                fails, rows = compare(w, wls[w], eprof, tmp, a.top, a.callgraph, a.keep, a.reuse)
            except bl.BenchError as e:
                print(f"RUN FAILED: {e}")
                sys.exit(2)
            total_fail += fails
            npass = sum(1 for r in rows if r[3].startswith("PASS"))
            summary.append(f"{w}: {npass}/{len(rows)} pass" +
                           (f", {fails} FAIL" if fails else ""))
    print("\n## summary: " + "; ".join(summary) + (" -> FAIL" if total_fail else " -> PASS"))
    sys.exit(1 if total_fail else 0)


if __name__ == "__main__":
    main()

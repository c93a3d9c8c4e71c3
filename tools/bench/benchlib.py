# SPDX-License-Identifier: MIT
"""Shared helpers of the benchmark scripts in tools/bench/.

Workload definitions (see /work/shared/BENCHMARKS.md), locating eprof and perf,
running a command tree with wall and CPU time, and counting samples in the
files that eprof and perf write.
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
WORK = os.path.join(HERE, "work")
PERF = "/usr/bin/perf"
FREQ = 999

PY_VERSIONS = ("3.11.7", "3.12.1", "3.13.0")


class BenchError(RuntimeError):
    pass


def die(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


# --- tools ---------------------------------------------------------------------------


FAKECUDA = os.path.join(REPO, "tests", "fixtures", "fakecuda")
CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda")


def build_fake_cuda(d, attach_program=False):
    """The fake libcupti and CUDA driver of tests/fixtures/fakecuda, built into d
    (libfakecupti.so, libcuda.so.1); with attach_program, fake_attach too, linked to them."""
    cc = ["cc", "-O2", "-g"]
    subprocess.run(cc + ["-shared", "-fPIC", f"-I{CUDA_HOME}/include", "-o",
                         f"{d}/libfakecupti.so", f"{FAKECUDA}/fake_cupti.c", "-lpthread"],
                   check=True)
    subprocess.run(cc + ["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o",
                         f"{d}/libcuda.so.1", f"{FAKECUDA}/fake_cuda.c", "-ldl"], check=True)
    if attach_program:
        subprocess.run(cc + ["-fno-omit-frame-pointer", "-o", f"{d}/fake_attach",
                             f"{FAKECUDA}/fake_attach.c", f"-L{d}", "-l:libcuda.so.1", "-ldl",
                             "-lpthread", f"-Wl,-rpath,{d}"], check=True)

def sanitized(build_dir):
    """Whether a CMake build directory was configured with EPROF_SANITIZE=ON."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            return any(ln.startswith("EPROF_SANITIZE:") and ln.strip().endswith("=ON") for ln in f)
    except OSError:
        return False


def find_eprof(explicit=None):
    """--eprof, then $EPROF, then the private bench build, then build/eprof, then the repo's other
    build*/eprof that are not sanitizer builds (an ASan binary's timings are not eprof's)."""
    cands = [explicit, os.environ.get("EPROF"), "/tmp/build-bench/eprof",
             os.path.join(REPO, "build", "eprof")]
    cands += sorted(os.path.join(REPO, d, "eprof") for d in os.listdir(REPO)
                    if d.startswith("build") and d != "build" and not sanitized(os.path.join(REPO, d)))
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.abspath(c)
    die("no eprof binary: build it (cmake -S . -B /tmp/build-bench -DCMAKE_BUILD_TYPE=RelWithDebInfo "
        "-DEPROF_TESTS=OFF && cmake --build /tmp/build-bench -j2 --target eprof) or pass --eprof")


def find_python(version=None):
    home = os.path.expanduser("~/.pyenv/versions")
    for v in ([version] if version else PY_VERSIONS):
        p = os.path.join(home, v, "bin", "python3")
        if os.access(p, os.X_OK):
            return p
    return None


def prepare_workloads():
    """Runs workloads.sh when an input is missing (it is idempotent and quick when done)."""
    if subprocess.run([os.path.join(HERE, "workloads.sh"), "--check"],
                      stderr=subprocess.DEVNULL).returncode != 0:
        r = subprocess.run([os.path.join(HERE, "workloads.sh")])
        if r.returncode:
            die("tools/bench/workloads.sh failed")
    if not os.access(PERF, os.X_OK):
        die(f"{PERF} missing (apt-get install linux-perf)")


# --- workloads -----------------------------------------------------------------------

# BENCHMARKS.md writes the script on one line with '; print(...)', which puts the
# print inside the def (Python then runs nothing): the newline is what was meant.
FIB = "def fib(n): return n if n < 2 else fib(n-1) + fib(n-2)\nprint(fib({n}))"


def workloads(quick=False, py_version=None, fib_n=None):
    """name -> argv. quick: shorter inputs (xz on 4 MB, gcc -O0, fib(30))."""
    w = {
        "xz": ["xz", "-9", "-T1", "-c",
               os.path.join(WORK, "xz-quick.bin" if quick else "xz-input.bin")],
        "gcc": ["gcc", "-O0" if quick else "-O1", "-c", os.path.join(WORK, "sqlite3.c"),
                "-o", "/dev/null"],
    }
    py = find_python(py_version)
    if py:
        w["py"] = [py, "-c", FIB.format(n=fib_n or (30 if quick else 33))]
    return w


# --- running ---------------------------------------------------------------------------

class Run:
    __slots__ = ("wall", "cpu", "user", "sys", "rc")

    def __init__(self, wall, user, sys_, rc):
        self.wall, self.user, self.sys, self.rc = wall, user, sys_, rc
        self.cpu = user + sys_


def run_tree(argv, stdout=os.devnull, stderr_path=None, cwd=None):
    """Spawns argv and reaps it with wait4. CPU time is that of the whole tree: the
    rusage of a reaped process includes the children it reaped itself (a profiler's
    workload, gcc's cc1 and as). Raises BenchError when it exits non-zero."""
    exe = shutil.which(argv[0])
    if not exe:
        raise BenchError(f"not found: {argv[0]}")
    fa = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
          (os.POSIX_SPAWN_OPEN, 1, stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
          (os.POSIX_SPAWN_OPEN, 2, stderr_path or os.devnull,
           os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)]
    old = None
    if cwd:
        old = os.getcwd()
        os.chdir(cwd)
    try:
        t0 = time.perf_counter()
        pid = os.posix_spawn(exe, argv, os.environ, file_actions=fa)
        _, status, ru = os.wait4(pid, 0)
        wall = time.perf_counter() - t0
    finally:
        if old:
            os.chdir(old)
    rc = os.waitstatus_to_exitcode(status)
    if rc != 0:
        tail = ""
        if stderr_path and os.path.exists(stderr_path):
            with open(stderr_path, errors="replace") as f:
                tail = f.read()[-2000:]
        raise BenchError(f"exit {rc}: {' '.join(argv)}\n{tail}")
    return Run(wall, ru.ru_utime, ru.ru_stime, rc)


def capture(argv, timeout=600):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       errors="replace", timeout=timeout)
    if r.returncode:
        raise BenchError(f"exit {r.returncode}: {' '.join(argv)}\n{r.stderr[-2000:]}")
    return r.stdout


# --- reading outputs -------------------------------------------------------------------

def eprof_report(eprof, path, limit=0):
    return json.loads(capture([eprof, "report", path, "--json", "--limit", str(limit)]))


_SAMPLE_RE = re.compile(r"^\s*SAMPLE events:\s+(\d+)", re.M)
_LOST_RE = re.compile(r"^\s*LOST(?:_SAMPLES)? events:\s+(\d+)", re.M)


def perf_sample_count(path):
    """(samples, lost events) from `perf report --stats`: it reads the event headers
    only, so it stays cheap even on DWARF recordings."""
    out = capture([PERF, "report", "-i", path, "--stats"])
    m = _SAMPLE_RE.search(out)
    if not m:
        raise BenchError(f"no SAMPLE count in perf report --stats of {path}")
    lost = sum(int(x) for x in _LOST_RE.findall(out.split("Aggregated stats:")[-1]))
    return int(m.group(1)), lost


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def fmt_size(n):
    if n != n:  # nan
        return "-"
    for unit, div in (("MB", 1e6), ("KB", 1e3)):
        if n >= div:
            return f"{n / div:.1f} {unit}" if n / div < 100 else f"{n / div:.0f} {unit}"
    return f"{n:.0f} B"


def load_note():
    try:
        with open("/proc/loadavg") as f:
            la = f.read().split()[:3]
        return f"load average {' '.join(la)} on {os.cpu_count()} CPUs"
    except OSError:
        return ""

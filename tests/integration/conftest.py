# SPDX-License-Identifier: MIT
"""Shared fixtures for eprof's integration tests: real BPF, real programs, as root."""
import json
import os
import signal
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")


def pytest_configure(config):
    # tools/test runs the suite on every CPU at once (pytest-xdist), then these alone
    config.addinivalue_line("markers", "serial: runs alone: system-wide, or changes a system "
                                       "setting other tests depend on")


def eprof_bin():
    path = os.environ.get("EPROF_BIN", os.path.join(ROOT, "build", "eprof"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"eprof binary not found at {path}: build first (tools/build)")
    return path


def bpf_unavailable_reason():
    if os.geteuid() != 0:
        return "not root (need CAP_BPF and CAP_PERFMON)"
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        return "kernel without BTF"
    return None


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """Each test's eprof gets an empty build-id cache of its own (docs/cache.md): what one test
    cached (a program before it was stripped, say: the same build-id) never reaches another,
    and root's ~/.cache/eprof is left alone. test_cache.py sets its own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


@pytest.fixture(scope="session")
def eprof():
    return eprof_bin()


@pytest.fixture(scope="session")
def need_bpf():
    reason = bpf_unavailable_reason()
    if reason:
        print(f"skipped: {reason}", file=sys.stderr)
        pytest.skip(f"skipped: {reason}")


@pytest.fixture(scope="session")
def bins(tmp_path_factory):
    """Builds the fixture programs once per session, with and without frame pointers."""
    out = tmp_path_factory.mktemp("fixtures")
    built = {}
    variants = {
        "fp": ["-O2", "-g", "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls"],
        "nofp": ["-O2", "-g", "-fomit-frame-pointer", "-fno-optimize-sibling-calls"],
        # no CFI at all in the program's own code: the unwinder must fall back to frame pointers
        "nocfi": ["-O2", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables",
                  "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls"],
    }
    for src in ("hot3", "forkexec", "syscalls", "jit"):
        for var, flags in variants.items():
            exe = out / f"{src}-{var}"
            subprocess.run(["cc", *flags, "-o", str(exe), os.path.join(FIXTURES, src + ".c")],
                           check=True)
            built[f"{src}-{var}"] = str(exe)
    return built


class Eprof:
    def __init__(self, binary, workdir):
        self.bin = binary
        self.dir = workdir

    def run(self, *args, check=True, timeout=120, **kw):
        r = subprocess.run([self.bin, *args], cwd=self.dir, capture_output=True, text=True,
                           timeout=timeout, **kw)
        if check and r.returncode != 0:
            raise AssertionError(f"eprof {' '.join(args)} exited {r.returncode}:\n{r.stderr}")
        return r

    def report_json(self, data="eprof.data", *extra):
        r = self.run("report", data, "--json", "--limit", "0", *extra)
        return json.loads(r.stdout)

    def start(self, *args, **kw):
        """eprof record ARGS in the background, -v into a log file: (process, log path).
        wait_attached() then waits for the point where it records, however slow its start."""
        log = os.path.join(self.dir, f"record-{len(os.listdir(self.dir))}.log")
        with open(log, "w") as f:
            p = subprocess.Popen([self.bin, "record", "-v", *args], cwd=self.dir,
                                 stdout=subprocess.DEVNULL, stderr=f, **kw)
        return p, log

    @staticmethod
    def wait_attached(proc, log, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            with open(log, errors="replace") as f:
                if "attach took" in f.read():
                    return
            if proc.poll() is not None:
                raise AssertionError(f"eprof exited {proc.returncode} before it recorded")
            time.sleep(0.05)
        raise AssertionError(f"eprof did not start recording within {timeout} s")

    def record_for_cpu(self, pid, cpu_s, *args):
        """record -p pid ARGS until pid has had cpu_s more seconds of CPU, then Ctrl-C: as
        many samples on a busy machine as on an idle one (a fixed -d gives fewer)."""
        rec, log = self.start("-p", str(pid), *args)
        try:
            self.wait_attached(rec, log)
            wait_cpu(pid, cpu_s)
        finally:
            rec.send_signal(signal.SIGINT)
            rc = rec.wait(timeout=120)
        with open(log, errors="replace") as f:
            assert rc == 0, f.read()

    def folded(self, data="eprof.data", *extra):
        r = self.run("flamegraph", data, "--folded", *extra)
        out = []
        for line in r.stdout.splitlines():
            stack, _, count = line.rpartition(" ")
            out.append((stack.split(";"), int(count)))
        return out


@pytest.fixture
def ep(eprof, tmp_path):
    return Eprof(eprof, str(tmp_path))


def proc_cpu_s(pid):
    """CPU time (user + system) a live process has used, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_cpu(pid, seconds, timeout=120):
    """Waits until process pid has used `seconds` more CPU time; returns its CPU time then."""
    start = proc_cpu_s(pid)
    end = time.time() + timeout
    while time.time() < end:
        now = proc_cpu_s(pid)
        if now - start >= seconds:
            return now
        time.sleep(0.05)
    raise AssertionError(f"process {pid} did not get {seconds} s of CPU in {timeout} s")


def func_pct(report, name):
    """self % of a function (0 when absent)."""
    for f in report["functions"]:
        if f["name"] == name:
            return f["self_pct"]
    return 0.0


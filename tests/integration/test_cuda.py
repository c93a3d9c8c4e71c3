# SPDX-License-Identifier: MIT
"""CUDA API tracing with the real libcudart and no GPU: every call fails, every uprobe fires."""
import os
import shutil
import subprocess

import pytest

from conftest import FIXTURES

pytestmark = pytest.mark.usefixtures("need_bpf")

CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")
NVCC = os.path.join(CUDA, "bin", "nvcc")
SRC = os.path.join(FIXTURES, "cuda_calls.cu")
# what tests/fixtures/cuda_calls.cu does
COUNTS = {"cudaMalloc": 3, "cudaMemcpy": 5, "cudaLaunchKernel": 7, "cudaDeviceSynchronize": 2}
BYTES = {"cudaMalloc": 3 * (1 << 20) + 0 + 1 + 2, "cudaMemcpy": 5 * 4096}
CALLERS = {"cudaMalloc": "alloc_step", "cudaMemcpy": "copy_step",
           "cudaLaunchKernel": "launch_step", "cudaDeviceSynchronize": "sync_step"}


def have_cudart():
    return os.path.exists(os.path.join(CUDA, "include", "cuda_runtime.h")) and \
        os.path.exists(os.path.join(CUDA, "lib64", "libcudart.so"))


@pytest.fixture(scope="module")
def cuda_bins(tmp_path_factory):
    if not have_cudart():
        print(f"skipped: no CUDA toolkit in {CUDA}", flush=True)
        pytest.skip(f"skipped: no CUDA toolkit (cuda_runtime.h, libcudart) in {CUDA}")
    out = tmp_path_factory.mktemp("cuda")
    lib = os.path.join(CUDA, "lib64")
    built = {}
    csrc = out / "cuda_calls.c"
    shutil.copy(SRC, csrc)
    exe = out / "cc-shared"
    subprocess.run(["cc", "-x", "c", "-DEPROF_PLAIN_C", "-O1", "-g", "-fno-omit-frame-pointer",
                    f"-I{CUDA}/include", "-o", str(exe), str(csrc), f"-L{lib}", "-lcudart",
                    f"-Wl,-rpath,{lib}"], check=True)
    built["cc-shared"] = str(exe)
    if os.access(NVCC, os.X_OK):
        for var, flags in (("nvcc-static", []), ("nvcc-shared", ["-cudart", "shared"])):
            exe = out / var
            subprocess.run([NVCC, "-O1", "-g", "-Xcompiler", "-fno-omit-frame-pointer", *flags,
                            "-o", str(exe), SRC], check=True)
            built[var] = str(exe)
    return built


def api_by_name(gpu):
    return {a["name"]: a for a in gpu["api"]}


@pytest.mark.parametrize("variant", ["cc-shared", "nvcc-static", "nvcc-shared"])
def test_cuda_api_counts_bytes_errors_stacks(ep, cuda_bins, variant):
    if variant not in cuda_bins:
        pytest.skip(f"skipped: no nvcc at {NVCC}")
    exe = cuda_bins[variant]
    r = subprocess.run([exe], capture_output=True, text=True)
    # without a GPU each call fails with the same error (35: insufficient driver, 100: no device)
    err = int(r.stdout.splitlines()[0].split("->")[1])
    ep.run("record", "-q", "--", exe)
    rep = ep.report_json()
    assert "gpu" in rep, "no gpu section"
    api = api_by_name(rep["gpu"])
    for name, n in COUNTS.items():
        assert name in api, f"{name} missing: {sorted(api)}"
        assert api[name]["count"] == n, f"{name}: {api[name]['count']} calls, want {n}"
        if err:
            assert api[name]["errors"] == n
            assert api[name]["last_error"] == err
    for name, b in BYTES.items():
        assert api[name]["bytes"] == b, f"{name}: {api[name]['bytes']} bytes, want {b}"
    assert rep["gpu"]["launches"] == COUNTS["cudaLaunchKernel"]
    assert rep["gpu"]["sync_calls"] == COUNTS["cudaDeviceSynchronize"]
    htod = [m for m in rep["gpu"]["memcpy"] if m["direction"] == "HtoD"]
    assert htod and htod[0]["api_count"] == 5 and htod[0]["api_bytes"] == 5 * 4096
    # the host stub names the kernel
    launched = {k["name"]: k["count"] for k in rep["gpu"]["launched_kernels"]}
    assert launched == {"eprof_test_kernel": 7}, launched
    # each call sits on the stack of the function that made it
    seen = {}
    for frames, ns in ep.folded("eprof.data", "--cuda-api"):
        leaf = frames[-1]
        assert leaf.startswith("[cuda] ")
        fn = leaf[len("[cuda] "):]
        assert frames[-2] == CALLERS[fn], f"{fn} called from {frames}"
        assert "main" in frames
        seen[fn] = seen.get(fn, 0) + 1
    assert set(seen) == set(COUNTS), seen
    txt = ep.run("report").stdout
    assert "cudaLaunchKernel" in txt and "eprof_test_kernel" in txt


def test_cuda_stack_rate_keeps_counts(ep, cuda_bins):
    exe = cuda_bins["cc-shared"]
    ep.run("record", "-q", "--cuda-stack-rate", "2", "--", exe)
    rep = ep.report_json()
    api = api_by_name(rep["gpu"])
    assert api["cudaLaunchKernel"]["count"] == 7
    # 7 launches within one second on one thread: 2 with a stack, 5 without
    assert rep["stats"]["cuda_launches_without_stack"] == 5
    stacks = [f for f, _ in ep.folded("eprof.data", "--cuda-api")
              if f[-1] == "[cuda] cudaLaunchKernel" and "launch_step" in f]
    assert stacks, "the first launches keep their stacks"


def test_no_cuda_option(ep, cuda_bins):
    ep.run("record", "-q", "--no-cuda", "--", cuda_bins["cc-shared"])
    rep = ep.report_json()
    assert "gpu" not in rep
    r = ep.run("flamegraph", "--cuda-api", "--folded", check=False)
    assert r.returncode == 1 and "no CUDA API calls" in r.stderr


def test_attach_to_running_cuda_process(ep, cuda_bins, tmp_path):
    """-p: the library is found in the running process's maps."""
    exe = cuda_bins["cc-shared"]
    wrapper = tmp_path / "late.sh"
    # the fixture sleeps 0.2 s before its first call: give eprof time by delaying the start
    wrapper.write_text(f"#!/bin/sh\nsleep 1.5\nexec {exe} 1000\n")
    wrapper.chmod(0o755)
    proc = subprocess.Popen([str(wrapper)], stdout=subprocess.DEVNULL)
    try:
        ep.run("record", "-q", "-p", str(proc.pid), "-d", "4")
    finally:
        proc.wait(timeout=30)
    rep = ep.report_json()
    api = api_by_name(rep["gpu"])
    # the uprobes attach within a scan period (0.2 s) of exec; the fixture waits 1 s first
    assert api["cudaLaunchKernel"]["count"] == 7

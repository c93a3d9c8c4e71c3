# SPDX-License-Identifier: MIT
"""CUDA API tracing with the real libcudart and no GPU: every call fails, every uprobe fires."""
import json
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
    if err:  # the findings say every call failed, and why
        fs = {f["id"]: f for f in rep["findings"]}
        assert f"(error {err}: " in fs["cuda-errors"]["what"], fs
        assert "nvidia-smi" in fs["cuda-errors"]["advice"], fs


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
    wrapper, go, calls = tmp_path / "late.sh", tmp_path / "go", tmp_path / "calls"
    # The program is exec'd once eprof records (its start-up takes seconds on a loaded
    # machine), and makes its calls once eprof says it traced the libcudart it mapped (found
    # by a scan of the maps every 0.2 s: over a second under load). The record ends with it.
    wrapper.write_text(f"#!/bin/sh\nwhile [ ! -e {go} ]; do sleep 0.05; done\n"
                       f"exec {exe} go:{calls}\n")
    wrapper.chmod(0o755)
    proc = subprocess.Popen([str(wrapper)], stdout=subprocess.DEVNULL)
    rec = subprocess.Popen([ep.bin, "record", "-v", "-p", str(proc.pid), "-d", "60"],
                           cwd=ep.dir, stderr=subprocess.PIPE, text=True)
    lines = []
    try:
        for line in rec.stderr:
            lines.append(line)
            if ": recording" in line:
                go.touch()
            if "cuda: traced" in line or "failed to attach uprobes to CUDA" in line:
                break
        calls.touch()
        assert proc.wait(timeout=60) == 0
        rest = rec.stderr.read()
        assert rec.wait(timeout=60) == 0, "".join(lines) + rest
    finally:
        for p in (proc, rec):
            if p.poll() is None:
                p.kill()
    rep = ep.report_json()
    assert "gpu" in rep, "".join(lines) + rest
    api = api_by_name(rep["gpu"])
    assert api["cudaLaunchKernel"]["count"] == 7


@pytest.mark.serial  # system-wide: sees every other test's processes
def test_system_wide_finds_cuda_processes(ep, cuda_bins):
    """-a --cuda: processes that start during the record get their libcudart (shared) and
    their executable (nvcc's static cudart) traced system-wide, counts exact."""
    rec = subprocess.Popen([ep.bin, "record", "-v", "-a", "--cuda", "-F", "49", "-d", "9"],
                           cwd=ep.dir, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in rec.stderr:
        lines.append(line)
        if "cuda: -a:" in line:
            break
    apps = [subprocess.Popen([exe, "3000"], stdout=subprocess.DEVNULL)
            for exe in cuda_bins.values()]
    for a in apps:
        assert a.wait(timeout=60) == 0
    rest = rec.stderr.read()
    assert rec.wait(timeout=60) == 0, "".join(lines) + rest
    log = "".join(lines) + rest
    for name in cuda_bins:
        if name.startswith("nvcc-static"):
            assert f"root{cuda_bins[name]}\n" in log or f"in {cuda_bins[name]}\n" in log, log
    api = api_by_name(ep.report_json()["gpu"])
    for name, n in COUNTS.items():
        assert api[name]["count"] == n * len(apps), (name, api[name], sorted(cuda_bins))


# --- CUPTI path end to end with a fake driver and a fake libcupti (no GPU) -----------------

FAKE = os.path.join(FIXTURES, "fakecuda")


@pytest.fixture(scope="module")
def fake_cuda(eprof, tmp_path_factory):
    inj = os.path.join(os.path.dirname(eprof), "libeprof_cupti.so")
    if not os.path.exists(inj):
        print("skipped: eprof was built without CUPTI (no libeprof_cupti.so)", flush=True)
        pytest.skip("skipped: eprof was built without CUPTI (no libeprof_cupti.so)")
    if not os.path.exists(os.path.join(CUDA, "include", "cupti.h")):
        pytest.skip(f"skipped: no CUPTI headers in {CUDA}")
    d = tmp_path_factory.mktemp("fakecuda")
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-g", f"-I{CUDA}/include", "-o",
                    str(d / "libfakecupti.so"), os.path.join(FAKE, "fake_cupti.c"), "-lpthread"],
                   check=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-g", "-Wl,-soname,libcuda.so.1", "-o",
                    str(d / "libcuda.so.1"), os.path.join(FAKE, "fake_cuda.c"), "-ldl"], check=True)
    os.symlink("libcuda.so.1", d / "libcuda.so")
    subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-o", str(d / "fake_app"),
                    os.path.join(FAKE, "fake_app.c"), f"-L{d}", "-lcuda", f"-Wl,-rpath,{d}"],
                   check=True)
    subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-o", str(d / "fake_critpath"),
                    os.path.join(FAKE, "fake_critpath.c"), f"-L{d}", "-lcuda",
                    f"-Wl,-rpath,{d}"], check=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-g", "-o", str(d / "libfakecudart.so"),
                    os.path.join(FAKE, "fake_rt.c"), f"-L{d}", "-lcuda", f"-Wl,-rpath,{d}"],
                   check=True)
    subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-o", str(d / "fake_rtapp"),
                    os.path.join(FAKE, "fake_rtapp.c"), f"-L{d}", "-Wl,--no-as-needed",
                    "-lfakecudart", "-lcuda", f"-Wl,-rpath,{d}"], check=True)
    subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-o", str(d / "fake_occ"),
                    os.path.join(FAKE, "fake_occ.c"), f"-L{d}", "-lcuda", f"-Wl,-rpath,{d}"],
                   check=True)
    # the fault programs: one finding the fake libcupti through EPROF_LIBCUPTI, one that has
    # loaded it as libcupti.so.13 as a PyTorch process has its wheel's copy; a decoy
    # libcupti.so that must never be loaded beside it
    for sub in ("cupti13", "decoy"):
        (d / sub).mkdir()
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-g", f"-I{CUDA}/include",
                    "-Wl,-soname,libcupti.so.13", "-o", str(d / "cupti13" / "libcupti.so.13"),
                    os.path.join(FAKE, "fake_cupti.c"), "-lpthread"], check=True)
    os.symlink("libcupti.so.13", d / "cupti13" / "libcupti.so")
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-g", f"-I{CUDA}/include",
                    "-DFAKE_CUPTI_DECOY", "-o", str(d / "decoy" / "libcupti.so"),
                    os.path.join(FAKE, "fake_cupti.c"), "-lpthread"], check=True)
    src = os.path.join(FAKE, "fake_faults.c")
    subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-o", str(d / "fake_faults"),
                    src, f"-L{d}", "-lcuda", f"-Wl,-rpath,{d}"], check=True)
    subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-o",
                    str(d / "fake_faults_linked"), src, f"-L{d}", f"-L{d / 'cupti13'}",
                    "-Wl,--no-as-needed", "-lcupti", "-lcuda",
                    f"-Wl,-rpath,{d}:{d / 'cupti13'}"], check=True)
    subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-o", str(d / "fake_static"),
                    os.path.join(FAKE, "fake_static.c"), f"-L{d}", "-lcuda", "-ldl",
                    f"-Wl,-rpath,{d}"], check=True)
    return {"app": str(d / "fake_app"), "cupti": str(d / "libfakecupti.so"),
            "critpath": str(d / "fake_critpath"), "rtapp": str(d / "fake_rtapp"),
            "occ": str(d / "fake_occ"), "faults": str(d / "fake_faults"),
            "faults_linked": str(d / "fake_faults_linked"), "decoy": str(d / "decoy"),
            "cupti13": str(d / "cupti13" / "libcupti.so.13"), "static": str(d / "fake_static")}


def record_fake(ep, fake_cuda, *extra, app="app", env_extra=None, args=()):
    env = dict(os.environ, EPROF_LIBCUPTI=fake_cuda["cupti"], **(env_extra or {}))
    env.pop("CUDA_INJECTION64_PATH", None)
    return ep.run("record", "-q", *extra, "--", fake_cuda[app], *args, env=env)


def test_cupti_kernels_joined_to_launch_stacks(ep, fake_cuda):
    env = dict(os.environ, EPROF_LIBCUPTI=fake_cuda["cupti"], FAKE_CUPTI_REPORT="1")
    env.pop("CUDA_INJECTION64_PATH", None)
    r = ep.run("record", "-q", "--", fake_cuda["app"], env=env)
    # API callbacks only for the calls that queue work: 15 launches + 3 copies, not the
    # 2 cuModuleGetFunction and the cuCtxSynchronize
    assert "fake cupti: 18 callbacks delivered" in r.stderr, r.stderr
    rep = ep.report_json()
    gpu = rep["gpu"]
    kernels = {k["name"]: k for k in gpu["kernels"]}
    assert set(kernels) == {"kernel_a", "kernel_b"}, kernels
    assert kernels["kernel_a"]["count"] == 10 and kernels["kernel_a"]["total_ns"] == 20_000_000
    assert kernels["kernel_b"]["count"] == 5 and kernels["kernel_b"]["mean_ns"] == 5_000_000
    assert gpu["activities"] == 18 and gpu["activities_with_launch_stack"] == 18
    # driver launches are named through the cuModuleGetFunction handle map
    assert {k["name"]: k["count"] for k in gpu["launched_kernels"]} == {"kernel_a": 10,
                                                                         "kernel_b": 5}
    htod = [m for m in gpu["memcpy"] if m["direction"] == "HtoD"][0]
    assert htod["count"] == 3 and htod["bytes"] == 3 * 8192 and htod["api_count"] == 3
    streams = {s["stream"]: s for s in gpu["streams"]}
    assert streams[7]["busy_ns"] == 20_000_000 and streams[13]["busy_ns"] == 25_000_000
    assert len(gpu["devices"]) == 1 and gpu["devices"][0]["busy_ns"] >= 25_000_000
    # the fake runs its streams concurrently: per stream, the part that overlapped another;
    # k streams at once count k times there, (k - 1) times in the device's overlap
    dev_overlap = gpu["devices"][0]["overlap_ns"]
    assert dev_overlap > 0
    assert all(0 <= s["overlap_ns"] <= s["busy_ns"] for s in gpu["streams"])
    assert sum(s["overlap_ns"] for s in gpu["streams"]) >= dev_overlap
    assert streams[7]["overlap_ns"] > 0 and streams[13]["overlap_ns"] > 0
    assert rep["stats"]["gpu_records_lost"] == 0 and rep["stats"]["gpu_bad_records"] == 0
    # the GPU ran 25 ms of a run of over half a second (the app sleeps before and after)
    idle = [f for f in rep["findings"] if f["id"] == "gpu-idle"]
    assert len(idle) == 1 and "GPU 0 (pid " in idle[0]["what"], rep["findings"]
    assert idle[0]["impact"] > 0.9 and idle[0]["severity"] == "high", idle
    # GPU time on the CPU stacks that launched it
    fg = {tuple(f[-2:]): ns for f, ns in ep.folded("eprof.data", "--gpu")}
    assert fg == {("launch_a", "[gpu] kernel_a"): 20_000_000,
                  ("launch_b", "[gpu] kernel_b"): 25_000_000,
                  ("copy_step", "[gpu] memcpy HtoD"): 300_000}, fg


def test_diff_names_the_kernel_made_slower(ep, fake_cuda):
    """eprof diff of two runs of the fake app, kernel_a 2x slower in the second."""
    env = dict(os.environ, EPROF_LIBCUPTI=fake_cuda["cupti"])
    env.pop("CUDA_INJECTION64_PATH", None)
    ep.run("record", "-q", "-o", "base.data", "--", fake_cuda["app"], "50", "50", env=env)
    ep.run("record", "-q", "-o", "new.data", "--", fake_cuda["app"], "50", "50",
           env=dict(env, FAKE_CUDA_SLOW="kernel_a:2"))
    js = json.loads(ep.run("diff", "base.data", "new.data", "--json").stdout)
    gpu = js["gpu"]
    kernels = {k["key"]: k for k in gpu["kernels"]}
    assert gpu["kernels"][0]["key"] == "kernel_a", gpu["kernels"]
    assert kernels["kernel_a"]["ns"] == {"base": 20_000_000, "new": 40_000_000}
    assert kernels["kernel_b"]["ns"] == {"base": 25_000_000, "new": 25_000_000}
    assert kernels["kernel_a"]["count"] == {"base": 10, "new": 10}
    assert gpu["kernel_ns"]["new"] - gpu["kernel_ns"]["base"] == 20_000_000
    assert gpu["launches"] == {"base": 15, "new": 15}
    assert gpu["copies"]["htod"]["bytes"] == {"base": 3 * 8192, "new": 3 * 8192}
    r = ep.run("diff", "base.data", "new.data", "--gate", "kernel:kernel_a.mean>+50%",
               "--gate", "kernel:kernel_b.mean>+5%", "--gate", "gpu.kernel>+10ms", check=False)
    assert r.returncode == 3, r.stderr
    assert "gate failed: kernel:kernel_a.mean>+50%: 2.000 ms -> 4.000 ms (+100.0%)" in r.stderr
    assert "gate failed: gpu.kernel>+10ms" in r.stderr and "kernel_b" not in r.stderr, r.stderr


def test_cupti_trace_tracks_and_flows(ep, fake_cuda):
    record_fake(ep, fake_cuda)
    ep.run("trace", "-o", "t.json")
    with open(os.path.join(ep.dir, "t.json")) as f:
        ev = json.load(f)["traceEvents"]
    names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"GPU 0 stream 7", "GPU 0 stream 13", "GPU 0 stream 0"} <= names, names
    gpu = [e for e in ev if e["ph"] == "X" and e.get("cat") == "gpu"]
    assert sorted(e["name"] for e in gpu).count("kernel_a") == 10 and len(gpu) == 18
    api = [e for e in ev if e["ph"] == "X" and e.get("cat") == "cuda"]
    assert sum(1 for e in api if e["name"] == "cuLaunchKernel: kernel_b") == 5
    starts = {e["id"]: e for e in ev if e["ph"] == "s"}
    ends = {e["id"]: e for e in ev if e["ph"] == "f"}
    assert len(starts) == 18 and set(starts) == set(ends)
    for i, s in starts.items():
        assert s["ts"] <= ends[i]["ts"], "a launch precedes its kernel"


def test_cupti_version_mismatch_records_no_activity(ep, fake_cuda):
    """A libcupti of another major would be misread: the library refuses it in one line."""
    env = dict(os.environ, EPROF_LIBCUPTI=fake_cuda["cupti"], FAKE_CUPTI_VERSION="120000")
    env.pop("CUDA_INJECTION64_PATH", None)
    r = ep.run("record", "-q", "--", fake_cuda["app"], env=env)
    assert "does not match" in r.stderr
    rep = ep.report_json()
    assert rep["gpu"]["activities"] == 0
    # the uprobe side is unaffected
    assert {a["name"]: a["count"] for a in rep["gpu"]["api"]}["cuLaunchKernel"] == 15


def test_cupti_flushed_when_the_record_stops(ep, fake_cuda):
    """-d ends the record while the program still runs: the recorder asks it to flush."""
    env = dict(os.environ, EPROF_LIBCUPTI=fake_cuda["cupti"], EPROF_CUPTI_FLUSH_MS="60000")
    env.pop("CUDA_INJECTION64_PATH", None)
    r = ep.run("record", "-q", "-d", "1.5", "--", fake_cuda["app"], "200", "20000", env=env,
               check=False)
    assert r.returncode == 128 + 15, r.stderr  # the command is ended after the record
    gpu = ep.report_json()["gpu"]
    assert {k["name"]: k["count"] for k in gpu["kernels"]} == {"kernel_a": 10, "kernel_b": 5}
    assert gpu["activities_with_launch_stack"] == 18


@pytest.mark.parametrize("offcpu", [False, True], ids=["gpu-only", "offcpu"])
def test_critical_path_through_the_gpu(ep, fake_cuda, offcpu):
    """150 ms of CPU work, three 100 ms kernels waited for, a 0.1 ms copy waited for, 20 ms
    of CPU work: the path goes exit <- CPU <- sync <- copy <- launch <- CPU <- sync <- the
    kernels <- launch <- CPU. The GPU shares are the fake GPU's exact durations."""
    record_fake(ep, fake_cuda, *(["--offcpu"] if offcpu else []), app="critpath")
    cp = json.loads(ep.run("critical-path", "--json", "--segments", "--limit", "0").stdout)
    k = cp["by_kind"]
    assert k["gpu-compute"] == 300_000_000, k
    assert k["gpu-copy"] == 100_000, k
    # the fixture's own clock: at least 170 ms of CPU work, running or waiting for a CPU
    assert k["on-cpu"] + k["runnable"] >= 170_000_000, k
    assert 0 < k["gpu-launch"] < 20_000_000, k
    assert k["gpu-sync"] < 20_000_000, k  # the CPU noticing the GPU was done
    assert cp["total_ns"] >= 0.95 * cp["wall_ns"], cp
    segs = cp["segments"]
    gpu = [s for s in segs if s["kind"] == "gpu-compute"]
    assert [s["frame"] for s in gpu] == ["long_ms100"] * 3, gpu
    assert {(s["gpu_device"], s["gpu_stream"], s["tid"]) for s in gpu} == {(0, 7, 0)}
    assert all(a["start_ns"] + a["dur_ns"] == b["start_ns"] for a, b in zip(gpu, gpu[1:]))
    kinds = [s["kind"] for s in segs]
    first = kinds.index("gpu-compute")
    assert kinds[first - 1] == "gpu-launch" and kinds[first + 3] == "gpu-sync", kinds
    assert "gpu-copy" in kinds[first + 3:], kinds
    # the thread sleeps inside cuCtxSynchronize (--offcpu sees it): the GPU explains that wait
    assert "sleep" not in kinds[first:] and "runnable" not in kinds[first:first + 6], kinds
    funcs = {f["name"]: f["ns"] for f in cp["functions"]}
    assert funcs["[gpu] long_ms100"] == 300_000_000, funcs
    top = sorted(funcs.items(), key=lambda kv: -kv[1])[:24]  # pytest's repr cuts a dict short
    assert funcs["launch_long"] >= 300_000_000 and funcs["cpu_work"] >= 100_000_000, top
    fg = {tuple(f[-2:]): (f[0], ns) for f, ns in ep.folded("eprof.data", "--critical-path")}
    assert fg[("launch_long", "[gpu] long_ms100")] == ("fake_critpath", 300_000_000), fg
    text = ep.run("critical-path").stdout
    assert "gpu-compute" in text and "GPU 0 stream 7" in text, text
    ep.run("trace", "-o", "t.json")
    with open(os.path.join(ep.dir, "t.json")) as f:
        ev = json.load(f)["traceEvents"]
    cps = [e["name"] for e in ev if e["ph"] == "X" and e.get("cat") == "critical_path"]
    assert cps.count("GPU 0 stream 7: gpu-compute long_ms100") == 3, cps


def have_uprobe_session():
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    return (major, minor) >= (6, 13) and "EPROF_NO_UPROBE_SESSION" not in os.environ


@pytest.mark.parametrize("mode", ["session", "no-session"])
@pytest.mark.parametrize("rate", [0, 3, 100])
def test_launch_entry_only_keeps_counts_and_join(ep, fake_cuda, mode, rate):
    """Launches past --cuda-stack-rate are sent at entry without a return probe (uprobe
    sessions): counts, kernel names and the CUPTI join stay exact; only those launches lose
    their duration and result. The fake runtime's cudaLaunchKernel calls the driver's
    cuLaunchKernel: one launch each, however they were probed."""
    env = {"EPROF_NO_UPROBE_SESSION": "1"} if mode == "no-session" else {}
    record_fake(ep, fake_cuda, "--cuda-stack-rate", str(rate), app="rtapp", env_extra=env)
    rep = ep.report_json()
    gpu = rep["gpu"]
    api = api_by_name(gpu)
    assert api["cudaLaunchKernel"]["count"] == 12 and api["cuLaunchKernel"]["count"] == 12, api
    assert gpu["launches"] == 12, gpu  # the nested driver launches are not counted again
    assert {k["name"]: k["count"] for k in gpu["launched_kernels"]} == {"rt_kernel_a": 12}
    # a nested launch needs no stack: the runtime launch around it has it
    assert rep["stats"]["cuda_launches_without_stack"] == 12 + max(0, 12 - rate)
    timed = 12 if mode == "no-session" or not have_uprobe_session() else min(rate, 12)
    assert gpu["launches_timed"] == timed, gpu
    assert gpu["activities"] == 12 and gpu["activities_with_launch_stack"] == 12, gpu
    fg = {tuple(f[-2:]): ns for f, ns in ep.folded("eprof.data", "--gpu")}
    with_stack = sum(ns for k, ns in fg.items() if k[0] == "rt_launch")
    assert with_stack == min(rate, 12) * 2_000_000, fg


# What tests/fixtures/fakecuda/fake_occ.c launches on the fake H100 (64 warps, 32 blocks,
# 65536 registers in 4 sub-partitions, 228 KiB shared memory per SM; 1 KiB reserved per block,
# 128-byte units), and the theoretical occupancy worked out by hand:
OCC = {
    # 256 threads = 8 warps; 32 regs -> 1024 per warp: 16 warps per sub-partition = 8 blocks;
    # 64 / 8 = 8 blocks by warps: 64 warps, 100% (a tie: the warps)
    "occ_full": (1.0, "warps"),
    # 128 regs -> 4096 per warp: 4 warps per sub-partition = 16 warps = 2 blocks: 25%
    "occ_regs": (0.25, "registers"),
    # 128 threads = 4 warps, 48 KiB + 1 KiB = 50176 B: 233472 / 50176 = 4 blocks = 16 warps
    "occ_smem": (0.25, "shared"),
    # 32 threads = 1 warp, at most 32 blocks per SM: 32 warps
    "occ_small": (0.5, "blocks"),
    # 3 launches of 1 ms at 100%, 1 of 5 ms at 25%: GPU-time-weighted (3 + 1.25) / 8
    "occ_mixed": (0.53125, "registers"),
}


def test_cupti_occupancy_from_device_records(ep, fake_cuda):
    """The device record and the kernels' registers and shared memory go through the injection
    library, the socket and the file into the report's occupancy figures."""
    record_fake(ep, fake_cuda, app="occ")
    gpu = ep.report_json()["gpu"]
    kernels = {k["name"]: k for k in gpu["kernels"]}
    assert set(kernels) == set(OCC), kernels
    for name, (occ, limiter) in OCC.items():
        k = kernels[name]
        assert abs(k["occupancy"] - occ) < 1e-4, (name, k)
        assert k["occupancy_limiter"] == limiter, (name, k)
    cfgs = {(c["registers_per_thread"], c["count"], c["total_ns"], c["occupancy"])
            for c in kernels["occ_mixed"]["configs"]}
    assert cfgs == {(32, 3, 3_000_000, 1.0), (128, 1, 5_000_000, 0.25)}, cfgs
    smem = kernels["occ_smem"]["configs"][0]
    assert smem["shared_bytes_per_block"] == 48 * 1024 and smem["threads_per_block"] == 128
    assert smem["blocks_per_sm"] == 4 and smem["warps_per_sm"] == 16
    dev = gpu["device_props"]
    assert [(d["device"], d["name"], d["sm_count"], d["cc_major"]) for d in dev] == \
        [(0, "Fake H100", 132, 9)], dev
    text = ep.run("report").stdout
    lines = {}
    for line in text.splitlines():  # the kernels table comes before the launches table
        if "occ_" in line:
            lines.setdefault(line.split()[-1], line)
    assert "25% registers  occ_regs" in lines["occ_regs"], text
    assert "53% registers*  occ_mixed" in lines["occ_mixed"], text
    assert "device 0: Fake H100, 132 SMs, compute capability 9.0" in text


def test_cupti_no_device_records_no_occupancy(ep, fake_cuda):
    """A CUPTI that gives no device records: no occupancy figure, never a guessed one."""
    record_fake(ep, fake_cuda, app="occ", env_extra={"FAKE_CUPTI_NO_DEVICE": "1"})
    gpu = ep.report_json()["gpu"]
    assert len(gpu["kernels"]) == len(OCC)
    for k in gpu["kernels"]:
        assert k["occupancy"] is None and k["occupancy_limiter"] is None, k
    assert gpu["device_props"] == []
    text = ep.run("report").stdout
    assert any(line.rstrip().endswith("-  occ_full") for line in text.splitlines()), text


# --- the CUPTI collector against what the real CUPTI does (one test per fault) -------------


def kernel_counts(gpu):
    return {k["name"]: k["count"] for k in gpu["kernels"]}


def test_cupti_13_0_ga_runs_under_a_13_0_update_build(ep, fake_cuda):
    """The fake is 13.0 GA (130000), the headers eprof is built with may be newer (130001):
    the same major version is read with the same layouts."""
    record_fake(ep, fake_cuda, app="faults", args=("plain",))
    gpu = ep.report_json()["gpu"]
    assert kernel_counts(gpu) == {"fault_a": 12}
    assert gpu["cupti_version"].startswith("13.0 (API 130000"), gpu["cupti_version"]
    assert gpu["cupti_path"] == fake_cuda["cupti"]


def test_cupti_loaded_copy_is_used_never_a_second(ep, fake_cuda):
    """Like a PyTorch process, the program has loaded libcupti.so.13 already; a libcupti.so
    on the search path is another copy and must not be loaded (no EPROF_LIBCUPTI here)."""
    env = dict(os.environ, LD_LIBRARY_PATH=fake_cuda["decoy"], FAKE_CUPTI_REPORT="1")
    env.pop("EPROF_LIBCUPTI", None)
    env.pop("CUDA_INJECTION64_PATH", None)
    r = ep.run("record", "-q", "--", fake_cuda["faults_linked"], "plain", env=env)
    assert "DECOY" not in r.stderr, r.stderr
    gpu = ep.report_json()["gpu"]
    assert kernel_counts(gpu) == {"fault_a": 12}
    assert gpu["cupti_path"] == fake_cuda["cupti13"]


def test_cupti_bad_times_and_foreign_clock_dropped_and_counted(ep, fake_cuda):
    """2 kernels with a zero start, 2 with end < start, 3 on another clock (as when another
    CUPTI user re-registers the timestamp callback): dropped, counted, the device figures
    made of the 5 good ones only."""
    record_fake(ep, fake_cuda, app="faults", args=("plain",),
                env_extra={"FAKE_CUPTI_BAD_TIMES": "2", "FAKE_CUPTI_FOREIGN_CLOCK": "3"})
    rep = ep.report_json()
    st, gpu = rep["stats"], rep["gpu"]
    assert (st["gpu_records_zero_time"], st["gpu_records_inverted_time"],
            st["gpu_records_foreign_clock"]) == (2, 2, 3), st
    assert kernel_counts(gpu) == {"fault_a": 5}
    dev = gpu["devices"][0]
    assert dev["busy_ns"] == 5 * 2_000_000
    assert dev["window_ns"] < 10 * 10**9, dev  # not the machine's uptime
    text = ep.run("report").stdout
    assert "2 still in flight (zero times), 2 with end before start, 3 on another tool's clock" \
        in text, text


def test_cupti_exit_with_work_queued(ep, fake_cuda):
    """The program exits with 10 kernels (20 ms) still queued: each is recorded whole, none
    as the unfinished record a forced flush returns."""
    record_fake(ep, fake_cuda, app="faults", args=("nosync",))
    rep = ep.report_json()
    k = rep["gpu"]["kernels"][0]
    assert (k["name"], k["count"], k["total_ns"]) == ("fault_a", 10, 20_000_000), k
    assert rep["stats"]["gpu_records_zero_time"] == 0


def test_cupti_records_after_the_exit_handler(ep, fake_cuda):
    """An exit handler that runs after eprof's launches 2 more kernels; CUPTI hands them out
    when the context is destroyed, from the driver's teardown: they arrive."""
    record_fake(ep, fake_cuda, app="faults", args=("late",))
    gpu = ep.report_json()["gpu"]
    assert kernel_counts(gpu) == {"fault_a": 3, "late_kernel": 2}
    assert gpu["activities_with_launch_stack"] == gpu["activities"] == 5


def test_cupti_fork_without_exec(ep, fake_cuda):
    """A child forked without exec exits through exit(): it must neither send the parent's
    unsent records again under its own pid nor hang."""
    record_fake(ep, fake_cuda, app="faults", args=("fork",))
    gpu = ep.report_json()["gpu"]
    assert kernel_counts(gpu) == {"fault_a": 10}
    pids = {c["pid"] for k in gpu["kernels"] for c in k["configs"]}
    assert len(pids) == 1, pids
    assert gpu["activities_with_launch_stack"] == 10


def test_cupti_long_kernel_names(ep, fake_cuda):
    """A 2,000-character mangled name (CUTLASS and flash-attention kernels have them) comes
    whole, so it demangles."""
    record_fake(ep, fake_cuda, app="faults", args=("longname",))
    gpu = ep.report_json()["gpu"]
    assert kernel_counts(gpu) == {"a" * 1990: 3}, [k["name"][:40] for k in gpu["kernels"]]
    # the launch side reads the name cuModuleGetFunction was given up to 256 bytes: shown cut,
    # and left out of the join's name check rather than counted as another kernel
    (launched,) = gpu["launched_kernels"]
    assert launched["name"].startswith("_Z1990aaa") and launched["name"].endswith("\u2026")
    assert gpu["activities_with_launch_stack"] == 3
    assert (gpu["activities_launch_name_checked"], gpu["activities_launch_name_mismatch"]) == (0, 0)


def test_cupti_sets_and_peer_copies(ep, fake_cuda):
    """MEMSET records with their sizes, and a peer-to-peer copy (MEMCPY2)."""
    record_fake(ep, fake_cuda, app="faults", args=("copies",))
    gpu = ep.report_json()["gpu"]
    ptop = [m for m in gpu["memcpy"] if m["direction"] == "PtoP"]
    assert ptop and ptop[0]["count"] == 1 and ptop[0]["bytes"] == 1 << 20, gpu["memcpy"]
    assert gpu["activities"] == 3 and gpu["activities_with_launch_stack"] == 3
    sets = [e for e in ep.folded("eprof.data", "--gpu") if e[0][-1].startswith("[gpu] memset")]
    assert sum(ns for _, ns in sets) == 2 * (64 * 1000 + 1000), sets


def test_cupti_another_subscriber(ep, fake_cuda):
    """torch.profiler (Kineto) or Nsight holds CUPTI: nothing of ours stays enabled, the
    report says why GPU activity is missing, the uprobe side goes on."""
    r = record_fake(ep, fake_cuda, app="faults", args=("plain",),
                    env_extra={"FAKE_CUPTI_SUBSCRIBED": "1", "FAKE_CUPTI_REPORT": "1"})
    assert "0 kinds enabled" in r.stderr, r.stderr
    assert "already had a subscriber" in r.stderr, r.stderr
    gpu = ep.report_json()["gpu"]
    assert gpu["activities"] == 0
    assert "1 process: CUPTI already had a subscriber" in gpu["not_recorded"]
    assert {a["name"]: a["count"] for a in gpu["api"]}["cuLaunchKernel"] == 12
    assert "GPU activity not recorded in 1 process" in ep.run("report").stdout


def test_cupti_own_drops_counted(ep, fake_cuda):
    record_fake(ep, fake_cuda, app="faults", args=("plain",),
                env_extra={"FAKE_CUPTI_DROPPED": "7"})
    assert ep.report_json()["stats"]["gpu_records_lost"] == 7


def test_cupti_in_another_pid_namespace(ep, fake_cuda):
    """In a container the library's getpid() and gettid() are those of its namespace: the
    recorder takes the pid from the socket and maps the thread ids, so the join holds - also
    for the records the library sends as the process exits, when its threads are gone."""
    unshare = shutil.which("unshare")
    if not unshare:
        pytest.skip("skipped: no unshare")
    # started through unshare: its CUDA library is found by the 200 ms rescan of the maps, and
    # the uprobes' registration waits for every fork in flight (4 s once, at load 19): the app
    # waits until cuLaunchKernel carries its breakpoint. All 12 launches then come in one
    # burst, their records at exit.
    env = dict(os.environ, EPROF_LIBCUPTI=fake_cuda["cupti"], FAKE_WAIT_PROBED="1")
    env.pop("CUDA_INJECTION64_PATH", None)
    ep.run("record", "-q", "--", unshare, "--pid", "--fork", "--mount-proc",
           fake_cuda["faults"], "plain", env=env)
    gpu = ep.report_json()["gpu"]
    assert kernel_counts(gpu) == {"fault_a": 12}
    assert gpu["activities_with_launch_stack"] == 12
    pids = {c["pid"] for k in gpu["kernels"] for c in k["configs"]}
    assert len(pids) == 1 and 1 not in pids, pids


@pytest.mark.parametrize("rate", ["0", "100"], ids=["entry-only", "timed"])
@pytest.mark.parametrize("thunks", [False, True], ids=["thunk-skipped", "thunk-probed"])
def test_cupti_static_runtime_launches(ep, fake_cuda, rate, thunks):
    """nvcc 13's <<<>>> (__cudaGetKernel, then __cudaLaunchKernel jumping to cudaLaunchKernel
    with the cudaKernel_t) and direct cudaLaunchKernel calls of a statically linked runtime,
    counted once and named by their host stub; a library's launches through a runtime eprof
    does not probe are not charged to the program's last launch."""
    env = {"EPROF_CUDA_PROBE_THUNKS": "1"} if thunks else {}
    record_fake(ep, fake_cuda, "--cuda-stack-rate", rate, app="static", env_extra=env)
    gpu = ep.report_json()["gpu"]
    assert gpu["launches"] == 10
    assert {k["name"]: k["count"] for k in gpu["launched_kernels"]} == {"static_kernel": 10}
    assert kernel_counts(gpu) == {"static_kernel": 10, "lib_kernel": 3}
    assert gpu["activities_with_launch_stack"] == 10
    assert gpu["activities_launch_name_checked"] == 10
    assert gpu["activities_launch_name_mismatch"] == 0
    if rate != "0":  # with stacks: both call sites
        stacks = [f for f, _ in ep.folded("eprof.data", "--gpu") if f[-1] == "[gpu] static_kernel"]
        assert {f[-2] for f in stacks} == {"launch_chevron", "launch_direct"}, stacks

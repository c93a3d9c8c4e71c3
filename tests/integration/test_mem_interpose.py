# SPDX-License-Identifier: MIT
"""record --mem -- CMD: heap sampling inside the process (libeprof_mem.so through LD_PRELOAD,
its markers probed), against the fixtures' known answers. docs/memory.md."""
import os
import subprocess
import time

import pytest

from conftest import FIXTURES
from test_mem import (LEAKS, LEAKED, build_fixture, by_site, check_exact, fork_leaks, memory,
                      record_attached)

pytestmark = pytest.mark.usefixtures("need_bpf")

INTERPOSED = "sampled in the process by"
# --mem=1 through the interposer (every call hits its markers) instead of the uprobes
EVERY_CALL = dict(os.environ, EPROF_MEM_INTERPOSE="1")


@pytest.fixture(scope="module")
def memfix(tmp_path_factory):
    return build_fixture(tmp_path_factory, "memfix")


@pytest.fixture(scope="module")
def memstorm(tmp_path_factory):
    out = tmp_path_factory.mktemp("memstorm") / "memstorm"
    subprocess.run(["cc", "-O2", "-g", "-pthread", "-fno-omit-frame-pointer",
                    "-fno-optimize-sibling-calls", "-o", str(out),
                    os.path.join(FIXTURES, "memstorm.c")], check=True)
    return str(out)


def no_interposer_frames(groups):
    for g in groups:
        for f in g["stack"][:3]:
            assert not f.startswith("eprof_mem_hit") and f not in ("note", "sampled"), g


def test_sampled_launch_is_interposed(ep, memfix):
    """The default --mem of a launched command samples in the process: estimates as with the
    uprobes, stacks that start at the allocating function, every call counted."""
    blocks, size, churn = 2000, 100000, 200000
    r = ep.run("record", "-v", "--mem", "--", memfix, str(churn), "-", str(blocks), str(size))
    assert INTERPOSED in r.stderr, r.stderr
    mem = memory(ep)
    assert mem["sample_bytes"] == 524288 and mem["events_lost"] == 0
    peak = blocks * size + LEAKED
    assert abs(mem["peak_bytes"] - peak) <= 0.2 * peak, (mem["peak_bytes"], peak)
    assert mem["peak_stacks"][0]["stack"][0] == "peak_phase", mem["peak_stacks"][0]
    no_interposer_frames(mem["allocated"])
    # calls counted in the process (flushed at each sample and at exit): all of them
    calls = blocks + churn + churn // 10 + sum(n for _, n in LEAKS.values())
    assert calls <= mem["calls_seen"] <= calls + 2000, (mem["calls_seen"], calls)


def test_every_call_through_the_interposer_is_exact(ep, memfix):
    r = ep.run("record", "-v", "--mem=1", "--ringbuf-mb", "64", "--", memfix, "20000",
               env=EVERY_CALL)
    assert INTERPOSED in r.stderr, r.stderr
    mem = memory(ep)
    check_exact(mem, 20000)
    no_interposer_frames(mem["leaks"])


def test_thread_storm(ep, memstorm):
    """32 threads allocating, reallocating and freeing at once: the program's data stays
    right (it checks every block), the leaks of each thread are estimated and named."""
    threads, iters = 32, 5000
    # ~5,000 samples of 16 KiB stacks: room for all in the ring on a loaded machine
    r = ep.run("record", "-v", "--mem=65536", "--ringbuf-mb", "128", "--", memstorm,
               str(threads), str(iters))
    assert INTERPOSED in r.stderr, r.stderr
    assert f"storm ok {threads * (iters + 10)}" in r.stdout, r.stdout + r.stderr
    mem = memory(ep)
    assert mem["events_lost"] == 0
    leaked = sum(g["bytes"] for g in mem["leaks"] if "storm_leak" in g["stack"])
    want = threads * 10 * 50000
    assert abs(leaked - want) <= 0.25 * want, (leaked, want)
    # every thread's calls reach the recorder, the last ones at its exit
    assert mem["calls_seen"] >= threads * (iters + 10), mem["calls_seen"]


def check_storm_leaks(mem, threads):
    """Only the storm_leak blocks are left (10 of 50,000 bytes a thread), exactly."""
    leaks = {}
    for g in mem["leaks"]:
        for f in ("storm_leak", "churn"):
            if f in g["stack"]:
                b, c = leaks.get(f, (0, 0))
                leaks[f] = (b + g["bytes"], c + g["count"])
                break
    assert leaks == {"storm_leak": (threads * 10 * 50000, threads * 10)}, leaks


def test_thread_storm_every_call_exact(ep, memstorm):
    """--mem=1 through the interposer: each thread's frees go to the recorder in timed
    batches (the last ones when the thread exits), so every churned block is matched and
    only the storm_leak blocks are left, exactly."""
    # ~10,000 allocations of 4 KiB stacks: they fit in the ring however late it is read
    threads, iters = 32, 300
    r = ep.run("record", "-v", "--mem=1", "--ringbuf-mb", "64", "--", memstorm, str(threads),
               str(iters), env=EVERY_CALL)
    assert INTERPOSED in r.stderr, r.stderr
    assert f"storm ok {threads * (iters + 10)}" in r.stdout, r.stdout + r.stderr
    mem = memory(ep)
    assert mem["events_lost"] == 0
    check_storm_leaks(mem, threads)


def test_fork_child_is_interposed_too(ep, tmp_path):
    """A child forked without exec keeps the interposer (and its state, consistent: the lock
    is free in the child); the recorder probes its markers for the child's pid."""
    exe = build_fixture_at(tmp_path, "memfork")
    r = ep.run("record", "-v", "--mem=1", "--", exe, env=EVERY_CALL)
    assert INTERPOSED in r.stderr
    leaks = fork_leaks(memory(ep))
    assert leaks.get("parent_leak") == (30000, 10), leaks
    assert leaks.get("child_leak") == (50000, 25), leaks


def test_fork_after_many_marker_hits(ep, tmp_path):
    """The parent hits the markers thousands of times, then forks a child that allocates at
    once: the child's copies of the markers must work (a probed nop5 marker was turned by
    the kernel into a call to a trampoline the child does not map: it crashed)."""
    exe = build_fixture_at(tmp_path, "memforkhot")
    r = ep.run("record", "-v", "--mem=4096", "--", exe, "200000")
    assert INTERPOSED in r.stderr
    assert "fork ok" in r.stdout, r.stdout + r.stderr


def test_exec_keeps_the_interposer(ep, memfix):
    """LD_PRELOAD stays in the environment: a program the command execs samples in the
    process too (here sh execs the fixture: the same pid, nothing missed)."""
    r = ep.run("record", "-v", "--mem=1", "--ringbuf-mb", "64", "--", "/bin/sh", "-c",
               f"exec {memfix} 20000", env=EVERY_CALL)
    assert INTERPOSED in r.stderr
    check_exact(memory(ep), 20000)


def build_memdl_user(tmp_path):
    lib = str(tmp_path / "libmemuser.so")
    exe = str(tmp_path / "memdl-user")
    subprocess.run(["cc", "-O2", "-g", "-shared", "-fPIC", "-o", lib,
                    os.path.join(FIXTURES, "memlib_user.c")], check=True)
    subprocess.run(["cc", "-O2", "-g", "-fno-omit-frame-pointer", "-DALLOC_SYM=\"lib_alloc\"",
                    "-DFREE_SYM=\"lib_free\"", "-o", exe, os.path.join(FIXTURES, "memdl.c"),
                    "-ldl"], check=True)
    return exe, lib


def lib_leaks(mem):
    got = [g for g in mem["leaks"] if "use_lib" in g["stack"]]
    return sum(g["bytes"] for g in got), sum(g["count"] for g in got)


def test_dlopen_library_that_allocates(ep, tmp_path):
    """A library dlopen()ed mid-run calls malloc: preloaded, the interposer is its malloc."""
    exe, lib = build_memdl_user(tmp_path)
    r = ep.run("record", "-v", "--mem=1", "--", exe, lib, "300", env=EVERY_CALL)
    assert INTERPOSED in r.stderr
    assert lib_leaks(memory(ep)) == (15000, 5), [g["stack"] for g in memory(ep)["leaks"]]


def test_attach_dlopen_library_that_allocates(ep, tmp_path):
    """On attach, an object dlopen()ed after the injection gets its GOT entries patched at
    the next sample of any thread (the program's own 4 KiB blocks here, each sampled with a
    100-byte mean; the library's 3000-byte blocks then are too)."""
    exe, lib = build_memdl_user(tmp_path)
    err = record_attached(ep, [exe, lib, "300"], "--mem=100")
    assert "libeprof_mem.so loaded into" in err, err
    got = lib_leaks(memory(ep))
    # 5 blocks of 3000 bytes left, each sampled with probability 1 - e^-30
    assert got == (15000, 5), memory(ep)["leaks"]


JEMALLOC = [p for p in ("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
                        "/usr/lib/x86_64-linux-gnu/libjemalloc.so") if os.path.exists(p)]


def build_jemalloc_user(tmp_path, how):
    """memfix linked with jemalloc, or built plainly and run with jemalloc in LD_PRELOAD."""
    exe = str(tmp_path / f"memfix-je-{how}")
    cmd = ["cc", "-O2", "-g", "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls", "-o",
           exe, os.path.join(FIXTURES, "memfix.c")]
    subprocess.run(cmd + ([JEMALLOC[0]] if how == "linked" else []), check=True)
    env = dict(os.environ)
    if how == "preloaded":
        env["LD_PRELOAD"] = JEMALLOC[0]
    return exe, env


@pytest.mark.skipif(not JEMALLOC, reason="skipped: libjemalloc2 is not installed")
@pytest.mark.parametrize("how", ["linked", "preloaded"])
def test_jemalloc_program(ep, tmp_path, how):
    """A program whose allocator is jemalloc (linked, or preloaded by the user: eprof puts its
    interposer first in LD_PRELOAD): the interposer forwards to jemalloc's malloc (the next
    definition after it); leaks exact with --mem=1, the peak estimated when sampled."""
    exe, env = build_jemalloc_user(tmp_path, how)
    r = ep.run("record", "-v", "--mem=1", "--ringbuf-mb", "64", "--", exe, "20000",
               env=dict(env, EPROF_MEM_INTERPOSE="1"))
    assert INTERPOSED in r.stderr
    leaks = by_site(memory(ep)["leaks"])
    for name, want in LEAKS.items():
        assert leaks.get(name) == want, (name, leaks)
    r = ep.run("record", "-v", "--mem", "--", exe, "200000", "-", "2000", "100000", env=env)
    assert INTERPOSED in r.stderr
    mem = memory(ep)
    peak = 2000 * 100000 + LEAKED
    assert abs(mem["peak_bytes"] - peak) <= 0.2 * peak, (mem["peak_bytes"], peak)


@pytest.mark.skipif(not os.path.exists("/usr/lib/x86_64-linux-gnu/libc.a"),
                    reason="skipped: no static libc (libc6-dev)")
def test_static_binary_falls_back_to_uprobes(ep, tmp_path):
    exe = str(tmp_path / "memfix-static")
    subprocess.run(["cc", "-O2", "-g", "-static", "-fno-omit-frame-pointer",
                    "-fno-optimize-sibling-calls", "-o", exe, os.path.join(FIXTURES, "memfix.c")],
                   check=True)
    r = ep.run("record", "-v", "--mem", "--", exe, "200000", "-", "2000", "100000")
    assert "has its own malloc and free" in r.stderr, r.stderr
    mem = memory(ep)
    peak = 2000 * 100000 + LEAKED
    assert abs(mem["peak_bytes"] - peak) <= 0.2 * peak, (mem["peak_bytes"], peak)


def test_interposer_can_be_turned_off(ep, memfix):
    r = ep.run("record", "-v", "--mem", "--", memfix, "2000",
               env=dict(os.environ, EPROF_MEM_INTERPOSE="0"))
    assert INTERPOSED not in r.stderr and "uprobe sessions" in r.stderr, r.stderr


def build_fixture_at(tmp_path, name):
    out = str(tmp_path / name)
    subprocess.run(["cc", "-O2", "-g", "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls",
                    "-o", out, os.path.join(FIXTURES, name + ".c")], check=True)
    return out


# --- attach mode: injected, GOT entries redirected, restored at the end -----------------------


def test_attach_sampled_estimates(ep, memfix):
    churn = 200000
    err = record_attached(ep, [memfix, str(churn)], "--mem")
    # memfix takes GOFILE after CHURN; its peak phase is the default (400 x 10,000 bytes)
    assert "libeprof_mem.so loaded into" in err and INTERPOSED in err, err
    mem = memory(ep)
    assert mem["sample_bytes"] == 524288 and mem["events_lost"] == 0
    no_interposer_frames(mem["allocated"])
    assert mem["calls_seen"] >= churn + churn // 10 + 400, mem["calls_seen"]


def test_attach_every_call_exact(ep, memfix):
    err = record_attached(ep, [memfix, "20000"], "--mem=1", "--ringbuf-mb", "64",
                          env=EVERY_CALL)
    assert "libeprof_mem.so loaded into" in err, err
    check_exact(memory(ep), 20000)


def test_attach_blocks_from_before_freed_after(ep, tmp_path):
    """1000 blocks made before the attach, checked, reallocated and freed after it: they
    reach glibc (the program would crash otherwise), and are neither leaks nor negative."""
    exe = build_fixture_at(tmp_path, "memprior")
    record_attached(ep, [exe], "--mem=1", env=EVERY_CALL)
    mem = memory(ep)
    leaks = {}
    for g in mem["leaks"]:
        for f in ("after_leak", "make_before"):
            if f in g["stack"]:
                b, c = leaks.get(f, (0, 0))
                leaks[f] = (b + g["bytes"], c + g["count"])
    assert leaks == {"after_leak": (50000, 10)}, mem["leaks"]
    assert mem["peak_bytes"] >= 50000 and mem["allocated_bytes"] >= 50000
    assert all(g["bytes"] > 0 for g in mem["allocated"])


def test_attach_detach_mid_storm(ep, memstorm, tmp_path):
    """record -p -d 1 in the middle of a 32-thread storm: the entries are written back while
    threads allocate, and the program runs on, checking all of its data, until told to stop."""
    stop = str(tmp_path / "stop")
    target = subprocess.Popen([memstorm, "32", "1000", stop], stdout=subprocess.PIPE, text=True)
    try:
        r = ep.run("record", "-v", "--mem", "-p", str(target.pid), "-d", "1")
        assert "libeprof_mem.so loaded into" in r.stderr, r.stderr
        time.sleep(0.5)  # after the detach: the restored entries, the inert wrappers
        assert target.poll() is None, "the storm ended by itself"
        open(stop, "w").close()
        out, _ = target.communicate(timeout=120)
        assert target.returncode == 0 and out.startswith("storm ok"), out
        # the library stays loaded (inert): threads may still be inside a wrapper
    finally:
        if target.poll() is None:
            target.kill()
            target.wait()
    mem = memory(ep)
    assert mem["events_lost"] == 0 and mem["calls_seen"] > 0 and mem["allocated_bytes"] > 0


PY_ALLOC = ("import os, sys, time\n"
            "go = sys.argv[1]\n"
            "while not os.path.exists(go): time.sleep(0.005)\n"
            "def build():\n"
            "    return [('%d-' % i) * 120 for i in range(200000)]\n"
            "keep = build()\n"
            "time.sleep(0.3)\n")


def test_attach_python(ep):
    """Debian's python3 is a non-PIE executable that takes malloc's address: its malloc
    symbol is a PLT entry leading to its own GOT. The interposer must forward to libc's
    malloc, not to that entry (which it patched: an endless recursion before)."""
    err = record_attached(ep, ["/usr/bin/python3", "-c", PY_ALLOC], "--mem")
    assert "libeprof_mem.so loaded into" in err, err
    mem = memory(ep)
    # 200,000 strings of 600-740 bytes (and the list) live at the peak, made in build()
    live = sum(g["bytes"] for g in mem["peak_stacks"] if "build" in g["stack"])
    want = sum(49 + len(str(i)) * 120 + 120 for i in range(200000))
    assert 0.7 * want < live < 1.3 * want, (live, want, mem["peak_stacks"][:3])


# --- --mem=1 through the channel: records and in-process stacks on a socket, no trap ---------

# the default of --mem=1 at launch and attached
CHANNEL = {k: v for k, v in os.environ.items() if k != "EPROF_MEM_INTERPOSE"}
CHANNEL_LINE = "mem: channel:"
CHANNEL_ON = "sent by"


def top_stacks(groups, n=4, depth=4):
    return sorted(tuple(g["stack"][:depth]) for g in groups[:n])


def test_channel_launch_exact_and_stacks_as_the_uprobes(ep, memfix):
    """Every call through the channel: the fixture's exact answers, and the same stacks as
    the allocator uprobes give (leaf function, callers, libc's start code: all named)."""
    r = ep.run("record", "-v", "--mem=1", "--", memfix, "20000", env=CHANNEL)
    assert CHANNEL_LINE in r.stderr and " 0 allocations with a truncated stack" in r.stderr, \
        r.stderr
    mem = memory(ep)
    check_exact(mem, 20000)
    no_interposer_frames(mem["leaks"])
    chan = top_stacks(mem["leaks"])
    ep.run("record", "-q", "--mem=1", "--ringbuf-mb", "64", "--", memfix, "20000",
           env=dict(os.environ, EPROF_MEM_INTERPOSE="0"))
    up = memory(ep)
    assert chan == top_stacks(up["leaks"])
    # the library's own tables (~280 MiB reserved) are not the program's anonymous mappings:
    # what is left over the uprobes' figure is the CFI rows it built with the real allocator
    assert mem["mapped_peak_bytes"] <= up["mapped_peak_bytes"] + (4 << 20), (mem, up)
    assert all(s[1] == "main" and "[unknown]" not in " ".join(s) for s in chan), chan


def test_channel_thread_storm_exact(ep, memstorm):
    """32 threads: each sends its own buffers, the last ones at its exit; only the storm_leak
    blocks are left, exactly, and the program's own checks pass."""
    threads, iters = 32, 2000
    r = ep.run("record", "-v", "--mem=1", "--", memstorm, str(threads), str(iters),
               env=CHANNEL)
    assert CHANNEL_LINE in r.stderr, r.stderr
    assert f"storm ok {threads * (iters + 10)}" in r.stdout, r.stdout + r.stderr
    mem = memory(ep)
    check_storm_leaks(mem, threads)


def test_channel_fork_and_exec(ep, memfix, tmp_path):
    """A forked child opens its own connection (its stack ids start anew); a program exec'd
    by the command connects again."""
    exe = build_fixture_at(tmp_path, "memfork")
    r = ep.run("record", "-v", "--mem=1", "--", exe, env=CHANNEL)
    assert CHANNEL_LINE in r.stderr and "2 processes" in r.stderr, r.stderr
    leaks = fork_leaks(memory(ep))
    assert leaks.get("parent_leak") == (30000, 10), leaks
    assert leaks.get("child_leak") == (50000, 25), leaks
    r = ep.run("record", "-v", "--mem=1", "--", "/bin/sh", "-c", f"exec {memfix} 20000",
               env=CHANNEL)
    assert CHANNEL_LINE in r.stderr
    check_exact(memory(ep), 20000)


def test_channel_attach_exact(ep, memfix):
    err = record_attached(ep, [memfix, "20000"], "--mem=1", env=CHANNEL)
    assert "libeprof_mem.so loaded into" in err and CHANNEL_LINE in err, err
    check_exact(memory(ep), 20000)


def test_channel_attach_blocks_from_before_freed_after(ep, tmp_path):
    exe = build_fixture_at(tmp_path, "memprior")
    err = record_attached(ep, [exe], "--mem=1", env=CHANNEL)
    assert CHANNEL_LINE in err, err
    mem = memory(ep)
    leaks = {}
    for g in mem["leaks"]:
        for f in ("after_leak", "make_before"):
            if f in g["stack"]:
                b, c = leaks.get(f, (0, 0))
                leaks[f] = (b + g["bytes"], c + g["count"])
    assert leaks == {"after_leak": (50000, 10)}, mem["leaks"]
    assert all(g["bytes"] > 0 for g in mem["allocated"])


PY_NESTED = ("def make_strings():\n"
             "    return [('%d-' % i) * 120 for i in range(50000)]\n"
             "def outer():\n"
             "    return [make_strings() for _ in range(4)]\n"
             "import time\n"
             "keep = outer()\n"
             "time.sleep(0.2)\n")


def test_channel_python_frames_as_the_uprobes(ep):
    """CPython through the channel: the library walks the interpreter frames in place once the
    recorder sends the layout; the peak's top stack names the same Python functions, in the
    same order, as the uprobes' walk in BPF."""
    def top_python(env):
        ep.run("record", "-q", "--mem=1", "--", "/usr/bin/python3", "-c", PY_NESTED, env=env,
               timeout=120)
        mem = memory(ep)
        top = mem["peak_stacks"][0]
        assert top["bytes"] > 50_000_000, top
        return [f for f in top["stack"] if f in ("make_strings", "outer", "<module>")
                or f.endswith("<listcomp>")]

    chan = top_python(CHANNEL)
    assert chan[:2] == ["make_strings.<locals>.<listcomp>", "make_strings"], chan
    assert chan == top_python(dict(os.environ, EPROF_MEM_INTERPOSE="0"))

# SPDX-License-Identifier: MIT
"""record --offcpu, the off-CPU readers and eprof critical-path on fixture programs."""
import json
import os
import subprocess

import pytest

from conftest import FIXTURES

pytestmark = pytest.mark.usefixtures("need_bpf")


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    out = tmp_path_factory.mktemp("offcpu-fixtures")
    built = {}
    for src, extra in (("sleephalf", []), ("condwait", ["-pthread"]), ("shortwaits", ["-pthread"]),
                       ("spinners", ["-pthread"])):
        exe = out / src
        subprocess.run(["cc", "-O2", "-g", "-fno-omit-frame-pointer", *extra, "-o", str(exe),
                        os.path.join(FIXTURES, src + ".c")], check=True)
        built[src] = str(exe)
    return built


def offcpu_events(ep, data):
    rep = ep.report_json(data)
    return rep.get("offcpu")


def test_sleep_half_share(ep, progs):
    r = ep.run("record", "--offcpu", "-F", "499", "-q", "-o", "sh.eprof", "--",
               progs["sleephalf"], "2", "60")
    napped_ns, loop_ns, _ = (float(x) for x in r.stdout.split())
    rep = ep.report_json("sh.eprof")
    off = rep["offcpu"]
    # up to 100 sleeps of 10 ms in 2 s, and 60 at least however long a round takes (only 18
    # were made in 2 s on a machine with 6 busy tasks)
    assert off["intervals"] >= 60
    # Off-CPU time inside nap() (blocked, then waiting for a CPU after the wakeup) as a
    # share of the thread's wall time, against the share the program measured itself:
    # about half, less on a busy machine.
    stacks = ep.folded("sh.eprof", "--offcpu")
    in_nap = sum(c for s, c in stacks if "nap" in s)
    share, truth = 100.0 * in_nap / loop_ns, 100.0 * napped_ns / loop_ns
    assert abs(share - truth) <= 5.0, (share, truth)
    # the program's own share: half when idle; a preemption across compute()'s deadline
    # stretches the compute half (29% beside 6 busy tasks, 13.6% beside 15), so only a floor
    # that says it napped
    assert truth > 5.0
    # Wall graph: CPU samples + blocked time cover the thread's wall time.
    wall = sum(c for _, c in ep.folded("sh.eprof", "--wall"))
    assert abs(wall - loop_ns) / loop_ns < 0.1, (wall, loop_ns)
    # The top blocking stack goes through the fixture's nap() (the top stack of all may be
    # compute() preempted, on a machine busy enough)
    top = next(s for s in off["stacks"] if s["kind"] != "runnable")
    assert top["kind"] == "sleep" and "nap" in top["stack"], off["stacks"][:3]
    # Every sleep has its user stack, also one woken and preempted on its way back to user
    # mode (then sent at that switch: once without user frames, ~2 in 60 naps under load)
    sleeps = sum(c for s, c in stacks if "nap" in s and s[-1] == "[sleep]")
    assert abs(sleeps - off["by_kind"]["sleep"]) / off["by_kind"]["sleep"] < 0.02, \
        [(s, c) for s, c in stacks if "nap" not in s and s[-1] == "[sleep]"]


def test_short_command_offcpu_stack_symbolized(ep):
    """A 0.1 s command: its libc sleep is named (its maps are read again shortly after the
    exec, before it is gone), and its wait in eprof's code for the go before the exec is not
    its off-CPU time."""
    ep.run("record", "--offcpu", "-q", "-o", "short.eprof", "--", "/bin/sleep", "0.1")
    rows = ep.run("flamegraph", "short.eprof", "--offcpu", "--folded").stdout.splitlines()
    sleeps = [r for r in rows if "clock_nanosleep" in r.split(";")]
    assert sleeps, rows
    assert sum(int(r.rpartition(" ")[2]) for r in sleeps) >= 90_000_000
    assert not [r for r in rows if "[anon]" in r or "anon_pipe_read" in r], rows


def test_offcpu_min_us_filters(ep, progs):
    # 50 naps however long they take (at load 30, 1 s of wall time made 6)
    ep.run("record", "--offcpu-min-us", "20000", "-q", "-o", "min.eprof", "--",
           progs["sleephalf"], "1", "50")
    rep = ep.report_json("min.eprof")
    # 10 ms sleeps are shorter than 20 ms: skipped and counted.
    skipped = rep["stats"]["offcpu_short_skipped"]
    off = rep.get("offcpu")
    stacks = [st for st in off["stacks"] if st["kind"] == "sleep"] if off else []
    # every nap (50) is either skipped or, stretched past 20 ms on a busy machine,
    # recorded: and every recorded sleep took 20 ms or more
    assert skipped + sum(st["count"] for st in stacks) >= 40, (skipped, off)
    assert skipped >= 1
    assert all(st["ns"] >= 20e6 * st["count"] for st in stacks), stacks


def test_critical_path_through_worker(ep, progs):
    ep.run("record", "--offcpu", "-F", "999", "-q", "-o", "cw.eprof", "--", progs["condwait"], "1")
    r = ep.run("critical-path", "cw.eprof", "--json", "--limit", "0", "--segments")
    cp = json.loads(r.stdout)
    assert cp["total_ns"] > 0.9 * cp["wall_ns"]
    assert set(cp["by_kind"]) >= {"on-cpu", "runnable", "io", "sleep", "lock"}
    funcs = {f["name"]: f for f in cp["functions"]}
    # what a failure needs to be understood (once in CI, unreproduced in 80 loaded rounds):
    # where the path went, and whether the recording lost events
    why = {"functions": cp["functions"][:8], "by_thread": cp["by_thread"],
           "end": (cp["end_pid"], cp["end_tid"]),
           "segments": [(s.get("tid"), s["kind"], s["dur_ns"]) for s in cp["segments"][-12:]],
           "stats": ep.report_json("cw.eprof")["stats"]}
    assert "worker_compute" in funcs and funcs["worker_compute"]["pct"] >= 80.0, why
    worker = [t for t in cp["by_thread"] if t["comm"] == "cw-worker"]
    assert worker and worker[0]["pct"] >= 80.0
    # The path ends on the main thread (it waited for the worker, then exited).
    assert cp["end_tid"] == cp["end_pid"]
    kinds = [s["kind"] for s in cp["segments"]]
    assert kinds and all(k in cp["by_kind"] for k in kinds)
    assert sum(s["dur_ns"] for s in cp["segments"]) == cp["total_ns"]
    # Text output and the flamegraph of the path.
    txt = ep.run("critical-path", "cw.eprof").stdout
    assert "worker_compute" in txt and "By thread" in txt
    stacks = ep.folded("cw.eprof", "--critical-path")
    total = sum(c for _, c in stacks)
    assert abs(total - cp["total_ns"]) <= len(stacks) + 1
    through = sum(c for s, c in stacks if "worker_compute" in s)
    assert through >= 0.8 * total
    # the report's findings point at the same function
    fs = {f["id"]: f for f in ep.report_json("cw.eprof")["findings"]}
    assert "critical-path" in fs and "worker_compute" in fs["critical-path"]["what"], fs
    assert fs["critical-path"]["impact"] >= 0.5, fs["critical-path"]


def test_trace_has_states_flows_and_path(ep, progs):
    ep.run("record", "--offcpu", "-q", "-o", "cw.eprof", "--", progs["condwait"], "0.3")
    ep.run("trace", "cw.eprof", "-o", "t.json")
    with open(os.path.join(ep.dir, "t.json")) as f:
        ev = json.load(f)["traceEvents"]
    states = [e for e in ev if e.get("cat") == "state"]
    assert any(e["name"].startswith("blocked: lock") for e in states)
    assert any(e["name"] == "runnable" or e["name"] == "new thread" for e in states)
    flows = [e for e in ev if e["ph"] in "sf" and e.get("cat") == "wakeup"]
    assert flows and {e["ph"] for e in flows} == {"s", "f"}
    assert any(e.get("cat") == "critical_path" for e in ev)


def test_no_offcpu_data_says_so(ep, progs):
    ep.run("record", "-q", "-o", "plain.eprof", "--", progs["sleephalf"], "0.2")
    r = ep.run("flamegraph", "plain.eprof", "--offcpu", "--folded", check=False)
    assert r.returncode != 0 and "--offcpu" in r.stderr


def test_stack_budget_keeps_times(ep, progs):
    r = ep.run("record", "--offcpu", "--offcpu-stack-rate", "5", "-q", "-o", "sb.eprof", "--",
               progs["sleephalf"], "4")
    napped_ns, loop_ns, naps = (float(x) for x in r.stdout.split())
    rep = ep.report_json("sb.eprof")
    # 64 banked tokens per CPU, then 5 per second and CPU: at most 2 x (64 + 20) of the ~200
    # sleeps (10 ms: the time sampling picks them all) have stacks ...
    assert rep["stats"]["offcpu_no_stack"] >= 10
    assert rep["offcpu"]["intervals"] >= 100
    stacks = ep.folded("sb.eprof", "--offcpu")
    assert any("[stack not captured]" in s for s, _ in stacks)
    # ... but every interval keeps its time: the blocked time (up to each wakeup) is the
    # program's own nap time less the wakeup latencies, and each 10 ms nap blocked at least
    # 10 ms (the latencies, 0.35 of the nap time at load ~20, depend on the load: not a share)
    sleep = rep["offcpu"]["by_kind"]["sleep"]
    assert 0.98 * naps * 10e6 <= sleep <= 1.02 * napped_ns, (sleep, naps, napped_ns)


def test_critical_path_of_a_region_instance(ep, progs):
    """--region NAME --instance N: the path of one region instance, from its end to its start."""
    exe = progs["condwait"]
    ep.run("record", "--offcpu", "-F", "999", "-q", "-o", "cwr.eprof",
           "--region", f"{exe}:wait_for_worker", "--", exe, "1")
    rep = ep.report_json("cwr.eprof")
    inst = [r for r in rep["regions"] if r["name"] == "wait_for_worker"]
    assert inst and inst[0]["count"] == 1, rep["regions"]
    r = ep.run("critical-path", "cwr.eprof", "--json", "--limit", "0",
               "--region", "wait_for_worker", "--instance", "0")
    cp = json.loads(r.stdout)
    # The walk covers exactly the instance: its length is the region's.
    assert cp["wall_ns"] == cp["end_ns"] - cp["start_ns"]
    assert abs(cp["wall_ns"] - inst[0]["total_ns"]) <= 0.02 * inst[0]["total_ns"] + 1e6, \
        (cp["wall_ns"], inst[0]["total_ns"])
    assert cp["end_tid"] == cp["end_pid"]  # main waited in the region
    funcs = {f["name"]: f for f in cp["functions"]}
    assert funcs["worker_compute"]["pct"] >= 80.0, funcs.get("worker_compute")
    # An instance that does not exist: one clear line, non-zero exit.
    bad = ep.run("critical-path", "cwr.eprof", "--region", "wait_for_worker", "--instance", "5",
                 check=False)
    assert bad.returncode != 0 and "no instance 5" in bad.stderr


# Serial: with the other worker running, the short napper's estimate came out 12-13% above
# eprof's exact total (twice), past the bound; alone it holds. Open (closing note, stop 29).
@pytest.mark.serial
def test_time_sampling_is_unbiased(ep, progs):
    """--offcpu-sample-us (default 1 ms): a short wait gets stacks with probability
    1 - e^(-d/1ms) and stands for d over that, so thousands of 50 us naps cost a few hundred
    stacks yet weigh what they took; long waits keep theirs; totals by kind stay exact."""
    r = ep.run("record", "--offcpu", "-q", "-o", "sw.eprof", "--", progs["shortwaits"], "2")
    short_ns, long_ns, short_tid = (float(x) for x in r.stdout.split())
    rep = ep.report_json("sw.eprof")
    st, off = rep["stats"], rep["offcpu"]
    assert off["intervals"] >= 2000, off["intervals"]
    # most short naps were not picked, and none was dropped for the rate cap
    assert st["offcpu_unsampled"] >= 0.7 * off["intervals"], st
    stacks = ep.folded("sw.eprof", "--offcpu")
    in_long = sum(c for s, c in stacks if "long_nap" in s)
    assert abs(in_long - long_ns) / long_ns < 0.05, (in_long, long_ns)
    # The short napper's sampled stacks weigh what its intervals took (eprof's exact total
    # for the thread), within the estimator's noise: each pick stands for ~1 ms, so about
    # exact/1 ms picks and a relative σ of 1/sqrt(picks); bound at 4σ plus 2%. Compared
    # with eprof's exact time, not the program's clock: on a busy machine the thread is
    # also preempted outside short_nap, and the program's clock counts the naps' own time on
    # the CPU (the system calls, ~10% here).
    short = ep.report_json("sw.eprof", "--tid", str(int(short_tid)))["offcpu"]
    exact = short["total_ns"]
    picks = exact / 1e6
    mine = ep.folded("sw.eprof", "--offcpu", "--tid", str(int(short_tid)))
    est = sum(c for _, c in mine)
    assert picks > 300, short
    assert abs(est - exact) / exact < 4 / picks ** 0.5 + 0.02, (est, exact, picks)
    assert sum(c for s, c in mine if "short_nap" in s) > 0.7 * est
    # The program's clock counts the naps' time on the CPU too (the system calls): more.
    assert 0.5 * short_ns < exact <= 1.05 * short_ns, (exact, short_ns)
    # every interval keeps its exact time in the totals
    total = sum(off["by_kind"].values())
    assert abs(total - (short_ns + long_ns)) / (short_ns + long_ns) < 0.1
    # --offcpu-sample-us 0: every interval gets its stacks (up to the rate cap)
    ep.run("record", "--offcpu", "--offcpu-sample-us", "0", "-q", "-o", "sw0.eprof", "--",
           progs["shortwaits"], "0.5")
    assert ep.report_json("sw0.eprof")["stats"]["offcpu_unsampled"] == 0


def findings(ep, data):
    return {f["id"]: f for f in ep.report_json(data)["findings"]}


def test_findings_cpu_and_lock_contention(ep, progs):
    """The report's findings name the bottleneck a fixture makes on purpose, whatever the
    machine: three threads pinned to one CPU (CPU contention), three threads fighting for a
    mutex (lock contention). A thread waiting in pthread_join waits for work, not for a lock."""
    # -F 999: the three pinned spinners share one CPU, and on a busy machine less of it; the
    # CPU rules need 50 samples (at the default rate a loaded run had 30)
    ep.run("record", "--offcpu", "-F", "999", "-q", "-o", "cpu.eprof", "--", progs["spinners"],
           "1")
    fs = findings(ep, "cpu.eprof")
    cpu = fs.get("cpu-contention")
    # each spinner lacks the CPU 2/3 of the time; the main thread's join dilutes that a bit
    assert cpu and cpu["impact"] > 0.3 and cpu["severity"] == "high", fs
    assert "lock-contention" not in fs, fs
    assert "spin (spinners)" in fs["hot-function"]["what"], fs

    ep.run("record", "--offcpu", "-q", "-o", "lock.eprof", "--", progs["spinners"], "1", "3",
           "lock")
    fs = findings(ep, "lock.eprof")
    lock = fs.get("lock-contention")
    assert lock and lock["impact"] > 0.2, fs
    assert "run_locked" in lock["what"] or "take_lock" in lock["what"], lock
    text = ep.run("report", "lock.eprof").stdout
    assert "Findings (most severe first" in text and "lock-contention" in text

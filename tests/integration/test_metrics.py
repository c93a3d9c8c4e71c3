# SPDX-License-Identifier: MIT
"""Resource metrics (docs/metrics.md): a fixture with known figures, a fake NVML, RAPL."""
import json
import os
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import FIXTURES, proc_cpu_s

MIB = 1 << 20
pytestmark = pytest.mark.usefixtures("need_bpf")


@pytest.fixture(scope="module")
def fix(tmp_path_factory):
    out = tmp_path_factory.mktemp("metricsfix") / "metricsfix"
    subprocess.run(["cc", "-O2", "-g", "-pthread", "-o", str(out),
                    os.path.join(FIXTURES, "metricsfix.c")], check=True)
    return str(out)


@pytest.fixture(scope="module")
def fakenvml(tmp_path_factory):
    out = tmp_path_factory.mktemp("fakenvml") / "libnvidia-ml.so.1"
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(out),
                    os.path.join(FIXTURES, "fakenvml", "fakenvml.c")], check=True)
    return str(out)


def record(ep, data, *cmd, env=None, extra=()):
    r = ep.run("record", "-q", "-o", data, *extra, "--", *cmd, env=env)
    return r


def metrics(ep, data, *extra):
    return ep.report_json(data, *extra)["metrics"]


@pytest.fixture(scope="module")
def baseline(ep_module, fix):
    """What the fixture costs by itself: the loader's reads, its startup faults."""
    record(ep_module, "base.data", fix, "faults", "0")
    return metrics(ep_module, "base.data")


@pytest.fixture(scope="module")
def ep_module(eprof, tmp_path_factory):
    from conftest import Eprof
    return Eprof(eprof, str(tmp_path_factory.mktemp("metrics")))


def test_direct_io_bytes_exact(ep_module, fix, baseline):
    # O_DIRECT needs a real file system (tmpfs has none): /var/tmp, or the working directory
    base = "/var/tmp" if os.path.isdir("/var/tmp") else ep_module.dir
    with tempfile.TemporaryDirectory(dir=base) as d:
        probe = subprocess.run([fix, "direct", d, "1"], capture_output=True, text=True)
        if probe.returncode:
            pytest.skip(f"skipped: no O_DIRECT on {d}: {probe.stderr.strip()}")
        r = record(ep_module, "direct.data", fix, "direct", d, "64")
    m = metrics(ep_module, "direct.data")
    # syscall level: exactly what the program read and wrote, beyond its own startup
    assert m["io_rchar"] - baseline["io_rchar"] == 64 * MIB
    assert m["io_wchar"] - len(r.stdout) == 64 * MIB
    # block layer: the data, plus at most the file system's own few blocks
    assert 64 * MIB <= m["io_read_bytes"] <= 64 * MIB + MIB
    assert 64 * MIB <= m["io_write_bytes"] <= 64 * MIB + MIB
    text = ep_module.run("report", "direct.data").stdout
    assert "disk read 64.0 MiB, written 64.0 MiB" in text


def test_tcp_loopback_bytes_exact(ep_module, fix):
    record(ep_module, "tcp.data", fix, "tcp", "10000000")
    m = metrics(ep_module, "tcp.data")
    assert m["net_tcp_tx_bytes"] == 10_000_000
    assert m["net_tcp_rx_bytes"] == 10_000_000
    assert m["net_udp_tx_bytes"] == 0 and m["net_unix_tx_bytes"] == 0
    (proc,) = m["processes"]
    assert proc["comm"] == "metricsfix" and proc["net_tcp_rx_bytes"] == 10_000_000
    # per thread: the main thread sent, the receiver thread received
    tx = [t for t in m["threads"] if t["net_tx_bytes"] == 10_000_000]
    rx = [t for t in m["threads"] if t["net_rx_bytes"] == 10_000_000]
    assert len(tx) == 1 and len(rx) == 1 and tx[0]["tid"] != rx[0]["tid"]
    assert tx[0]["tid"] == proc["pid"] and tx[0]["net_rx_bytes"] == 0
    # a rate track per process in the trace, whose integral is the bytes sent
    ep_module.run("trace", "tcp.data", "-o", "tcp.json")
    with open(os.path.join(ep_module.dir, "tcp.json")) as f:
        doc = json.load(f)
    ev = doc["traceEvents"] if isinstance(doc, dict) else doc
    pts = sorted((e["ts"], e["args"]["value"]) for e in ev
                 if e.get("ph") == "C" and e["name"] == "TCP sent MiB/s" and e["pid"] == proc["pid"])
    assert pts and max(v for _, v in pts) > 0
    area = sum((pts[i + 1][0] - pts[i][0]) / 1e6 * pts[i][1] for i in range(len(pts) - 1))
    assert abs(area * MIB - 10_000_000) < 0.01 * 10_000_000
    # the HTML export's charts: inline SVG, a network chart among them
    ep_module.run("export", "tcp.data", "--format", "html", "-o", "tcp.html")
    with open(os.path.join(ep_module.dir, "tcp.html")) as f:
        html = f.read()
    res = html.split('<section id="resources">')[1].split("</section>")[0]
    assert "network sent 9.5 MiB, received 9.5 MiB" in res
    assert '<figure class="chart"><figcaption>Network' in res
    assert res.count("<polyline") >= 5 and "http://" not in res.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")


def test_per_thread_figures_match_each_threads_rusage(ep_module, fix):
    pages, nbytes = 20000, 5_000_000
    r = record(ep_module, "threads.data", fix, "threads", "0.3", str(pages), str(nbytes))
    own = {}
    for line in r.stdout.splitlines():
        # thread NAME TID user U sys S minflt F nvcsw V nivcsw I: its own RUSAGE_THREAD
        w = line.split()
        if w and w[0] == "thread":
            own[w[1]] = {"tid": int(w[2]), "user": float(w[4]), "sys": float(w[6]),
                         "minflt": int(w[8]), "nvcsw": int(w[10])}
    assert set(own) == {"spinner", "syscaller", "toucher", "sleeper"}
    m = metrics(ep_module, "threads.data")
    by_tid = {t["tid"]: t for t in m["threads"]}
    for name, o in own.items():
        t = by_tid[o["tid"]]
        assert t["comm"] == name
        cpu = (t["cpu_user_ns"] + t["cpu_sys_ns"]) / 1e9
        assert abs(cpu - (o["user"] + o["sys"])) <= 0.02 + 0.05 * cpu, (name, t, o)
    for name in ("spinner", "syscaller"):
        t, o = by_tid[own[name]["tid"]], own[name]
        share = t["cpu_sys_ns"] / (t["cpu_user_ns"] + t["cpu_sys_ns"])
        assert abs(share - o["sys"] / (o["user"] + o["sys"])) <= 0.05, (name, t, o)
    assert by_tid[own["spinner"]["tid"]]["cpu_sys_ns"] < by_tid[own["syscaller"]["tid"]]["cpu_sys_ns"]
    toucher = by_tid[own["toucher"]["tid"]]
    assert toucher["io_wchar"] == nbytes
    assert pages <= toucher["minflt"] and abs(toucher["minflt"] - own["toucher"]["minflt"]) <= 0.01 * pages
    sleeper = by_tid[own["sleeper"]["tid"]]
    assert own["sleeper"]["nvcsw"] >= 50 and 0 <= sleeper["nvcsw"] - own["sleeper"]["nvcsw"] <= 1
    # the threads' own figures add up to their process's
    assert sum(t["io_wchar"] for t in m["threads"]) == m["io_wchar"]
    assert abs(sum(t["minflt"] for t in m["threads"]) - m["minflt"]) <= 0.01 * m["minflt"]
    text = ep_module.run("report", "threads.data").stdout
    rows = [l.split() for l in text.splitlines() if l.split()[2:3] == ["toucher"]]
    assert rows and rows[0][0] == str(own["toucher"]["tid"])
    # a CPU track per busy thread in the trace, a chart of the busiest in the HTML export
    ep_module.run("trace", "threads.data", "-o", "threads.json")
    with open(os.path.join(ep_module.dir, "threads.json")) as f:
        doc = json.load(f)
    ev = doc["traceEvents"] if isinstance(doc, dict) else doc
    pts = sorted((e["ts"], e["args"]["value"]) for e in ev if e.get("ph") == "C"
                 and e["name"] == f"Thread CPU (cores): spinner {own['spinner']['tid']}")
    spin = [v for _, v in pts]
    # one thread is at most one core (the tracks are in cores, not ns per second), and its
    # busiest interval at least its mean over the track (what a busy machine gave it)
    mean = (own["spinner"]["user"] + own["spinner"]["sys"]) / ((pts[-1][0] - pts[0][0]) / 1e6)
    assert spin and 0.9 * mean <= max(spin) <= 1.05, (spin, mean)
    ep_module.run("export", "threads.data", "--format", "html", "-o", "threads.html")
    with open(os.path.join(ep_module.dir, "threads.html")) as f:
        html = f.read()
    assert "<figcaption>CPU of the busiest threads (cores)" in html and f"spinner {own['spinner']['tid']}" in html


def test_page_faults_within_one_percent(ep_module, fix, baseline):
    pages = 30000
    record(ep_module, "faults.data", fix, "faults", str(pages))
    m = metrics(ep_module, "faults.data")
    assert abs(m["minflt"] - baseline["minflt"] - pages) <= 0.01 * pages
    assert m["rss_peak_bytes"] >= pages * os.sysconf("SC_PAGESIZE")


def test_rss_peak_is_the_commands_not_eprofs(ep_module):
    """Before its exec the launched command is a fork of eprof (~56 MiB resident here): its
    peak is the command's own, from its readings since the exec (the demo's 2 MiB program
    once showed "RSS peak 55 MiB")."""
    record(ep_module, "sleep.data", "/bin/sleep", "0.5")
    m = metrics(ep_module, "sleep.data")
    assert 0 < m["rss_peak_bytes"] < 16 << 20, m["rss_peak_bytes"]


def test_user_sys_split_within_five_points(ep_module, fix):
    r = record(ep_module, "split.data", fix, "split", "0.6")
    words = r.stdout.split()  # split user U s sys S s: the fixture's own getrusage
    user, sys_ = float(words[2]), float(words[5])
    m = metrics(ep_module, "split.data")
    share = m["cpu_sys_ns"] / (m["cpu_user_ns"] + m["cpu_sys_ns"])
    assert abs(share - sys_ / (user + sys_)) <= 0.05
    # a spin loop, then a syscall loop: both halves show
    assert 0.1 < share < 0.9
    assert abs((m["cpu_user_ns"] + m["cpu_sys_ns"]) / 1e9 - 1.2) < 0.25
    text = ep_module.run("report", "split.data").stdout
    assert "# metrics:  wall" in text and "% sys)" in text
    # the trace's CPU tracks are in cores: one thread is at most one (plus a clock tick in an
    # interval: /proc gives a process's times in 10 ms ticks), their area its CPU time
    ep_module.run("trace", "split.data", "-o", "split.json")
    with open(os.path.join(ep_module.dir, "split.json")) as f:
        doc = json.load(f)
    ev = doc["traceEvents"] if isinstance(doc, dict) else doc
    for track, ns in (("CPU user (cores)", m["cpu_user_ns"]), ("CPU system (cores)", m["cpu_sys_ns"])):
        pts = sorted((e["ts"], e["args"]["value"]) for e in ev
                     if e.get("ph") == "C" and e["name"] == track)
        area = sum((pts[i + 1][0] - pts[i][0]) / 1e6 * pts[i][1] for i in range(len(pts) - 1))
        # (readings late on a busy machine make an interval short: a tick in it counts more;
        # ns per second would read 1e9)
        assert max(v for _, v in pts) <= 2.0, (track, pts)
        assert abs(area - ns / 1e9) <= 0.01 + 0.02 * ns / 1e9, (track, area, ns, pts)


def test_fake_nvml_flows_to_report_trace_json(ep_module, fix, fakenvml):
    env = dict(os.environ, EPROF_NVML_LIB=fakenvml, EPROF_POWERCAP_DIR="/nonexistent")
    record(ep_module, "gpu.data", fix, "split", "0.3", env=env, extra=("--region", f"{fix}:split"))
    m = metrics(ep_module, "gpu.data")
    g0, g1 = m["gpus"]
    assert (g0["name"], g1["name"]) == ("Fake GPU 0", "Fake GPU 1")
    assert g0["sm_util_mean_pct"] == 63 and g0["mem_used_max_bytes"] == 10 << 30
    assert g0["power_mean_w"] == 250 and g0["temp_max_c"] == 71
    assert g0["sm_clock_max_mhz"] == 1980 and g0["mem_clock_max_mhz"] == 2619
    assert g1["throttle_reasons"] == "power cap" and g0["throttle_reasons"] == ""
    assert "pcie_tx_mean_kbps" not in g0  # the fake has no PCIe counters
    # the energy counter runs at the power: joules = 250 W x the time between the first and
    # last readings, which lie within the recording (its length, not a fixed second: the
    # fixture's 1.2 s of CPU take longer on a busy machine)
    dur = ep_module.report_json("gpu.data")["duration_s"]
    assert 250 * (dur - 0.5) < g0["energy_joules"] <= 250 * dur * 1.01, (g0, dur)
    assert abs(g0["energy_joules"] / g1["energy_joules"] - 2.5) < 0.05
    e = m["energy"]
    assert e["available"] and e["cpu_joules"] == 0 and e["gpu_joules"] > 0
    # the energy while the region ran: 350 W (both fake GPUs) over its duration
    (reg,) = e["regions"]
    assert reg["name"] == "split" and reg["calls"] == 1
    assert abs(reg["joules"] / (350 * reg["ns"] / 1e9) - 1) < 0.1
    text = ep_module.run("report", "gpu.data").stdout
    assert "# GPU 0:    Fake GPU 0   SM 63% mean" in text
    assert "clocks held back by: power cap" in text
    ep_module.run("trace", "gpu.data", "-o", "gpu.json")
    with open(os.path.join(ep_module.dir, "gpu.json")) as f:
        doc = json.load(f)
    ev = doc["traceEvents"] if isinstance(doc, dict) else doc
    names = {e["pid"]: e["args"]["name"] for e in ev
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    gpu_pid = next(p for p, n in names.items() if n == "GPU 0: Fake GPU 0 (NVML)")
    power = [e["args"]["value"] for e in ev
             if e.get("ph") == "C" and e["pid"] == gpu_pid and e["name"] == "Power (W)"]
    assert power and set(power) == {250}


def test_rapl_absent_says_not_available(ep_module, fix, tmp_path):
    env = dict(os.environ, EPROF_POWERCAP_DIR=str(tmp_path), EPROF_NVML_LIB="/nonexistent.so")
    record(ep_module, "noenergy.data", fix, "faults", "0", env=env)
    e = metrics(ep_module, "noenergy.data")["energy"]
    assert e == {"available": False, "source": "none", "reason": e["reason"]}
    assert "no RAPL energy counter" in e["reason"]
    text = ep_module.run("report", "noenergy.data").stdout
    assert "# energy:   not available: no RAPL energy counter on this machine" in text
    assert "J " not in text.split("# energy:")[1].split("\n")[0]


def test_fake_powercap_joules_and_carbon(ep_module, tmp_path):
    zone = tmp_path / "intel-rapl:0"
    zone.mkdir()
    (zone / "name").write_text("package-0\n")
    (zone / "max_energy_range_uj").write_text("10000000\n")  # wraps every 10 J
    (zone / "energy_uj").write_text("8000000\n")
    # the workload is the counter: 3 J a step, 5 steps, through two wraps (a wrap is lost
    # only if more than 10 J, 4 steps, pass between two readings)
    script = ("for v in 1000000 4000000 7000000 0 3000000; do "
              f"echo $v > '{zone}/energy_uj'; sleep 0.2; done")
    env = dict(os.environ, EPROF_POWERCAP_DIR=str(tmp_path), EPROF_NVML_LIB="/nonexistent.so")
    record(ep_module, "rapl.data", "sh", "-c", script, env=env)
    e = metrics(ep_module, "rapl.data", "--carbon-intensity", "100")["energy"]
    assert e["available"] and e["source"] == "rapl-powercap"
    assert e["zones"] == [{"name": "package-0 intel-rapl:0", "joules": 15.0}]
    assert e["carbon_intensity_g_per_kwh"] == 100
    assert abs(e["carbon_g_estimate"] - 15.0 / 3.6e6 * 100) < 1e-4
    text = ep_module.run("report", "rapl.data").stdout
    assert "CPU 15.0 J (package-0 intel-rapl:0 15.0 J)" in text
    assert "an estimate" in text and "445 g/kWh" in text
    bad = ep_module.run("report", "rapl.data", "--carbon-intensity", "-3", check=False)
    assert bad.returncode != 0 and "--carbon-intensity" in bad.stderr


def test_no_metrics_and_interval(ep_module, fix):
    record(ep_module, "none.data", fix, "faults", "0", extra=("--no-metrics",))
    assert "metrics" not in ep_module.report_json("none.data")
    assert "# metrics:" not in ep_module.run("report", "none.data").stdout
    record(ep_module, "fast.data", fix, "split", "0.2", extra=("--metrics-interval", "50"))
    assert metrics(ep_module, "fast.data")["interval_ms"] == 50
    bad = ep_module.run("record", "--metrics-interval", "5", "--", "true", check=False)
    assert bad.returncode != 0 and "--metrics-interval" in bad.stderr


def test_attached_process_counts_from_attach(ep_module, fix):
    """-p: what the process did before the record is not counted."""
    code = ("import mmap,time,sys; m=mmap.mmap(-1, 40000*4096); "
            "[m.__setitem__(i*4096, 1) for i in range(40000)]; "
            "sys.stdout.write('ready\\n'); sys.stdout.flush(); time.sleep(30)")
    p = subprocess.Popen(["python3", "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        ep_module.run("record", "-q", "-p", str(p.pid), "-d", "0.5", "-o", "attach.data")
    finally:
        p.kill()
        p.wait()
    m = metrics(ep_module, "attach.data")
    (proc,) = m["processes"]
    assert proc["pid"] == p.pid
    assert m["minflt"] < 1000  # the 40,000 faults came before
    assert m["cpu_user_ns"] < 0.2e9
    assert proc["rss_peak_bytes"] >= 40000 * 4096  # levels are levels


@pytest.mark.serial  # system-wide: sees every other test's processes
def test_system_wide_follows_busy_processes(ep_module, fix):
    """-a: the processes busy on the CPU get their own figures; one started during the record
    counts from its start, as its own getrusage says."""
    # Ended by Ctrl-C once the fixture is done, not by -d: its 1.2 s of CPU may take several
    # seconds of wall time on a busy machine, and a -d that ended first cut its series.
    rec = subprocess.Popen([ep_module.bin, "record", "-vv", "-a", "-F", "99", "-d", "120",
                            "-o", "sys.data"], cwd=ep_module.dir, stderr=subprocess.PIPE,
                           text=True)
    log = []
    for line in rec.stderr:
        log.append(line)
        if "attach took" in line:
            break
    fx = subprocess.Popen([fix, "split", "0.6"], stdout=subprocess.PIPE, text=True)
    out, _ = fx.communicate(timeout=60)
    time.sleep(0.3)  # the exit's last readings
    rec.send_signal(signal.SIGINT)
    log.append(rec.stderr.read())
    assert rec.wait(timeout=60) == 0, "".join(log)
    words = out.split()  # split user U s sys S s: the fixture's own getrusage
    own = float(words[2]) + float(words[5])
    m = metrics(ep_module, "sys.data")
    assert m["scope"] == "system"
    procs = {p["pid"]: p for p in m["processes"]}
    assert fx.pid in procs, sorted((p["comm"], p["pid"]) for p in m["processes"])
    p = procs[fx.pid]
    cpu = (p["cpu_user_ns"] + p["cpu_sys_ns"]) / 1e9
    # its series opens at its start: at most its last interval (100 ms) is missed
    assert own - 0.15 <= cpu <= own + 0.03, (cpu, own)
    assert p["nvcsw"] is None and p["net_tcp_tx_bytes"] is None  # not counted under -a
    # (at most 32 processes are followed at once; over a record on a busy machine, with
    # processes coming and going, more than 32 may have been followed in turn)
    text = ep_module.run("report", "sys.data").stdout
    assert "busiest processes by CPU samples" in text and str(fx.pid) in text, text


def test_top_header_shows_resources(ep_module, fix):
    p = subprocess.Popen([fix, "split", "3"], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.2)
        t0, c0 = time.time(), proc_cpu_s(p.pid)
        r = ep_module.run("top", "-p", str(p.pid), "-b", "-n", "2", "-d", "0.6")
        mean = (proc_cpu_s(p.pid) - c0) / (time.time() - t0)  # cores it got meanwhile
    finally:
        p.kill()
        p.wait()
    res = [line for line in r.stdout.splitlines() if line.startswith("Res: ")]
    assert len(res) == 2
    words = res[1].split()  # Res: user U sys S cores ...
    # a busy loop: about the cores it got while top ran (a busy machine gives it less than
    # one); /proc counts in 10 ms ticks, so 0.6 s intervals are good to a few hundredths
    assert float(words[2]) + float(words[4]) > 0.5 * mean - 0.05 > 0, (words, mean)
    assert "RSS" in res[1] and "net" in res[1]

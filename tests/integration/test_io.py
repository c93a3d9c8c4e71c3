# SPDX-License-Identifier: MIT
"""I/O by stack (record --io, docs/io.md): bytes exact per stack and file or peer, the
flamegraph, Python frames, and the slow-input finding on a thread that mostly reads."""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import FIXTURES, Eprof

pytestmark = pytest.mark.usefixtures("need_bpf")

FILE_BYTES = 3000017  # not a multiple of the 64 KiB reads: the last one is short
SOCK_BYTES = 1000003


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    out = tmp_path_factory.mktemp("io_app") / "io_app"
    subprocess.run(["cc", "-O2", "-g", "-fno-omit-frame-pointer", "-pthread", "-o", str(out),
                    os.path.join(FIXTURES, "io_app.c")], check=True)
    return str(out)


@pytest.fixture(scope="module")
def ep_module(eprof, tmp_path_factory):
    return Eprof(eprof, str(tmp_path_factory.mktemp("io")))


@pytest.fixture(scope="module")
def data_file(ep_module):
    path = os.path.join(ep_module.dir, "shard.bin")
    with open(path, "wb") as f:
        f.write(os.urandom(FILE_BYTES))
    return path


@pytest.fixture(scope="module")
def file_run(ep_module, app, data_file):
    r = ep_module.run("record", "-q", "--io", "--io-stack-rate", "0", "-o", "file.data", "--",
                      app, "file", data_file, str(SOCK_BYTES))
    port = int(re.search(r"port (\d+)", r.stdout).group(1))
    return ep_module.report_json("file.data")["io"], port


def folded(ep, data, *weight):
    out = ep.run("flamegraph", data, *weight, "--folded").stdout
    rows = []
    for line in out.splitlines():
        stack, _, count = line.rpartition(" ")
        rows.append((stack.split(";"), int(count)))
    return rows


def test_file_bytes_exact_per_stack_and_path(file_run, data_file):
    io, _ = file_run
    rows = [g for g in io["by_bytes"] if g["file"] == data_file]
    assert rows, [g["file"] for g in io["by_bytes"]]
    assert sum(g["read_bytes"] for g in rows) == FILE_BYTES
    assert all(g["direction"] == "read" and g["type"] == "file" for g in rows)
    # every byte of the file was read on a stack through read_input
    assert sum(g["read_bytes"] for g in rows if "read_input" in g["stack"]) == FILE_BYTES, rows
    # 64 KiB reads to the end, plus the read that returns 0
    assert sum(g["calls"] for g in rows) == -(-FILE_BYTES // 65536) + 1
    files = {f["file"]: f for f in io["files"]}
    assert files[data_file]["read_bytes"] == FILE_BYTES
    assert files[data_file]["write_bytes"] == 0
    assert files[data_file]["ns"] > 0


def test_socket_peer_and_bytes(file_run):
    io, port = file_run
    sent = [g for g in io["by_bytes"] if g["direction"] == "write" and
            g["file"] == f"tcp 127.0.0.1:{port}"]
    assert sent, [g["file"] for g in io["by_bytes"]]
    assert sum(g["write_bytes"] for g in sent) == SOCK_BYTES
    assert all("send_output" in " ".join(g["stack"]) for g in sent), sent
    assert all(g["type"] == "socket" for g in sent)
    # the server thread's side: the same bytes received, from the client's ephemeral port
    recv = [g for g in io["by_bytes"] if g["direction"] == "read" and "drain_socket" in g["stack"]]
    assert sum(g["read_bytes"] for g in recv) == SOCK_BYTES
    assert all(g["file"].startswith("tcp 127.0.0.1:") for g in recv)
    threads = {t["comm"]: t for t in io["threads"]}
    assert threads["server"]["read_bytes"] == SOCK_BYTES


def test_flamegraph_io_bytes_and_time(ep_module, file_run, data_file):
    rows = folded(ep_module, "file.data", "--io")
    leaf = f"[read] {data_file}"
    mine = [(s, c) for s, c in rows if s[-1] == leaf]
    assert sum(c for _, c in mine) == FILE_BYTES
    assert all("read_input" in s for s, _ in mine), mine
    timed = [(s, c) for s, c in folded(ep_module, "file.data", "--io-time") if s[-1] == leaf]
    assert timed and all(c > 0 for _, c in timed)
    ep_module.run("flamegraph", "file.data", "--io", "-o", "io.svg")
    svg = open(os.path.join(ep_module.dir, "io.svg")).read()
    assert "read_input" in svg and "I/O bytes by stack" in svg


def test_trace_io_slices(ep_module, file_run, data_file):
    ep_module.run("trace", "file.data", "-o", "io.json")
    with open(os.path.join(ep_module.dir, "io.json")) as f:
        events = json.load(f)["traceEvents"]
    io = [e for e in events if e.get("cat") == "io"]
    reads = [e for e in io if e["name"] == f"read {data_file}"]
    assert sum(e["args"]["bytes"] for e in reads) == FILE_BYTES
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in reads)
    names = {e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    assert any(n.endswith(" I/O") for n in names), names


def test_report_text_section(ep_module, file_run, data_file):
    out = ep_module.run("report", "file.data").stdout
    assert "# I/O by stack (record --io)" in out
    assert "I/O by file or peer:" in out
    line = next(l for l in out.splitlines() if l.rstrip().endswith(data_file))
    assert "file" in line.split()
    # the HTML export has the same section; a record without --io says "no data" there
    ep_module.run("export", "file.data", "--format", "html", "-o", "file.html")
    with open(os.path.join(ep_module.dir, "file.html")) as f:
        sec = f.read().split('<section id="io">')[1].split("</section>")[0]
    assert "I/O by file or peer:" in sec and data_file in sec
    ep_module.run("record", "-q", "-o", "noio.data", "--", "true")
    ep_module.run("export", "noio.data", "--format", "html", "-o", "noio.html")
    with open(os.path.join(ep_module.dir, "noio.html")) as f:
        sec = f.read().split('<section id="io">')[1].split("</section>")[0]
    assert "no data" in sec


def test_no_io_data_is_a_clear_error(ep_module, app):
    ep_module.run("record", "-q", "-o", "plain.data", "--", app, "spin", "0.2")
    r = ep_module.run("flamegraph", "plain.data", "--io", "--folded", check=False)
    assert r.returncode != 0
    assert "record with --io" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "io" not in ep_module.report_json("plain.data")


def test_python_frames_in_io_stack(ep_module, data_file):
    ep_module.run("record", "-q", "--io", "-o", "py.data", "--", sys.executable,
                  os.path.join(FIXTURES, "python", "io_read.py"), data_file)
    io = ep_module.report_json("py.data")["io"]
    rows = [g for g in io["by_bytes"] if g["file"] == data_file]
    assert sum(g["read_bytes"] for g in rows) == FILE_BYTES
    py = [g for g in rows if "read_shards" in g["stack"]]
    assert sum(g["read_bytes"] for g in py) == FILE_BYTES, rows
    stack = py[0]["stack"]
    assert stack.index("read_shards") < stack.index("main"), stack


def findings(ep, data):
    return ep.report_json(data)["findings"]


def test_slow_input_fires_on_a_reader_of_a_slow_pipe(ep_module, app):
    ep_module.run("record", "-q", "--io", "-o", "slow.data", "--", app, "slowpipe", "1.2")
    fs = [f for f in findings(ep_module, "slow.data") if f["id"] == "slow-input"]
    assert len(fs) == 1, fs
    assert "slowreader" in fs[0]["what"] and "pipe:[" in fs[0]["what"]
    assert "read_slow_input" in fs[0]["what"]
    io = ep_module.report_json("slow.data")["io"]
    reader = next(t for t in io["threads"] if t["comm"] == "slowreader")
    assert reader["read_share"] > 0.8
    feeder = next(t for t in io["threads"] if t["comm"] == "feeder")
    assert feeder["write_bytes"] == reader["read_bytes"] > 0


def test_slow_input_silent_on_a_cpu_bound_thread(ep_module, app):
    ep_module.run("record", "-q", "--io", "-o", "spin.data", "--", app, "spin", "1")
    assert not [f for f in findings(ep_module, "spin.data") if f["id"] == "slow-input"]
    io = ep_module.report_json("spin.data")["io"]
    spinner = next(t for t in io["threads"] if t["comm"] == "spinner")
    assert spinner["read_bytes"] > 0 and spinner["read_share"] < 0.2

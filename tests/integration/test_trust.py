# SPDX-License-Identifier: MIT
"""eprof runs as root; its targets' users, their files and others' data files are untrusted
(docs/security.md). Each test plays the other user and shows that root's eprof holds."""
import json
import os
import pwd
import re
import socket
import struct
import subprocess
import sys
import time

import pytest

TEST_USER = "eprof-trust"
ATTACKER = "nobody"
MAGIC = 0x4d454d45
TIB = 1 << 40


def user_ids(name):
    pw = pwd.getpwnam(name)
    return pw.pw_uid, pw.pw_gid


@pytest.fixture(scope="session")
def target_user():
    """A user of our own, made once, for the profiled processes."""
    if os.geteuid() != 0:
        print("skipped: not root", file=sys.stderr)
        pytest.skip("skipped: not root")
    try:
        pwd.getpwnam(TEST_USER)
    except KeyError:
        r = subprocess.run(["useradd", "-M", "-r", "-s", "/bin/sh", TEST_USER],
                           capture_output=True, text=True)
        if r.returncode:
            pytest.skip(f"skipped: cannot create user {TEST_USER}: {r.stderr.strip()}")
    return TEST_USER


def as_user(name):
    uid, gid = user_ids(name)

    def drop():
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    return drop


def run_as(name, code, *args, **kw):
    """A Python snippet run as another user."""
    return subprocess.Popen([sys.executable, "-c", code, *args], preexec_fn=as_user(name),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd="/", **kw)


def abstract_names(prefix):
    with open("/proc/net/unix") as f:
        return [ln.split()[-1][1:] for ln in f if ln.split()[-1].startswith("@" + prefix)]


def wait_for_name(prefix, proc, timeout=20):
    end = time.time() + timeout
    while time.time() < end and proc.poll() is None:
        names = abstract_names(prefix)
        if names:
            return names[0]
        time.sleep(0.05)
    raise AssertionError(f"no socket @{prefix}* appeared")


# One forged stack (id 1, one frame) and one 1 TiB allocation on it, in pid 1's name.
FORGE = r"""
import socket, struct, sys, time
M = 0x4d454d45
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect("\0" + sys.argv[1])
ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
stack = struct.pack("<IHHII", M, 2, 1, 1, 1) + struct.pack("<IHHQ", 1, 0, 0, ns)
stack += struct.pack("<Q", 0x401000)
rec = struct.pack("<IHHII", M, 1, 1, 1, 1)
rec += struct.pack("<QQQIBBH", 0x7f0000001000, ns, 1 << 40, 1, 1, 0, 0)
sent = 0
try:
    sent += s.send(stack) > 0
    time.sleep(0.2)
    sent += s.send(rec) > 0
    time.sleep(0.5)
except OSError as e:
    print("refused:", e)
print("sent", sent)
"""


def memory_numbers(mem):
    """Every byte figure of the memory section, flattened."""
    out = []

    def walk(v, key=""):
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, k)
        elif isinstance(v, list):
            for x in v:
                walk(x, key)
        elif isinstance(v, (int, float)) and "bytes" in key:
            out.append(v)
    walk(mem)
    return out


def test_mem_channel_refuses_another_user(ep, need_bpf):
    """Another user reaches the channel's name; what it sends is not recorded."""
    rec = subprocess.Popen([ep.bin, "record", "--mem=1", "-o", "mem.data", "--", "sleep", "3"],
                           cwd=ep.dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    name = wait_for_name("eprof-mem-", rec)
    forger = run_as(ATTACKER, FORGE, name)
    out, err = forger.communicate(timeout=30)
    _, rerr = rec.communicate(timeout=60)
    assert rec.returncode == 0, rerr
    assert forger.returncode == 0, err
    mem = ep.report_json("mem.data")["memory"]
    big = [b for b in memory_numbers(mem) if b >= TIB]
    assert not big, f"another user's forged 1 TiB block is in root's report: {big}"
    assert "connections refused" in rerr, rerr


# Binds a name the recording used once it is free, and counts the bytes anyone sends it.
SQUAT = r"""
import select, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
end = time.time() + 5
while True:
    try:
        s.bind("\0" + sys.argv[1])
        break
    except OSError:
        if time.time() > end:
            print("never free"); sys.exit(1)
        time.sleep(0.02)
s.listen(8)
print("bound", flush=True)
got, end = 0, time.time() + float(sys.argv[2])
conns = []
while time.time() < end:
    r, _, _ = select.select([s] + conns, [], [], 0.1)
    for x in r:
        if x is s:
            conns.append(s.accept()[0])
            continue
        try:
            d = x.recv(65536)
        except OSError:
            d = b""
        got += len(d)
        if not d:
            conns.remove(x)
print("received", got)
"""


def test_no_residue_after_the_recording(ep, need_bpf, tmp_path):
    """A descendant that outlives the recording and then execs: its image carries no EPROF_*
    variable, loads no eprof library, and sends nothing to whoever bound the freed name."""
    out = tmp_path / "env.txt"
    script = '(sleep 5; exec sh -c \'env; cat /proc/self/maps\' > "$0") & exit 0'
    rec = subprocess.Popen([ep.bin, "record", "--mem=1", "-o", "r.data", "--", "sh", "-c",
                            script, str(out)], cwd=ep.dir, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    name = wait_for_name("eprof-mem-", rec)
    _, err = rec.communicate(timeout=60)
    assert rec.returncode == 0, err
    squat = run_as(ATTACKER, SQUAT, name, "6")
    sout, serr = squat.communicate(timeout=30)
    assert "bound" in sout, sout + serr
    got = int(re.search(r"received (\d+)", sout).group(1))
    end = time.time() + 10
    while time.time() < end and not (out.exists() and "/proc/self/maps" not in out.read_text()
                                     and out.stat().st_size and "[stack]" in out.read_text()):
        time.sleep(0.1)
    text = out.read_text()
    assert "[stack]" in text, text
    assert not re.search(r"^EPROF_", text, re.M), text
    assert "libeprof" not in text, text
    assert got == 0, f"the descendant sent {got} bytes to another user's socket"

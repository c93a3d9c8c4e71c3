# SPDX-License-Identifier: MIT
"""The build-id cache (docs/cache.md): a second record takes the symbol tables from it and
names the same functions; an entry another user planted is never trusted."""
import os
import pwd
import re
import shutil
import stat
import struct
import subprocess
import tempfile

import pytest

from conftest import FIXTURES

HDR = 208  # struct bc_hdr (src/util/bidcache.c)
FUNCS = {"work_a", "work_b", "work_c"}
COUNTERS = re.compile(r"cache: (\d+) hits, (\d+) misses, (\d+) refused, (\d+) stored, "
                      r"(\d+) evicted")


@pytest.fixture(scope="module")
def hot3(tmp_path_factory):
    """hot3 with a symbol table and no DWARF: its names can only come from that table."""
    exe = tmp_path_factory.mktemp("cache-bin") / "hot3-nodw"
    subprocess.run(["cc", "-O2", "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls",
                    "-o", str(exe), os.path.join(FIXTURES, "hot3.c")], check=True)
    return str(exe)


def record(ep, hot3, xdg, *extra, env_extra=None):
    env = dict(os.environ, XDG_CACHE_HOME=xdg)
    env.pop("EPROF_CACHE", None)
    env.update(env_extra or {})
    r = ep.run("record", "-v", "-F", "499", "-g", "fp", *extra, "--", hot3, "1", env=env)
    m = COUNTERS.search(r.stderr)
    counters = dict(zip(("hits", "misses", "refused", "stored", "evicted"),
                        map(int, m.groups()))) if m else None
    rep = ep.report_json()
    names = {f["name"] for f in rep["functions"] if f["module"] == "hot3-nodw"}
    return counters, names, r.stderr


def build_id(path):
    r = subprocess.run(["readelf", "-n", path], capture_output=True, text=True, check=True)
    return re.search(r"Build ID: ([0-9a-f]+)", r.stdout).group(1)


def test_second_record_uses_the_cache(ep, need_bpf, hot3, tmp_path):
    xdg = str(tmp_path / "xdg")
    c1, names1, err1 = record(ep, hot3, xdg)
    assert c1, err1
    assert c1["hits"] == 0 and c1["stored"] >= 1, c1
    d = os.path.join(xdg, "eprof")
    st = os.stat(d)
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == 0
    entry = os.path.join(d, "sym-" + build_id(hot3))
    st = os.lstat(entry)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == 0

    c2, names2, err2 = record(ep, hot3, xdg)
    assert c2, err2
    # objects sampled only this time (ld.so...) may still be stored
    assert c2["hits"] >= 1 and c2["refused"] == 0, c2
    # hot3's entry was read (a hit touches it), not rewritten
    st2 = os.lstat(entry)
    assert st2.st_ino == st.st_ino and st2.st_mtime_ns > st.st_mtime_ns
    assert FUNCS <= names1 and names1 == names2, (names1, names2)

    r = ep.run("cache", "--stats", env=dict(os.environ, XDG_CACHE_HOME=xdg))
    assert re.search(r"entries:\s+%d\b" % (c1["stored"] + c2["stored"]), r.stdout), r.stdout
    r = ep.run("cache", "--clear", env=dict(os.environ, XDG_CACHE_HOME=xdg))
    assert not [n for n in os.listdir(d)], os.listdir(d)


def test_no_cache_option_and_variable(ep, need_bpf, hot3, tmp_path):
    xdg = str(tmp_path / "xdg")
    c, names, err = record(ep, hot3, xdg, "--no-cache")
    assert c is None and FUNCS <= names, err
    c, names, err = record(ep, hot3, xdg, env_extra={"EPROF_CACHE": "0"})
    assert c is None and FUNCS <= names, err
    assert not os.path.exists(os.path.join(xdg, "eprof"))


M64 = (1 << 64) - 1


def mix64(x):
    x ^= x >> 33
    x = (x * 0xff51afd7ed558ccd) & M64
    x ^= x >> 33
    x = (x * 0xc4ceb9fe1a85ec53) & M64
    return x ^ (x >> 33)


def lanes_hash(data, seed):
    """lanes_hash() of src/util/bidcache.c."""
    lanes = list(seed)
    padded = data + bytes(-len(data) % 32)
    for i in range(0, len(padded), 32):
        for j in range(4):
            w = struct.unpack_from("<Q", padded, i + 8 * j)[0]
            x = ((lanes[j] ^ w) * 0x9fb21c651e98df25) & M64
            lanes[j] = x ^ (x >> 31)
    return [mix64(lanes[j] ^ len(data) ^ ((j + 1) << 56)) for j in range(4)]


def checksum(header_zeroed, payload):
    seed = (0x243f6a8885a308d3, 0x13198a2e03707344, 0xa4093822299f31d0, 0x082efa98ec4e6c89)
    return struct.pack("<4Q", *lanes_hash(payload, lanes_hash(header_zeroed, seed)))


def forged(entry, old, new):
    """The entry with one function's name replaced (same length), its checksum made to match:
    what another user who read the format could write."""
    data = bytearray(open(entry, "rb").read())
    assert len(old) == len(new) and data.count(old) == 1
    i = data.index(old)
    data[i:i + len(old)] = new
    data[HDR - 32:HDR] = bytes(32)
    data[HDR - 32:HDR] = checksum(bytes(data[:HDR]), bytes(data[HDR:]))
    return bytes(data)


@pytest.fixture
def open_xdg():
    """A cache home the other user can reach (pytest's tmp_path is root's, 0700)."""
    xdg = tempfile.mkdtemp(prefix="eprof-cache-test-")
    os.chmod(xdg, 0o755)
    yield xdg
    shutil.rmtree(xdg, ignore_errors=True)


def test_entry_planted_by_another_user_is_not_trusted(ep, need_bpf, hot3, open_xdg):
    xdg = open_xdg
    d = os.path.join(xdg, "eprof")
    c, names, err = record(ep, hot3, xdg)
    assert c and c["stored"] >= 1, err
    entry = os.path.join(d, "sym-" + build_id(hot3))
    evil = forged(entry, b"\0work_b\0", b"\0EVIL_b\0")

    # The forged content is a valid entry: written by root, it is read (the control) ...
    with open(entry, "wb") as f:
        f.write(evil)
    c, names, err = record(ep, hot3, xdg)
    assert c["hits"] >= 1 and "EVIL_b" in names, (c, names)

    # ... but the same bytes from another user are refused, removed and rebuilt.
    nobody = pwd.getpwnam("nobody")
    os.chmod(d, 0o777)  # a directory left open to others
    os.unlink(entry)
    code = ("import os, sys\n"
            "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)\n"
            "os.write(fd, bytes.fromhex(sys.argv[2]))\n")
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(nobody.pw_gid, nobody.pw_gid, nobody.pw_gid)
            os.setresuid(nobody.pw_uid, nobody.pw_uid, nobody.pw_uid)
            os.execvp("python3", ["python3", "-c", code, entry, evil.hex()])
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert os.stat(entry).st_uid == nobody.pw_uid

    c, names, err = record(ep, hot3, xdg)
    assert c["refused"] >= 1 and c["stored"] >= 1, (c, err)
    assert "EVIL_b" not in names and FUNCS <= names, names
    st = os.lstat(entry)
    assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o600
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700  # narrowed again
    # and the directory itself another user's: not used at all
    os.chown(d, nobody.pw_uid, nobody.pw_gid)
    c, names, err = record(ep, hot3, xdg)
    assert "not a directory of uid 0" in err and FUNCS <= names, err
    assert c["hits"] == 0 and c["stored"] == 0, c

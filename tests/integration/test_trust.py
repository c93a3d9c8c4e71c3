# SPDX-License-Identifier: MIT
"""eprof runs as root; its targets' users, their files and others' data files are untrusted
(docs/security.md). Each test plays the other user and shows that root's eprof holds."""
import base64
import hashlib
import json
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
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


def unix_names(prefix):
    """The names of bound unix sockets that begin with prefix (abstract ones as @NAME)."""
    with open("/proc/net/unix") as f:
        return [ln.split()[-1] for ln in f
                if len(ln.split()) >= 8 and ln.split()[-1].startswith(prefix)]


def wait_for_name(prefix, proc, timeout=20):
    """The socket proc listens on, /tmp/eprof-mem-PID-XXXXXX/sock: its name carries its pid
    (other recorders may run on the machine)."""
    end = time.time() + timeout
    prefix = f"{prefix}{proc.pid}-"
    while time.time() < end and proc.poll() is None:
        names = unix_names(prefix)
        if names:
            return names[0]
        time.sleep(0.05)
    raise AssertionError(f"no socket {prefix}* appeared")


def wait_for_child(ppid, comm, timeout=20):
    """Until a child of ppid runs comm (it has exec'd)."""
    end = time.time() + timeout
    while time.time() < end:
        for d in os.listdir("/proc"):
            try:
                with open(f"/proc/{d}/stat") as f:
                    st = f.read()
            except (OSError, ValueError):
                continue
            if st.split(") ")[-1].split()[1] == str(ppid) and f"({comm})" in st:
                return int(d)
        time.sleep(0.05)
    raise AssertionError(f"no child {comm} of {ppid}")


# One forged stack (id 1, one frame) and one 1 TiB allocation on it, in pid 1's name.
FORGE = r"""
import socket, struct, sys, time
M = 0x4d454d45
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("cannot connect:", e.errno, e)
    sys.exit(0)
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


MEM_SOCK = "/tmp/eprof-mem-"

# Every eprof socket another user sees in /proc/net/unix, and whether it can connect to it.
PROBE = r"""
import errno, os, socket, sys
pid = sys.argv[1]
names = set()
with open("/proc/net/unix") as f:
    for ln in f:
        p = ln.split()
        if len(p) >= 8 and "eprof-mem-" + pid + "-" in p[-1]:
            names.add(p[-1])
print("names", len(names))
for n in sorted(names):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(n if n[0] == "/" else "\0" + n[1:])
        print("connected", n)
    except OSError as e:
        print("refused", n, errno.errorcode.get(e.errno, e.errno))
    try:
        os.listdir(os.path.dirname(n))
        print("listed", n)
    except OSError as e:
        print("unlisted", n, errno.errorcode.get(e.errno, e.errno))
"""


def test_mem_channel_refuses_another_user(ep, need_bpf):
    """Another user sees where the channel is but cannot even connect: EACCES at its 0700
    directory (nothing abstract is left to reach); nothing it could send is recorded."""
    rec = subprocess.Popen([ep.bin, "record", "--mem=1", "-o", "mem.data", "--", "sleep", "3"],
                           cwd=ep.dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    name = wait_for_name(MEM_SOCK, rec)
    d = os.stat(os.path.dirname(name))
    assert stat.S_IMODE(d.st_mode) == 0o700 and d.st_uid == 0, oct(d.st_mode)
    assert not unix_names(f"@eprof-mem-{rec.pid}-"), "an abstract name is still bound"
    probe = run_as(ATTACKER, PROBE, str(rec.pid))
    pout, perr = probe.communicate(timeout=30)
    forger = run_as(ATTACKER, FORGE, name)
    out, err = forger.communicate(timeout=30)
    _, rerr = rec.communicate(timeout=60)
    assert rec.returncode == 0, rerr
    assert probe.returncode == 0 and "names 1" in pout, pout + perr
    assert not re.search(r"^(connected|listed) ", pout, re.M), pout
    assert re.search(r"refused \S+ (EACCES|ENOENT)", pout), pout
    assert forger.returncode == 0 and "cannot connect: 13" in out, out + err
    mem = ep.report_json("mem.data")["memory"]
    big = [b for b in memory_numbers(mem) if b >= TIB]
    assert not big, f"another user's forged 1 TiB block is in root's report: {big}"
    assert not os.path.lexists(os.path.dirname(name)), "the socket's directory outlived it"


# Binds the path the recording used once it is free (its directory made anew), and counts
# the bytes anyone sends it.
SQUAT = r"""
import os, select, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
end = time.time() + 5
while True:
    try:
        os.makedirs(os.path.dirname(sys.argv[1]), mode=0o777, exist_ok=True)
        os.chmod(os.path.dirname(sys.argv[1]), 0o777)
        s.bind(sys.argv[1])
        os.chmod(sys.argv[1], 0o777)
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
    name = wait_for_name(MEM_SOCK, rec)
    _, err = rec.communicate(timeout=60)
    assert rec.returncode == 0, err
    squat = run_as(ATTACKER, SQUAT, name, "6")
    try:
        sout, serr = squat.communicate(timeout=30)
    finally:
        shutil.rmtree(os.path.dirname(name), ignore_errors=True)
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


@pytest.fixture(scope="module")
def public_dir():
    """A directory other users can reach (pytest's own are root's only)."""
    d = tempfile.mkdtemp(prefix="eprof-trust-", dir="/tmp")
    os.chmod(d, 0o1777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def public_memfix(public_dir):
    """tests/fixtures/memfix.c built into public_dir, where the target users can run it."""
    exe = os.path.join(public_dir, "memfix")
    subprocess.run(["cc", "-O2", "-g", "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls",
                    "-o", exe, os.path.join(os.path.dirname(__file__), "..", "fixtures",
                                            "memfix.c")], check=True)
    os.chmod(exe, 0o755)
    return exe


@pytest.fixture(scope="module")
def jit_named(public_dir):
    exe = os.path.join(public_dir, "jit_named")
    subprocess.run(["cc", "-O2", "-o", exe,
                    os.path.join(os.path.dirname(__file__), "..", "fixtures", "jit_named.c")],
                   check=True)
    os.chmod(exe, 0o755)
    return exe


class JitTarget:
    """jit_named run as user, its perf map written by plant(pid, addr, size) as that user."""

    def __init__(self, exe, user, secs, plant, *argv):
        self.p = subprocess.Popen([exe, str(secs), *argv], preexec_fn=as_user(user),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  cwd="/")
        pid, addr, size = self.p.stdout.readline().split()
        self.pid, self.addr, self.size = int(pid), int(addr, 16), int(size, 16)
        self.map = f"/tmp/perf-{self.pid}.map"
        plant(self)
        self.p.stdin.write("go\n")
        self.p.stdin.flush()

    def finish(self):
        self.p.kill()
        self.p.wait(timeout=60)
        for path in (self.map,):
            if os.path.lexists(path):
                os.unlink(path)


def write_as(user, path, data):
    """path written by user (its owner), as a process of theirs would."""
    code = "import sys; open(sys.argv[1], 'wb').write(sys.stdin.buffer.read())"
    p = subprocess.run([sys.executable, "-c", code, path], input=data,
                       preexec_fn=as_user(user), cwd="/")
    assert p.returncode == 0


THREAD = "<svg onload=x>"  # a thread name fits 15 bytes


def record_jit(ep, exe, user, plant, data="jit.data", secs=2.5, *extra):
    """secs of recording by -d: the target outlives it, whatever the machine's load."""
    t = JitTarget(exe, user, 600, plant, str(len(HOSTILE)), THREAD)
    try:
        r = ep.run("record", "-F", "499", "-q", "-p", str(t.pid), "-d", str(secs), "-o", data,
                   *extra)
    finally:
        t.finish()
    return r


# Names a target's user chose: OSC 52 (clipboard), OSC 0 (title), a CSI, HTML, a formula.
HOSTILE = ["\x1b]52;c;cHduZWQ=\x07", "\x1b]0;owned\x07", "\x1b[2J\x9b31m",
           "<img src=x onerror=alert(1)>", "=HYPERLINK(\"http://x\")", "@SUM(1)", "+1", "-1"]


def hostile_map(user):
    def plant(t):
        step = t.size // len(HOSTILE)
        lines = "".join(f"{t.addr + i * step:x} {step:x} {n}\n" for i, n in enumerate(HOSTILE))
        write_as(user, t.map, lines.encode())
    return plant


def no_controls(text):
    bad = [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) <= 0x9f]
    return not bad


def test_hostile_names_in_outputs(ep, need_bpf, target_user, jit_named):
    """Function names from a target's perf map: text outputs show control bytes as \\xNN,
    the HTML has them escaped under a CSP that names its scripts, CSV cells are not formulas."""
    record_jit(ep, jit_named, target_user, hostile_map(target_user), "h.data", 2.5)
    rep = ep.report_json("h.data")
    names = {f["name"] for f in rep["functions"]}
    assert names & set(HOSTILE), f"the perf map's names are not in the recording: {names}"
    for args in (["report", "h.data", "--limit", "0"], ["diff", "h.data", "h.data"],
                 ["report", "h.data", "--threads"]):
        out = ep.run(*args).stdout
        assert no_controls(out), f"eprof {' '.join(args)} printed control bytes"
        assert "\\x1b]52;c;" in out or "diff" in args, out
    err = ep.run("report", "\x1b]0;x\x07.data", check=False).stderr
    assert err and no_controls(err) and "\\x1b]0;x\\x07" in err, err
    html = ep.run("export", "-f", "html", "-o", "-", "h.data").stdout
    assert "<img src=x" not in html and "&lt;img src=x" in html
    assert "<svg onload" not in html and "&lt;svg onload=x&gt;" in html
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)"', html)
    assert csp and "default-src 'none'" in csp.group(1), html[:2000]
    hashes = set(re.findall(r"'sha256-([^']+)'", csp.group(1)))
    assert html.index(csp.group(0)) < html.index("<script")
    for m in re.finditer(r"<script([^>]*)>(.*?)</script>", html, re.S):
        if "application/json" in m.group(1):
            continue
        body = m.group(2)
        if body.startswith("<![CDATA["):
            body = body[9:-3] if body.endswith("]]>") else body[9:]
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert digest in hashes, f"a script not in the CSP: {m.group(0)[:80]}"
    csv = ep.run("export", "-f", "csv", "-o", "-", "h.data").stdout
    cells = [row.split(",")[0].strip('"') for row in csv.splitlines()[1:]]
    formulas = [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")]
    assert not formulas and any(c.startswith("'=") for c in cells), cells


def test_output_must_be_a_regular_file(ep, need_bpf, target_user, jit_named, public_dir):
    """Another user's FIFO as -o: one line of error and a non-zero exit, at once; files made
    by -o are 0600."""
    record_jit(ep, jit_named, target_user, lambda t: None, "o.data", 1)
    fifo = os.path.join(public_dir, "fifo")
    subprocess.run([sys.executable, "-c", "import os, sys; os.mkfifo(sys.argv[1], 0o666)", fifo],
                   preexec_fn=as_user(ATTACKER), check=True)
    for args in (["report", "o.data"], ["export", "-f", "html", "o.data"],
                 ["flamegraph", "o.data"]):
        t0 = time.time()
        r = ep.run(*args, "-o", fifo, check=False, timeout=20)
        assert r.returncode != 0 and time.time() - t0 < 10, (args, r.returncode)
        assert "not a regular file" in r.stderr and len(r.stderr.strip().splitlines()) == 1, \
            r.stderr
    r = ep.run("report", "o.data", "-o", "/dev/null", check=False)
    assert r.returncode != 0 and "not a regular file" in r.stderr, r.stderr
    ep.run("report", "o.data", "-o", "rep.txt")
    assert stat.S_IMODE(os.stat(os.path.join(ep.dir, "rep.txt")).st_mode) == 0o600


def jit_names(ep, data):
    return {f["name"] for f in ep.report_json(data)["functions"] if f["module"] == "[jit]"}


def test_perf_map_trust(ep, need_bpf, target_user, jit_named, tmp_path):
    """Root reads a target's perf map only when it is the target's own regular file: not
    through a symlink it planted (to a root-only file), not one another user wrote; a line
    over 64 KiB is skipped, not read whole."""
    secret = tmp_path / "secret.map"  # pytest's directory: root's only

    def symlink(t):
        step = t.size // len(HOSTILE)
        secret.write_text("".join(f"{t.addr + i * step:x} {step:x} ROOT_SECRET_{i}\n"
                                  for i in range(len(HOSTILE))))
        os.chmod(secret, 0o600)
        subprocess.run([sys.executable, "-c", "import os, sys; os.symlink(*sys.argv[1:])",
                        str(secret), t.map], preexec_fn=as_user(target_user), check=True)
    record_jit(ep, jit_named, target_user, symlink, "link.data", 1.5)
    names = jit_names(ep, "link.data")
    assert names and not any("ROOT_SECRET" in n for n in names), names

    def foreign(t):
        write_as(ATTACKER, t.map, f"{t.addr:x} {t.size:x} FOREIGN_NAME\n".encode())
    record_jit(ep, jit_named, target_user, foreign, "foreign.data", 1.5)
    names = jit_names(ep, "foreign.data")
    assert names and "FOREIGN_NAME" not in names, names

    def long_line(t):
        step = t.size // len(HOSTILE)
        lines = f"{t.addr:x} {step:x} {'L' * 100000}\n"
        lines += "".join(f"{t.addr + i * step:x} {step:x} short_{i}\n"
                         for i in range(1, len(HOSTILE)))
        write_as(target_user, t.map, lines.encode())
    record_jit(ep, jit_named, target_user, long_line, "long.data", 1.5)
    names = jit_names(ep, "long.data")
    assert any(n.startswith("short_") for n in names), names
    assert not any(n.startswith("LLLL") for n in names), [n[:20] for n in names]


def test_another_users_recording(ep, target_user, public_dir, tmp_path):
    """A recording another user hands root names a root-only file as a JIT perf map: root's
    report does not read it (--force does); a FIFO given as the input fails at once."""
    from test_faults import crafted_profile
    secret = tmp_path / "secret.map"  # root's only
    secret.write_text("1000 10 ROOT_ONLY_LINE\n")
    os.chmod(secret, 0o600)
    data = os.path.join(public_dir, "theirs.data")
    write_as(target_user, data, crafted_profile([(str(secret), 2)]))
    r = ep.run("report", data, "--json", "--limit", "0")
    names = {f["name"] for f in json.loads(r.stdout)["functions"]}
    assert "ROOT_ONLY_LINE" not in names, names
    assert "--force" in r.stderr, r.stderr
    forced = ep.run("report", data, "--json", "--limit", "0", "--force")
    assert "ROOT_ONLY_LINE" in {f["name"] for f in json.loads(forced.stdout)["functions"]}
    fifo = os.path.join(public_dir, "in.fifo")
    subprocess.run([sys.executable, "-c", "import os, sys; os.mkfifo(sys.argv[1], 0o666)", fifo],
                   preexec_fn=as_user(ATTACKER), check=True)
    r = ep.run("report", fifo, check=False, timeout=20)
    assert r.returncode != 0 and "not a regular file" in r.stderr, r.stderr


def test_record_user_runs_the_command_as_that_user(ep, need_bpf, target_user, public_dir):
    """record --user USER -- CMD: the command runs with USER's uid, gid and groups (no way
    back to root), and what it creates is USER's."""
    uid, gid = user_ids(target_user)
    out = os.path.join(public_dir, "ids")
    ep.run("record", "-q", "--user", target_user, "-o", "u.data", "--", "sh", "-c",
           f'id -u > {out}; id -g >> {out}; id -G >> {out}; cat /proc/self/status >> {out}')
    lines = open(out).read().splitlines()
    assert lines[0] == str(uid) and lines[1] == str(gid), lines[:3]
    assert "0" not in lines[2].split(), lines[2]
    status = {ln.split(":")[0]: ln.split()[1:] for ln in lines[3:] if ":" in ln}
    assert status["Uid"] == [str(uid)] * 4 and status["Gid"] == [str(gid)] * 4, status
    assert os.stat(out).st_uid == uid
    r = ep.run("record", "-q", "--user", "no-such-user-eprof", "--", "true", check=False)
    assert r.returncode != 0 and "no-such-user-eprof" in r.stderr, r.stderr


def test_mem_channel_pid_is_the_peers(ep, need_bpf, target_user):
    """The target's own user may connect (its processes do), but what it sends is its own
    process's: records that name pid 1 are not pid 1's."""
    rec = subprocess.Popen([ep.bin, "record", "--mem=1", "--user", target_user, "-o", "p.data",
                            "--", "sleep", "3"], cwd=ep.dir, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    name = wait_for_name(MEM_SOCK, rec)
    d = os.stat(os.path.dirname(name))
    assert d.st_uid == user_ids(target_user)[0] and stat.S_IMODE(d.st_mode) == 0o700
    # Records dated before the command runs are not the recording's: forge once it runs.
    wait_for_child(rec.pid, "sleep")
    forger = run_as(target_user, FORGE, name)
    out, err = forger.communicate(timeout=30)
    _, rerr = rec.communicate(timeout=60)
    assert rec.returncode == 0 and forger.returncode == 0, rerr + err

    def tib_under(pid):
        folded = ep.run("flamegraph", "p.data", "--mem", "--folded", "--pid", str(pid)).stdout
        return [ln for ln in folded.splitlines() if int(ln.rsplit(" ", 1)[1]) >= TIB]
    assert not tib_under(1), "records naming pid 1 were filed under pid 1"
    assert tib_under(forger.pid), "not filed under the sender's pid: " + rerr
    big = [b for b in memory_numbers(ep.report_json("p.data")["memory"]) if b >= TIB]
    assert big, "the target user's own records were refused: " + rerr


def test_mem_channel_attached_target_of_another_user(ep, need_bpf, target_user, public_dir,
                                                      public_memfix):
    """record -p of another user's process: the library injected there reaches a socket in a
    0700 directory of that user's (and only that user can), its every call is recorded, and
    the directory is gone at the end."""
    from test_mem import check_exact, memory
    exe = public_memfix
    go = os.path.join(public_dir, "go")
    target = subprocess.Popen([exe, "20000", go], preexec_fn=as_user(target_user),
                              stdout=subprocess.DEVNULL, cwd="/")
    rec = subprocess.Popen([ep.bin, "record", "-v", "--mem=1", "--ringbuf-mb", "64", "-p",
                            str(target.pid)], cwd=ep.dir, stderr=subprocess.PIPE, text=True)
    lines = []
    try:
        for line in rec.stderr:
            lines.append(line)
            if "allocator probes" in line:
                break
        names = unix_names(f"{MEM_SOCK}{rec.pid}-")
        assert names, "".join(lines)
        d = os.stat(os.path.dirname(names[0]))
        assert d.st_uid == user_ids(target_user)[0] and stat.S_IMODE(d.st_mode) == 0o700
        probe = run_as(ATTACKER, PROBE, str(rec.pid))
        pout, perr = probe.communicate(timeout=30)
        assert re.search(r"^refused \S+ EACCES", pout, re.M), pout + perr
        assert not re.search(r"^(connected|listed) ", pout, re.M), pout
        write_as(target_user, go, b"")
        assert target.wait(timeout=60) == 0
        rest = rec.stderr.read()
        assert rec.wait(timeout=60) == 0, "".join(lines) + rest
    finally:
        if target.poll() is None:
            target.kill()
        if rec.poll() is None:
            rec.kill()
        if os.path.exists(go):
            os.unlink(go)
    log = "".join(lines) + rest
    assert re.search(r"channel: [1-9]\d* allocations", log), log
    check_exact(memory(ep), 20000)
    assert not os.path.lexists(os.path.dirname(names[0]))


def test_mem_channel_target_in_its_own_mount_namespace(ep, need_bpf, target_user, public_dir,
                                                       public_memfix):
    """record -p --mem=1 of another user's process in a mount namespace of its own, with a /tmp
    of its own (a container's): no name in our /tmp means anything there, so the channel is
    the socket pair the injector made in the process, and every call is recorded through it
    (not through the slower markers), exactly."""
    from test_mem import check_exact, memory
    for tool in ("unshare", "setpriv"):
        if not shutil.which(tool):
            pytest.skip(f"skipped: no {tool}(1)")
    exe = public_memfix
    go = os.path.join(public_dir, "go")
    uid, gid = user_ids(target_user)
    # The fixture's directory seen at /mnt, then a tmpfs over /tmp: our /tmp is out of sight.
    script = (f"mount --bind {public_dir} /mnt && mount -t tmpfs -o mode=1777 eprof-ns /tmp && "
              f"exec setpriv --reuid={uid} --regid={gid} --clear-groups /mnt/memfix 20000 /mnt/go")
    target = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                               script], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, cwd="/")
    rec = None
    try:
        end = time.time() + 30
        while time.time() < end and target.poll() is None:
            try:
                if open(f"/proc/{target.pid}/comm").read().strip() == "memfix":
                    break
            except OSError:
                pass
            time.sleep(0.02)
        assert target.poll() is None, target.stderr.read()
        assert os.stat(f"/proc/{target.pid}/ns/mnt").st_ino != os.stat("/proc/self/ns/mnt").st_ino
        rec = subprocess.Popen([ep.bin, "record", "-v", "--mem=1", "--ringbuf-mb", "64", "-p",
                                str(target.pid)], cwd=ep.dir, stderr=subprocess.PIPE, text=True)
        lines = []
        for line in rec.stderr:
            lines.append(line)
            if "allocator probes" in line:
                break
        write_as(target_user, go, b"")
        assert target.wait(timeout=60) == 0, target.stderr.read()
        rest = rec.stderr.read()
        assert rec.wait(timeout=60) == 0, "".join(lines) + rest
    finally:
        for p in (target, rec):
            if p is not None and p.poll() is None:
                p.kill()
        if os.path.exists(go):
            os.unlink(go)
    log = "".join(lines) + rest
    assert re.search(r"channel: [1-9]\d* allocations", log), log
    check_exact(memory(ep), 20000)
    # no socket directory was made for it: none would have been reachable
    assert not unix_names(f"{MEM_SOCK}{rec.pid}-")


def test_another_users_recording_shrinks_while_read(ep, target_user, public_dir, tmp_path):
    """Another user truncates their recording while root's eprof reads it (a shim truncates it
    at eprof's first read of it, where a racing process could): one line of error and a
    non-zero exit, never a SIGBUS (a file another user can write is read, not mapped)."""
    from test_faults import crafted_profile
    shim = str(tmp_path / "shrink.so")
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", shim,
                    os.path.join(os.path.dirname(__file__), "..", "fixtures", "shrink_shim.c"),
                    "-ldl"], check=True)
    blob = crafted_profile([("/bin/true", 2), ("/bin/sh", 2)])
    data = os.path.join(public_dir, "shrinks.data")
    mark = str(tmp_path / "mark")
    for to in (0, 40, len(blob) // 2, len(blob) - 1):
        write_as(target_user, data, blob)
        if os.path.exists(mark):
            os.unlink(mark)
        # An ASan build of eprof would refuse a library preloaded before its runtime.
        asan = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"),
                                      "verify_asan_link_order=0"]))
        env = dict(os.environ, LD_PRELOAD=shim, SHRINK_PATH=data, SHRINK_TO=str(to),
                   SHRINK_MARK=mark, ASAN_OPTIONS=asan)
        r = ep.run("report", data, check=False, env=env, timeout=30)
        assert os.path.exists(mark), f"the shim did not truncate at {to}: {r.stderr}"
        assert r.returncode > 0, f"truncated to {to}: exit {r.returncode} {r.stderr}"
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "shrank" in lines[0], r.stderr
    write_as(target_user, data, blob)
    assert ep.run("report", data, check=False).returncode == 0


def test_cupti_socket_of_the_command_user(ep, need_bpf, target_user, public_dir):
    """record --user USER with the CUPTI collector: its socket is in a 0700 directory of
    USER's (the socket 0600, theirs), USER's collector reaches it and its kernels are
    recorded, another user gets EACCES, and nothing is left in /tmp afterwards."""
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    if not os.path.exists(os.path.join(cuda, "include", "cupti.h")) or \
            not os.path.exists(os.path.join(os.path.dirname(ep.bin), "libeprof_cupti.so")):
        pytest.skip("skipped: no cupti.h or no libeprof_cupti.so")
    fake = os.path.join(os.path.dirname(__file__), "..", "fixtures", "fakecuda")
    d = os.path.join(public_dir, "fakecuda")
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o755)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", f"-I{cuda}/include", "-o",
                    f"{d}/libfakecupti.so", f"{fake}/fake_cupti.c", "-lpthread"], check=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-Wl,-soname,libcuda.so.1", "-o",
                    f"{d}/libcuda.so.1", f"{fake}/fake_cuda.c", "-ldl"], check=True)
    if not os.path.lexists(f"{d}/libcuda.so"):
        os.symlink("libcuda.so.1", f"{d}/libcuda.so")
    subprocess.run(["cc", "-O1", "-g", "-o", f"{d}/fake_app", f"{fake}/fake_app.c", f"-L{d}",
                    "-lcuda", f"-Wl,-rpath,{d}"], check=True)
    # The app waits for the probe below before it starts its work.
    go = os.path.join(public_dir, "cupti-go")
    script = f'while [ ! -e {go} ]; do sleep 0.05; done; exec {d}/fake_app'
    env = dict(os.environ, EPROF_LIBCUPTI=f"{d}/libfakecupti.so")
    env.pop("CUDA_INJECTION64_PATH", None)
    rec = subprocess.Popen([ep.bin, "record", "-q", "--user", target_user, "-o", "cu.data",
                            "--", "sh", "-c", script], cwd=ep.dir, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # The command's environment names the socket (another recorder's may be in /tmp).
        sh = wait_for_child(rec.pid, "sh")
        with open(f"/proc/{sh}/environ", "rb") as f:
            env_of = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
        name = os.path.dirname(env_of.get(b"EPROF_CUPTI_SOCK", b"").decode())
        assert name, "no CUPTI socket directory"
        uid = user_ids(target_user)[0]
        st = os.stat(name)
        assert st.st_uid == uid and stat.S_IMODE(st.st_mode) == 0o700, oct(st.st_mode)
        sk = os.lstat(os.path.join(name, "sock"))
        assert sk.st_uid == uid and stat.S_IMODE(sk.st_mode) == 0o600, oct(sk.st_mode)
        probe = run_as(ATTACKER, "import socket, sys\ns = socket.socket(socket.AF_UNIX, "
                       "socket.SOCK_SEQPACKET)\ntry:\n    s.connect(sys.argv[1])\n    print('x')\n"
                       "except OSError as e:\n    print('refused', e.errno)", f"{name}/sock")
        pout, _ = probe.communicate(timeout=30)
        assert pout.strip() == "refused 13", pout
        write_as(target_user, go, b"")
        _, err = rec.communicate(timeout=120)
    finally:
        if rec.poll() is None:
            rec.kill()
        if os.path.exists(go):
            os.unlink(go)
    assert rec.returncode == 0, err
    kernels = {k["name"]: k["count"] for k in ep.report_json("cu.data")["gpu"]["kernels"]}
    assert kernels == {"kernel_a": 10, "kernel_b": 5}, kernels
    assert not os.path.lexists(name)


def start_mem_recorder(ep, out):
    """record --mem=1 -- sleep 60 in its own process group, as a terminal's foreground job
    (a signal to the group reaches eprof and sleep): the process and its socket's path, once
    the command runs."""
    rec = subprocess.Popen([ep.bin, "record", "--mem=1", "-o", out, "--", "sleep", "60"],
                           cwd=ep.dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, start_new_session=True)
    name = wait_for_name(MEM_SOCK, rec)
    wait_for_child(rec.pid, "sleep")
    return rec, name


def test_mem_channel_directory_gone_after_ctrl_c(ep, need_bpf):
    """Ctrl-C of the recorder, and a command that cannot be run: no socket directory of
    eprof's is left under /tmp."""
    rec, name = start_mem_recorder(ep, "c.data")
    os.killpg(rec.pid, signal.SIGINT)
    _, err = rec.communicate(timeout=60)
    assert rec.returncode in (0, 130), err  # 130: stopped by SIGINT, the file written
    assert not os.path.lexists(os.path.dirname(name)), "left behind after Ctrl-C"
    r = subprocess.Popen([ep.bin, "record", "--mem=1", "-o", "n.data", "--",
                          "/nonexistent/eprof-cmd"], cwd=ep.dir, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    _, err = r.communicate(timeout=60)
    assert r.returncode != 0, err
    left = [p for p in os.listdir("/tmp") if p.startswith(f"eprof-mem-{r.pid}-")]
    assert not left, left


def test_channel_directory_of_a_killed_recorder_swept(ep, need_bpf):
    """A recorder killed with SIGKILL leaves its channel's directory (it cannot remove it); the
    next recorder that opens a channel removes it - but not a lookalike whose recorder still
    runs, nor one a user filled with something else than the socket."""
    rec, name = start_mem_recorder(ep, "k.data")
    os.killpg(rec.pid, signal.SIGKILL)
    rec.wait(timeout=30)
    left = os.path.dirname(name)
    assert os.path.isdir(left), "nothing left to sweep"
    # a directory of a dead pid holding a file of its owner's: not the recorder's to remove
    planted = f"/tmp/eprof-mem-{rec.pid}-zzzzzz"
    os.mkdir(planted, 0o700)
    with open(os.path.join(planted, "mine"), "w") as f:
        f.write("x")
    # an empty one of a process that runs (this one): not gone, whatever its name says
    live = f"/tmp/eprof-mem-{os.getpid()}-yyyyyy"
    os.mkdir(live, 0o700)
    try:
        r = ep.run("record", "--mem=1", "-q", "-o", "n.data", "--", "true")
        assert r.returncode == 0
        assert not os.path.lexists(left), "the killed recorder's directory is still there"
        assert os.path.exists(os.path.join(planted, "mine"))
        assert os.path.isdir(live)
    finally:
        shutil.rmtree(planted, ignore_errors=True)
        shutil.rmtree(live, ignore_errors=True)

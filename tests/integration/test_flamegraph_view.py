# SPDX-License-Identifier: MIT
"""What a user sees first when opening the flamegraph of a real job with deep stacks (the
PyTorch training job of tests/fixtures/python/torch_train.py: stacks of ~300 frames, Python
threads that hold the GIL or not): the SVG and the HTML report rendered in headless Chromium,
screenshots taken through the DevTools protocol (over a pipe: no extra package), and the
share of the first screen that is flamegraph boxes measured on the pixels.

Screenshots land in $EPROF_SCREENSHOTS when it is set (to look at them)."""
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import FIXTURES

TORCH_JOB = os.path.join(FIXTURES, "python", "torch_train.py")
PYTHON = "/usr/bin/python3"
SCREEN = (1280, 800)

# A pixel is background (not a box) when it is near white and grey: the SVG's background
# gradient (#f8f8f8 to #ebebef), its header and footer bands, the HTML page. Frames are
# coloured, or grey no lighter than #dadada; labels inside them count with their box.
BOX_SHARE_JS = """
(async (b64) => {
  const img = new Image();
  img.src = 'data:image/png;base64,' + b64;
  await img.decode();
  const c = document.createElement('canvas');
  c.width = img.width; c.height = img.height;
  const g = c.getContext('2d');
  g.drawImage(img, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data;
  let box = 0;
  for (let i = 0; i < d.length; i += 4) {
    const mx = Math.max(d[i], d[i + 1], d[i + 2]), mn = Math.min(d[i], d[i + 1], d[i + 2]);
    if (!(mn >= 232 && mx - mn <= 8)) box++;
  }
  return box / (c.width * c.height);
})"""


def skip(reason):
    print(f"skipped: {reason}", file=sys.stderr)
    pytest.skip(f"skipped: {reason}")


def high_fd(fd):
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


class Chromium:
    """Headless Chromium driven over --remote-debugging-pipe (fd 3 in, fd 4 out, JSON
    messages ended by NUL)."""

    def __init__(self, exe, stderr=None):
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()
        # above 4, so that neither is overwritten by, or is, the child's fd 3 or 4
        to_r, from_w = high_fd(to_r), high_fd(from_w)
        self.profile = tempfile.mkdtemp(prefix="eprof-cdp-")
        args = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--hide-scrollbars", "--remote-debugging-pipe",
                f"--user-data-dir={self.profile}", f"--window-size={SCREEN[0]},{SCREEN[1]}"]
        self.proc = subprocess.Popen(
            ["/bin/bash", "-c", f'exec "$0" "$@" 3<&{to_r} 4>&{from_w} {to_r}<&- {from_w}>&-',
             *args], pass_fds=(to_r, from_w), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=stderr or subprocess.DEVNULL)
        os.close(to_r)
        os.close(from_w)
        self.buf = b""
        self.next_id = 0
        self.events = []

    def close(self):
        try:
            os.close(self.to_w)
            os.close(self.from_r)
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            shutil.rmtree(self.profile, ignore_errors=True)

    def _read(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.from_r], [], [], left)[0]:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self.from_r, 1 << 20)
            if not chunk:
                raise EOFError("chromium exited")
            self.buf += chunk
        msg, _, self.buf = self.buf.partition(b"\0")
        return json.loads(msg)

    def call(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method, session, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            for i, m in enumerate(self.events):
                if m.get("method") == method and m.get("sessionId") == session:
                    del self.events[i]
                    return m
            self.events.append(self._read(deadline))

    def page(self):
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget",
                            {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable", session=session)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": SCREEN[0], "height": SCREEN[1], "deviceScaleFactor": 1,
                   "mobile": False}, session)
        return session

    def evaluate(self, session, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "awaitPromise": True,
                                           "returnByValue": True}, session)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr[:60]}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def screenshot(self, session, url):
        """Opens url, lets its scripts run and two frames paint; the first screen as PNG."""
        self.call("Page.navigate", {"url": url}, session)
        self.wait_event("Page.loadEventFired", session)
        self.evaluate(session, "new Promise(r => requestAnimationFrame(() => "
                               "requestAnimationFrame(() => r(1))))")
        return self.call("Page.captureScreenshot", {"format": "png"}, session)["data"]


@pytest.fixture(scope="module")
def chromium():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        skip("chromium is not installed (Debian: apt-get install chromium)")
    c = Chromium(exe)
    try:
        c.call("Browser.getVersion")
    except (TimeoutError, EOFError) as e:
        c.close()
        skip(f"headless chromium does not start: {e}")
    yield c
    c.close()


@pytest.fixture(scope="module")
def torch_record(tmp_path_factory, eprof):
    """A short record of the torch job (one DataLoader worker), by launch."""
    r = subprocess.run([PYTHON, "-c", "import torch"], capture_output=True)
    if r.returncode != 0:
        skip("no PyTorch for /usr/bin/python3 (Debian: apt-get install python3-torch)")
    d = tmp_path_factory.mktemp("fgview")
    data = str(d / "torch.data")
    subprocess.run([eprof, "record", "-q", "-F", "499", "-o", data, "--", PYTHON, TORCH_JOB,
                    "1.5", "--workers", "1"], check=True, capture_output=True, timeout=120)
    return d, data


def save(name, b64):
    out = os.environ.get("EPROF_SCREENSHOTS")
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, name), "wb") as f:
            f.write(base64.b64decode(b64))


def box_share(chromium, png):
    page = chromium.page()
    return chromium.evaluate(page, BOX_SHARE_JS + f"({json.dumps(png)})")


def test_svg_opens_where_the_work_is(need_bpf, eprof, torch_record, chromium):
    d, data = torch_record
    svg = str(d / "flame.svg")
    subprocess.run([eprof, "flamegraph", data, "-o", svg], check=True, capture_output=True)
    with open(svg) as f:
        text = f.read()
    height = int(text.split('height="', 1)[1].split('"', 1)[0])
    assert height > 2 * SCREEN[1], f"the job's graph is {height} px: no deep stacks?"
    # The GIL state of Python samples is a colour and a filter, not a root frame.
    assert '"[GIL]"' not in text and '"[no GIL]"' not in text
    assert '"gil":1' in text

    page = chromium.page()
    png = chromium.screenshot(page, "file://" + svg)
    save("flame.svg.png", png)
    state = chromium.evaluate(page, "({y: window.scrollY, h: window.innerHeight, "
                                    "head: document.getElementById('fg-head')"
                                    ".getAttribute('transform')})")
    share = box_share(chromium, png)
    print(f"svg {height} px: scrolled to {state['y']}, boxes {100 * share:.1f}% of the "
          "first screen")
    # opened at the root (the bottom), with the title and search kept in view
    assert state["y"] + state["h"] >= height - 2, state
    assert state["head"] and "translate" in state["head"], state
    assert share >= 0.5, f"flamegraph boxes are {100 * share:.1f}% of the first screen"

    # flipped (root at the top, as --inverted writes it): the top of the page, as full
    page = chromium.page()
    png = chromium.screenshot(page, "file://" + svg + "#i=1")
    save("flame.svg-flipped.png", png)
    assert chromium.evaluate(page, "window.scrollY") == 0
    share = box_share(chromium, png)
    assert share >= 0.5, f"flipped: boxes are {100 * share:.1f}% of the first screen"


def test_html_report_opens_its_flamegraph_at_the_root(need_bpf, eprof, torch_record,
                                                      chromium):
    d, data = torch_record
    html = str(d / "report.html")
    subprocess.run([eprof, "export", data, "--format", "html", "-o", html], check=True,
                   capture_output=True)
    page = chromium.page()
    png = chromium.screenshot(page, "file://" + html + "#flamegraph")
    save("report.html.png", png)
    state = chromium.evaluate(page, """(() => {
        const box = document.querySelector('.fg');
        return {top: box.scrollTop, max: box.scrollHeight - box.clientHeight,
                boxTop: box.getBoundingClientRect().top,
                errors: document.getElementById('js-errors').textContent};
    })()""")
    share = box_share(chromium, png)
    print(f"html: graph box scrolled to {state['top']} of {state['max']}, boxes "
          f"{100 * share:.1f}% of the first screen")
    assert not state["errors"], state["errors"]
    assert state["max"] > 0 and state["top"] >= state["max"] - 2, state
    assert share >= 0.5, f"flamegraph boxes are {100 * share:.1f}% of the first screen"


# --- the views of a Python profile in one SVG (issue 33) ----------------------------------------

TWO_HOT = os.path.join(FIXTURES, "python", "two_hot.py")

# What is drawn: the labels of the frames, the zoomed frame (the one drawn across the whole
# width that is no ancestor), the view control and the search's line.
DRAWN_JS = """(() => {
  const gs = [...document.querySelectorAll('#fg-frames g')];
  const label = g => (g.querySelector('text') || {}).textContent || '';
  const zoomed = gs.find(g => !/anc/.test(g.getAttribute('class') || '') &&
                         g.querySelector('rect').getAttribute('width') === '1180.0');
  return {labels: gs.map(label).filter(t => t), frames: gs.length,
          zoomed: zoomed ? label(zoomed) : null,
          matches: document.querySelectorAll('#fg-frames g.match').length,
          matched: document.getElementById('fg-matched').textContent,
          view: [...document.querySelectorAll('#fg-views tspan')]
                  .filter(t => /\\bon\\b/.test(t.getAttribute('class'))).map(t => t.textContent),
          hash: location.hash};
})()"""


def click_view(chromium, page, name):
    chromium.evaluate(page, f"""(() => {{
      const t = [...document.querySelectorAll('#fg-views tspan')]
                  .find(t => t.textContent === {json.dumps(name)});
      t.dispatchEvent(new MouseEvent('click', {{bubbles: true}}));
    }})()""")
    chromium.evaluate(page, "new Promise(r => requestAnimationFrame(() => r(1)))")
    return chromium.evaluate(page, DRAWN_JS)


@pytest.fixture(scope="module")
def py_record(tmp_path_factory, eprof):
    """two_hot.py (pure Python, 70/30) on Debian's python3, by launch."""
    d = tmp_path_factory.mktemp("fgviews")
    data = str(d / "py.data")
    subprocess.run([eprof, "record", "-q", "-F", "499", "-o", data, "--", PYTHON, TWO_HOT,
                    "1.5"], check=True, capture_output=True, timeout=120)
    return d, data


def is_py(label):
    return "(two_hot.py:" in label or label.startswith(("hot_a (", "hot_b (", "main (tw"))


def test_svg_switches_views(need_bpf, eprof, py_record, chromium):
    d, data = py_record
    svg = str(d / "views.svg")
    subprocess.run([eprof, "flamegraph", data, "-o", svg], check=True, capture_output=True)
    with open(svg) as f:
        text = f.read()
    assert '"views":[' in text and '"view":"mixed"' in text

    page = chromium.page()
    save("views-mixed.png", chromium.screenshot(page, "file://" + svg + "#s=hot_b"))
    mixed = chromium.evaluate(page, DRAWN_JS)
    assert mixed["view"] == ["mixed"], mixed["view"]
    assert any(l.startswith("hot_a (two_hot.py:") for l in mixed["labels"]), mixed["labels"]
    assert "Py_RunMain" in mixed["labels"], mixed["labels"]
    assert mixed["matches"] and mixed["matched"].startswith("Matched:"), mixed

    py = click_view(chromium, page, "python")
    save("views-python.png", chromium.call("Page.captureScreenshot", {"format": "png"},
                                            page)["data"])
    assert py["view"] == ["python"] and "v=python" in py["hash"], py
    assert any(l.startswith("hot_a (two_hot.py:") for l in py["labels"]), py["labels"]
    assert not any(l.startswith(("Py_RunMain", "_start", "_PyEval")) for l in py["labels"])
    assert py["frames"] < mixed["frames"], (py["frames"], mixed["frames"])
    # the search holds in the other view: hot_b is found there too, at the same share
    assert py["matches"] and py["matched"] == mixed["matched"], (py["matched"], mixed["matched"])

    native = click_view(chromium, page, "native")
    save("views-native.png", chromium.call("Page.captureScreenshot", {"format": "png"},
                                            page)["data"])
    assert native["view"] == ["native"], native
    assert not any(is_py(l) for l in native["labels"]), native["labels"]
    assert "Py_RunMain" in native["labels"], native["labels"]

    # zoomed on hot_a in mixed, the python view opens zoomed on hot_a; the native view has
    # no hot_a: it zooms out to hot_a's nearest caller it has, the root at worst
    page = chromium.page()
    chromium.screenshot(page, "file://" + svg)
    chromium.evaluate(page, """(() => {
      const g = [...document.querySelectorAll('#fg-frames g')].find(
          g => ((g.querySelector('text') || {}).textContent || '').startsWith('hot_a ('));
      g.dispatchEvent(new MouseEvent('click', {bubbles: true}));
    })()""")
    zoomed = chromium.evaluate(page, DRAWN_JS)
    assert zoomed["zoomed"] and zoomed["zoomed"].startswith("hot_a ("), zoomed["zoomed"]
    py = click_view(chromium, page, "python")
    assert py["zoomed"] == zoomed["zoomed"], py["zoomed"]
    native = click_view(chromium, page, "native")
    assert not native["zoomed"] or not is_py(native["zoomed"]), native["zoomed"]
    # and the key v goes round the views
    chromium.evaluate(page, "document.dispatchEvent(new KeyboardEvent('keydown', {key: 'v'}))")
    assert chromium.evaluate(page, DRAWN_JS)["view"] == ["python"]

    # the URL keeps the view; --view names the one the file opens on
    page = chromium.page()
    chromium.screenshot(page, "file://" + svg + "#v=native")
    assert chromium.evaluate(page, DRAWN_JS)["view"] == ["native"]
    svg_py = str(d / "views-python.svg")
    subprocess.run([eprof, "flamegraph", data, "--view", "python", "-o", svg_py], check=True,
                   capture_output=True)
    page = chromium.page()
    chromium.screenshot(page, "file://" + svg_py)
    opened = chromium.evaluate(page, DRAWN_JS)
    assert opened["view"] == ["python"] and not opened["hash"], opened
    assert opened["frames"] < mixed["frames"], (opened["frames"], mixed["frames"])


def test_svg_views_of_other_weights(need_bpf, eprof, tmp_path):
    """Off-CPU time of a Python program: its SVG carries the views too; a native program's
    SVG carries none."""
    data = str(tmp_path / "off.data")
    subprocess.run([eprof, "record", "-q", "-F", "499", "--offcpu", "-o", data, "--", PYTHON,
                    "-c", "import time\nfor i in range(20): time.sleep(0.01)"], check=True,
                   capture_output=True, timeout=120)
    svg = str(tmp_path / "off.svg")
    subprocess.run([eprof, "flamegraph", data, "--offcpu", "--view", "native", "-o", svg],
                   check=True, capture_output=True)
    with open(svg) as f:
        text = f.read()
    assert '"view":"native"' in text and '"views":[' in text
    data = str(tmp_path / "native.data")
    subprocess.run([eprof, "record", "-q", "-F", "499", "-o", data, "--", "/bin/sh", "-c",
                    "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done"], check=True,
                   capture_output=True, timeout=120)
    subprocess.run([eprof, "flamegraph", data, "-o", svg], check=True, capture_output=True)
    with open(svg) as f:
        text = f.read()
    assert '"views"' not in text and 'id="fg-views"' not in text

/* SPDX-License-Identifier: MIT */
/*
 * eprof flamegraph: draws, zooms and searches the frames embedded as JSON in
 * the SVG (#fg-data, written by flamegraph/flamegraph.c). The static picture
 * in #fg-frames is replaced on start-up by frames drawn from that model, so
 * zooming can show frames that were too narrow for the first picture.
 *
 * Frames are flat arrays indexed in preorder; end[i] is one past the last
 * frame of i's subtree, so a subtree is a range and skipping it is O(1).
 *
 * Deep stacks make a tall graph: it opens scrolled to its root (at the bottom,
 * or at the top once flipped), with the title, search and legend kept at the
 * top of the window and the status line at its bottom while it scrolls.
 *
 * A profile with Python frames carries several views of its samples (python,
 * mixed, native: D.views): each has its own frames, all share the names, and
 * the control switches between them.
 */
(function () {
	'use strict';

	var SVG_NS = 'http://www.w3.org/2000/svg';
	var KINDS = ['user', 'kernel', 'JIT', 'unknown', 'special', 'Python'];
	var doc = document;
	var dataEl = doc.getElementById('fg-data');

	if (!dataEl)
		return;

	/* the root <svg>, also when the graph is inlined into an HTML page */
	var svg = dataEl.ownerSVGElement || doc.documentElement;

	var D = JSON.parse(dataEl.textContent);
	var L = D.layout;
	var names = D.names;
	var plotW = L.width - 2 * L.padX;

	/* The views; the one the file opens on has its frames at the top level of D. */
	var views = D.views || [{ name: '' }], vcur = 0, v0, k0;

	for (k0 = 0; k0 < views.length; k0++) {
		if (!views[k0].frames) {
			vcur = k0;
			views[k0].frames = D.frames;
			views[k0].nf = D.nf;
			views[k0].total = D.total;
			views[k0].scale = D.scale;
			views[k0].rows = L.rows;
			views[k0].gil = D.gil;
		}
	}
	v0 = vcur;
	D.frames = null;

	/* The frames of the view shown (use()): flat arrays in preorder. */
	var n, total, depth, name, parent, end, fx, fw, fself;
	var fbase; /* differential: the base weight */
	var gheld, gfree; /* Python weight with the GIL held, and not held */
	var gilMode = !!(D.gil && D.gilColors);
	var colors = [];

	function decode(v) {
		var raw = v.frames, nf = v.nf, scale = v.scale, open = [], next = [0];
		var g = 5 + (D.diff ? 1 : 0), i, j, d, p;

		n = raw.length / nf;
		depth = new Uint32Array(n);
		name = new Uint32Array(n);
		parent = new Int32Array(n);
		end = new Int32Array(n);
		fx = new Float64Array(n);
		fw = new Float64Array(n);
		fself = new Float64Array(n);
		fbase = D.diff ? new Float64Array(n) : null;
		gheld = v.gil ? new Float64Array(n) : null;
		gfree = v.gil ? new Float64Array(n) : null;
		for (i = 0; i < n; i++) {
			j = i * nf;
			d = raw[j];
			while (open.length > d)
				end[open.pop()] = i;
			p = d ? open[d - 1] : -1;
			parent[i] = p;
			depth[i] = d;
			name[i] = raw[j + 1];
			fw[i] = raw[j + 3] * scale;
			fself[i] = raw[j + 4] * scale;
			if (fbase)
				fbase[i] = raw[j + 5] * scale;
			if (gheld) {
				gheld[i] = raw[j + g] * scale;
				gfree[i] = raw[j + g + 1] * scale;
			}
			fx[i] = d ? next[d] + raw[j + 2] * scale : 0;
			next[d] = fx[i] + fw[i];
			next[d + 1] = fx[i];
			open.push(i);
		}
		while (open.length)
			end[open.pop()] = n;
		v.frames = null; /* let the parsed array go */
		v.a = [n, depth, name, parent, end, fx, fw, fself, fbase, gheld, gfree];
	}

	/* Makes view k the one drawn, decoding its frames the first time. */
	function use(k) {
		var v = views[k], a;

		if (!v.a)
			decode(v);
		a = v.a;
		n = a[0];
		depth = a[1];
		name = a[2];
		parent = a[3];
		end = a[4];
		fx = a[5];
		fw = a[6];
		fself = a[7];
		fbase = a[8];
		gheld = a[9];
		gfree = a[10];
		total = v.total;
		L.rows = v.rows;
		vcur = k;
	}

	/* --- formatting ----------------------------------------------------------------------- */

	function group(v) {
		return String(Math.round(v)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
	}

	function scaled(v, suffix) {
		return v.toFixed(v < 9.995 ? 2 : v < 99.95 ? 1 : 0) + ' ' + suffix;
	}

	function fmt(v) {
		var u = D.unit, units = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB'], i = 0;

		if (u === 'ns') {
			if (v < 1e3)
				return Math.round(v) + ' ns';
			if (v < 1e6)
				return scaled(v / 1e3, '\u00b5s');
			if (v < 1e9)
				return scaled(v / 1e6, 'ms');
			return scaled(v / 1e9, 's');
		}
		if (u === 'bytes') {
			if (v < 1024)
				return Math.round(v) + ' B';
			for (v /= 1024; v >= 1023.95 && i < 4; i++)
				v /= 1024;
			return scaled(v, units[i]);
		}
		if (u === 'samples')
			return group(v) + (v === 1 ? ' sample' : ' samples');
		return group(v) + ' ' + u;
	}

	function pct(v, of) {
		return (of ? (100 * v) / of : 0).toFixed(2) + '%';
	}

	/* Same formula as fg_diff_rgb() in flamegraph/fg_style.c. */
	function diffColor(w, b) {
		var hi = Math.max(w, b), to = w >= b ? [222, 45, 38] : [46, 110, 214], k, c = [];

		if (!hi)
			return '#ffffff';
		k = Math.pow(Math.abs(w - b) / hi, 0.7);
		for (var i = 0; i < 3; i++)
			c.push(Math.round(255 + k * (to[i] - 255)));
		return 'rgb(' + c.join(',') + ')';
	}

	/* Same formula as fg_gil_rgb() in flamegraph/fg_style.c. */
	function gilColor(h, f) {
		var lo = [66, 146, 214], mid = [236, 226, 190], hi = [236, 112, 36];
		var share, a, b, k, c = [];

		if (!h && !f)
			return '#dadada';
		share = h / (h + f);
		a = share < 0.5 ? lo : mid;
		b = share < 0.5 ? mid : hi;
		k = share < 0.5 ? share * 2 : share * 2 - 1;
		for (var i = 0; i < 3; i++)
			c.push(Math.round(a[i] + k * (b[i] - a[i])));
		return 'rgb(' + c.join(',') + ')';
	}

	function frameColor(i) {
		if (gilMode)
			return gilColor(gheld[i], gfree[i]);
		return fbase && i ? diffColor(fw[i], fbase[i]) : colors[name[i]];
	}

	/* --- text width: labels are monospace, East Asian wide characters count double -------- */

	var charW = 0.6 * L.fontPx;

	function isWide(c) {
		return (c >= 0x1100 && c <= 0x115f) || (c >= 0x2e80 && c <= 0xa4cf) ||
		       (c >= 0xac00 && c <= 0xd7a3) || (c >= 0xf900 && c <= 0xfaff) ||
		       (c >= 0xfe30 && c <= 0xfe4f) || (c >= 0xff00 && c <= 0xff60) ||
		       (c >= 0xffe0 && c <= 0xffe6);
	}

	function charWidth(s, i) {
		var c = s.charCodeAt(i);

		if (c >= 0xdc00 && c <= 0xdfff)
			return 0; /* low surrogate: counted with its pair */
		return isWide(c) || (c >= 0xd800 && c <= 0xdbff) ? 2 * charW : charW;
	}

	function measureFont(g) {
		var t = doc.createElementNS(SVG_NS, 'text'), w;

		t.textContent = 'MMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMM';
		g.appendChild(t);
		w = t.getComputedTextLength ? t.getComputedTextLength() / 40 : 0;
		g.removeChild(t);
		if (w > 0)
			charW = w;
	}

	/* The label that fits w px: the name, or a prefix and "..", or nothing. */
	function label(s, w) {
		var room = w - 2 * L.labelPad, acc = 0, i, cw;

		if (room < 3 * charW)
			return '';
		if (s.length * charW <= room) {
			for (i = 0; i < s.length; i++)
				acc += charWidth(s, i);
			if (acc <= room)
				return s;
			acc = 0;
		}
		room -= 2 * charW;
		for (i = 0; i < s.length; i++) {
			cw = charWidth(s, i);
			if (acc + cw > room)
				break;
			acc += cw;
		}
		if (i > 0 && s.charCodeAt(i) >= 0xdc00 && s.charCodeAt(i) <= 0xdfff)
			i--;
		return i > 0 ? s.slice(0, i) + '..' : '';
	}

	/* --- state and elements --------------------------------------------------------------- */

	var frames = doc.getElementById('fg-frames');
	var head = doc.getElementById('fg-head');
	var foot = doc.getElementById('fg-foot');
	var footBand = foot ? foot.querySelector('.band') : null;
	var flipEl = doc.getElementById('fg-flip');
	var gilEl = doc.getElementById('fg-gil');
	var viewsEl = doc.getElementById('fg-views');
	var statusEl = doc.getElementById('fg-status');
	var matchedEl = doc.getElementById('fg-matched');
	var resetEl = doc.getElementById('fg-reset');
	var input = doc.getElementById('fg-search');
	var searchBtn = doc.getElementById('fg-search-btn');
	var tip, tipRect, tipLines = [], tipFrame = -1, tipW = 0, tipH = 0;
	var pool = [], used = 0;
	var cur = 0, rows = L.rows, height = 0;
	var query = '', match = null, searchTimer = 0;
	var inverse = null; /* cached inverse screen matrix, see toSvg() */
	var inverted0 = D.inverted; /* as written: the URL records a flip away from it */

	function rowY(d) {
		if (D.inverted)
			return L.headerH + d * L.frameH;
		return L.headerH + (rows - 1 - d) * L.frameH;
	}

	function resize(h) {
		if (h === height)
			return;
		height = h;
		inverse = null;
		svg.setAttribute('height', h);
		svg.setAttribute('viewBox', '0 0 ' + L.width + ' ' + h);
		statusEl.setAttribute('y', h - 10);
		matchedEl.setAttribute('y', h - 10);
		if (footBand)
			footBand.setAttribute('y', h - L.footerH + 4);
		place();
	}

	/* --- scrolling: open at the root, keep the header and the status line in view --------- */

	var box = null, placing = 0;

	/* The element the graph scrolls in: a box of the page it is inlined into, or the window. */
	function findBox() {
		var e, st;

		if (svg === doc.documentElement)
			return null;
		for (e = svg.parentNode; e && e.nodeType === 1; e = e.parentNode) {
			if (e === doc.body || e === doc.documentElement)
				break;
			st = window.getComputedStyle(e);
			if (/(auto|scroll)/.test(st.overflowY) && e.scrollHeight > e.clientHeight)
				return e;
		}
		return null;
	}

	/* Moves the header to the top and the footer to the bottom of what is in view. */
	function place() {
		var r, k, top, bottom, vt, vb, room;

		if (!head || !svg.getBoundingClientRect || !height)
			return;
		r = svg.getBoundingClientRect();
		if (!r.height)
			return;
		k = height / r.height; /* SVG units per CSS pixel */
		if (box) {
			vt = box.getBoundingClientRect().top;
			vb = box.getBoundingClientRect().top + box.clientHeight;
		} else {
			vt = 0;
			vb = window.innerHeight || doc.documentElement.clientHeight;
		}
		room = height - L.headerH - L.footerH;
		top = Math.max(0, Math.min((vt - r.top) * k, room));
		bottom = Math.min(0, Math.max((vb - r.top) * k - height, -room));
		head.setAttribute('transform', top ? 'translate(0,' + top.toFixed(1) + ')' : '');
		head.setAttribute('class', top ? 'floating' : '');
		if (foot)
			foot.setAttribute('transform', bottom ? 'translate(0,' + bottom.toFixed(1) + ')' : '');
	}

	function schedulePlace() {
		forgetMatrix();
		if (placing)
			return;
		placing = 1;
		(window.requestAnimationFrame || setTimeout)(function () {
			placing = 0;
			place();
		});
	}

	/* The root in view: the bottom of a flame graph, the top of an icicle. */
	function scrollToRoot() {
		var se;

		box = findBox();
		if (box) {
			box.scrollTop = D.inverted ? 0 : box.scrollHeight;
		} else if (svg === doc.documentElement) {
			se = doc.scrollingElement || doc.documentElement;
			window.scrollTo(0, D.inverted ? 0 : se.scrollHeight);
		}
		place();
	}

	/* One drawn frame: its elements and what was last written to them. */
	function Slot() {
		this.g = doc.createElementNS(SVG_NS, 'g');
		this.rect = doc.createElementNS(SVG_NS, 'rect');
		this.rect.setAttribute('height', L.frameH - 1);
		this.g.appendChild(this.rect);
		this.g.fgSlot = this;
		this.text = null;
		this.fi = -1;
		this.x = this.w = this.fill = this.label = this.cls = '';
		this.y = -1;
	}

	/* Writes only what changed: a search or a small zoom touches few attributes. */
	Slot.prototype.draw = function (i, x, y, w, cls) {
		var xs = x.toFixed(1), ws = w.toFixed(1), fill = frameColor(i);
		var lbl = label(names[name[i]], w), t = this.text;

		this.fi = i;
		if (cls !== this.cls)
			this.g.setAttribute('class', (this.cls = cls));
		if (xs !== this.x)
			this.rect.setAttribute('x', xs);
		if (y !== this.y)
			this.rect.setAttribute('y', y);
		if (ws !== this.w)
			this.rect.setAttribute('width', (this.w = ws));
		if (fill !== this.fill)
			this.rect.setAttribute('fill', (this.fill = fill));
		if (lbl && !t) {
			t = this.text = doc.createElementNS(SVG_NS, 'text');
			this.g.appendChild(t);
			this.x = '';
			this.y = -1;
		}
		if (t) {
			if (xs !== this.x)
				t.setAttribute('x', (x + L.labelPad).toFixed(1));
			if (y !== this.y)
				t.setAttribute('y', y + 11.5);
			if (lbl !== this.label)
				t.textContent = this.label = lbl;
		}
		this.x = xs;
		this.y = y;
	};

	function slotAt(k) {
		var s = pool[k] || (pool[k] = new Slot());

		if (!s.g.parentNode)
			frames.appendChild(s.g);
		return s;
	}

	function classOf(i, anc) {
		return (anc ? 'anc' : '') + (match && i && match[name[i]] ? ' match' : '');
	}

	/* Worse rank: narrower, or as wide and deeper (fg_key_worse() in C). */
	function worse(a, b) {
		return fw[a] < fw[b] || (fw[a] === fw[b] && depth[a] > depth[b]);
	}

	/*
	 * Keeps the best ranked max frames of list[from..]; a parent always ranks
	 * before its children, so what is kept is a connected tree.
	 */
	function capCount(list, from, max) {
		var rest = list.slice(from), out = list.slice(0, from), bar, i;

		rest.sort(function (a, b) {
			return worse(a, b) ? 1 : worse(b, a) ? -1 : 0;
		});
		bar = rest[max];
		for (i = from; i < list.length; i++) {
			if (worse(bar, list[i]))
				out.push(list[i]);
		}
		return out;
	}

	/* The ancestors of the zoomed frame, then its subtree down to minPx wide. */
	function visibleFrames() {
		var list = [], k = plotW / fw[cur], i, nanc;

		for (i = parent[cur]; i >= 0; i = parent[i])
			list.push(i);
		list.reverse();
		nanc = list.length;
		for (i = cur; i < end[cur];) {
			if (fw[i] * k < L.minPx) {
				i = end[i];
				continue;
			}
			list.push(i++);
		}
		if (list.length - nanc > L.maxDraw)
			list = capCount(list, nanc, L.maxDraw);
		return list;
	}

	function render() {
		var list = visibleFrames(), k = plotW / fw[cur], x0 = fx[cur], nanc = depth[cur];
		var dmax = 0, j, i, anc;

		for (j = 0; j < list.length; j++)
			dmax = Math.max(dmax, depth[list[j]]);
		rows = Math.max(L.rows, dmax + 1);
		resize(L.headerH + rows * L.frameH + L.footerH);
		for (j = 0; j < list.length; j++) {
			i = list[j];
			anc = j < nanc;
			slotAt(j).draw(i, anc ? L.padX : L.padX + (fx[i] - x0) * k, rowY(depth[i]),
				       anc ? plotW : fw[i] * k, classOf(i, anc));
		}
		for (j = list.length; j < used; j++)
			frames.removeChild(pool[j].g);
		used = list.length;
	}

	/* After a search: only the classes change. */
	function restyle() {
		var nanc = depth[cur], s, cls;

		for (var j = 0; j < used; j++) {
			s = pool[j];
			cls = classOf(s.fi, j < nanc);
			if (cls !== s.cls)
				s.g.setAttribute('class', (s.cls = cls));
		}
	}

	/* --- tooltip and status line ---------------------------------------------------------- */

	function makeTip() {
		tip = doc.createElementNS(SVG_NS, 'g');
		tip.setAttribute('class', 'tip');
		tip.setAttribute('visibility', 'hidden');
		tipRect = doc.createElementNS(SVG_NS, 'rect');
		tip.appendChild(tipRect);
		svg.appendChild(tip);
	}

	function inZoom(i) {
		return i >= cur && i < end[cur];
	}

	function kindOf(i) {
		return KINDS[D.kinds.charCodeAt(name[i]) - 48];
	}

	/* A long name over up to three lines. */
	function nameLines(s, out) {
		var per = Math.floor((L.width * 0.55) / charW), part;

		for (var k = 0; k < s.length && out.length < 3; k += per) {
			part = s.slice(k, k + per);
			if (out.length === 2 && k + per < s.length)
				part = part.slice(0, per - 2) + '..';
			out.push([part, 'name']);
		}
	}

	function diffLines(i, out) {
		var b = fbase[i], d = fw[i] - b, rel;

		rel = b ? ' (' + (d >= 0 ? '+' : '') + ((100 * d) / b).toFixed(2) + '%)' : ' (new)';
		out.push(['base: ' + fmt(b) + ' (' + pct(b, D.baseTotal) + ' of base total)', '']);
		out.push(['delta: ' + (d >= 0 ? '+' : '-') + fmt(Math.abs(d)) + rel,
			  d > 0 ? 'up' : d < 0 ? 'down' : '']);
	}

	/* Tooltip lines of frame i: [text, class]. */
	function describe(i) {
		var out = [], line = fmt(fw[i]) + ' (' + pct(fw[i], total) + ' of total';

		nameLines(names[name[i]], out);
		if (D.files && D.files[name[i]])
			nameLines(D.files[name[i]], out);
		if (cur && i !== cur && inZoom(i))
			line += ', ' + pct(fw[i], fw[cur]) + ' of zoomed';
		out.push([line + ')', '']);
		out.push(['self: ' + fmt(fself[i]) + ' (' + pct(fself[i], total) + ')', '']);
		if (fbase)
			diffLines(i, out);
		if (gheld && gheld[i] + gfree[i])
			out.push(['GIL held in ' + pct(gheld[i], gheld[i] + gfree[i]) + ' of its ' +
				  fmt(gheld[i] + gfree[i]) + ' of Python threads', '']);
		out.push([i ? kindOf(i) + ' frame, depth ' + depth[i] : 'all samples', 'dim']);
		return out;
	}

	var pt = svg.createSVGPoint ? svg.createSVGPoint() : null;

	/* Client to SVG coordinates; the matrix is cached, reading it forces a layout. */
	function toSvg(e) {
		var m;

		if (!inverse && pt && svg.getScreenCTM) {
			m = svg.getScreenCTM();
			inverse = m ? m.inverse() : null;
		}
		if (!inverse)
			return { x: e.clientX, y: e.clientY };
		pt.x = e.clientX;
		pt.y = e.clientY;
		return pt.matrixTransform(inverse);
	}

	function forgetMatrix() {
		inverse = null;
	}

	/* Fills the tooltip for frame i, laid out from (0, 0); returns its size. */
	function fillTip(i) {
		var lines = describe(i), lh = L.fontPx + 4, w = 0, t, j, bold;

		for (j = 0; j < lines.length; j++) {
			t = tipLines[j];
			if (!t) {
				t = tipLines[j] = doc.createElementNS(SVG_NS, 'text');
				t.setAttribute('x', 8);
				t.setAttribute('y', 1 + (j + 1) * lh);
				tip.appendChild(t);
			}
			t.textContent = lines[j][0];
			t.setAttribute('class', lines[j][1]);
			t.setAttribute('visibility', 'inherit');
			bold = lines[j][1] === 'name' ? 1.1 : 1;
			w = Math.max(w, lines[j][0].length * charW * bold);
		}
		for (; j < tipLines.length; j++)
			tipLines[j].setAttribute('visibility', 'hidden');
		tipW = w + 16;
		tipH = lines.length * lh + 10;
		tipRect.setAttribute('width', tipW);
		tipRect.setAttribute('height', tipH);
	}

	/* Moving over the same frame only moves the tooltip. */
	function showTip(i, e) {
		var p = toSvg(e), x = p.x + 14, y = p.y + 18;

		if (i !== tipFrame) {
			fillTip(i);
			tipFrame = i;
		}
		if (x + tipW > L.width - 4)
			x = Math.max(4, p.x - tipW - 10);
		if (y + tipH > height - 4)
			y = Math.max(4, p.y - tipH - 10);
		tip.setAttribute('transform', 'translate(' + x.toFixed(1) + ',' + y.toFixed(1) + ')');
		tip.setAttribute('visibility', 'visible');
	}

	function hideTip() {
		tipFrame = -1; /* the zoom or the search may change its text */
		if (tip)
			tip.setAttribute('visibility', 'hidden');
	}

	function setStatus(i) {
		var s, max = Math.floor((plotW * 0.62) / charW);

		if (i < 0) {
			statusEl.textContent = ' ';
			return;
		}
		s = names[name[i]] + ' \u2014 ' + fmt(fw[i]) + ' (' + pct(fw[i], total) + ')';
		if (fbase)
			s += ', base ' + fmt(fbase[i]);
		if (gheld && gheld[i] + gfree[i])
			s += ', GIL held ' + pct(gheld[i], gheld[i] + gfree[i]);
		statusEl.textContent = s.length > max ? s.slice(0, max - 2) + '..' : s;
	}

	/* --- zoom and search ------------------------------------------------------------------ */

	/*
	 * Zoom, search, orientation and colours live in the URL's fragment of a standalone SVG.
	 * Inlined into a page, the fragment is the page's (#flamegraph): left alone.
	 */
	var ownUrl = svg === doc.documentElement;

	function saveState() {
		var h = [], url;

		if (!ownUrl)
			return;
		if (vcur !== v0)
			h.push('v=' + encodeURIComponent(views[vcur].name));
		if (cur)
			h.push('z=' + cur);
		if (query)
			h.push('s=' + encodeURIComponent(query));
		if (D.inverted !== inverted0)
			h.push('i=' + (D.inverted ? 1 : 0));
		if (gheld && gilMode !== !!D.gilColors)
			h.push('g=' + (gilMode ? 1 : 0));
		url = h.length ? '#' + h.join('&') : location.pathname + location.search;

		try {
			history.replaceState(null, '', url);
		} catch (err) {
			/* file:// in some browsers, or no history: not important */
		}
	}

	function loadState() {
		var h = (ownUrl && location.hash || '').replace(/^#/, '').split('&'), kv, z = 0, k;

		for (var j = 0; j < h.length; j++) {
			kv = h[j].split('=');
			try {
				if (kv[0] === 'z') {
					z = parseInt(kv[1], 10);
				} else if (kv[0] === 'v') {
					for (k = 0; k < views.length; k++) {
						if (views[k].name === decodeURIComponent(kv[1] || ''))
							use(k);
					}
				} else if (kv[0] === 's') {
					query = decodeURIComponent(kv[1] || '');
				} else if (kv[0] === 'i') {
					D.inverted = kv[1] === '1' ? 1 : 0;
				} else if (kv[0] === 'g' && gheld) {
					gilMode = kv[1] === '1';
				}
			} catch (err) {
				query = '';
			}
		}
		cur = z > 0 && z < n ? z : 0; /* a frame of the view, whichever came first */
	}

	/* Root at the bottom (a flame graph) or at the top (an icicle graph). */
	function flip() {
		D.inverted = D.inverted ? 0 : 1;
		hideTip();
		render();
		showModes();
		scrollToRoot();
		saveState();
	}

	/* Colours by frame kind, or by the share of Python samples that held the GIL. */
	function toggleGil() {
		if (!gheld)
			return;
		gilMode = !gilMode;
		hideTip();
		render();
		showModes();
		saveState();
	}

	/*
	 * The frame of this view that stands for a frame of the one before, given that frame's
	 * names up to the root (path, innermost first): the innermost of those names this view
	 * has, where its callers share most names with the path (views drop frames, never
	 * reorder them), the widest of equals; the root when the view has none of them.
	 */
	function findFrame(path) {
		var want = new Uint8Array(names.length), best = -1, bestScore = -1, lvl, i, a, sc;

		for (i = 0; i < path.length; i++)
			want[path[i]] = 1;
		for (lvl = 0; lvl < path.length && best < 0; lvl++) {
			for (i = 1; i < n; i++) {
				if (name[i] !== path[lvl])
					continue;
				for (sc = 0, a = parent[i]; a > 0; a = parent[a])
					sc += want[name[a]];
				if (sc > bestScore || (sc === bestScore && fw[i] > fw[best])) {
					best = i;
					bestScore = sc;
				}
			}
		}
		return best > 0 ? best : 0;
	}

	/* Python frames and the native leaf, every frame, or native frames only. */
	function setView(k) {
		var path = [], i;

		if (k === vcur || !views[k])
			return;
		for (i = cur; i > 0; i = parent[i])
			path.push(name[i]);
		use(k);
		showModes();
		zoom(findFrame(path));
		scrollToRoot();
	}

	function showModes() {
		var lk = doc.getElementById('fg-legend-kind'), lg = doc.getElementById('fg-legend-gil');
		var vs = viewsEl ? viewsEl.querySelectorAll('[data-view]') : [];

		for (var k = 0; k < vs.length; k++)
			vs[k].setAttribute('class', 'ctl small' + (+vs[k].getAttribute('data-view') ===
							    vcur ? ' on' : ''));
		if (flipEl)
			flipEl.textContent = D.inverted ? 'Root at bottom' : 'Root at top';
		if (gilEl)
			gilEl.textContent = gilMode ? 'Colour by kind' : 'Colour by GIL';
		if (lk)
			lk.setAttribute('display', gilMode ? 'none' : 'inline');
		if (lg)
			lg.setAttribute('display', gilMode ? 'inline' : 'none');
	}

	function zoom(i) {
		cur = i;
		hideTip();
		render();
		resetEl.setAttribute('visibility', cur ? 'visible' : 'hidden');
		updateMatched();
		saveState();
	}

	/* Weight of the matching frames in [from, to), each matching subtree once. */
	function matchedIn(from, to) {
		var sum = 0, i = from;

		while (i < to) {
			if (i && match[name[i]]) {
				sum += fw[i];
				i = end[i];
			} else {
				i++;
			}
		}
		return sum;
	}

	function updateMatched() {
		var all, z, i, txt;

		if (!match) {
			matchedEl.textContent = ' ';
			return;
		}
		all = matchedIn(0, n);
		txt = 'Matched: ' + pct(all, total) + ' (' + fmt(all) + ')';
		if (cur) {
			z = -1;
			for (i = parent[cur]; i > 0; i = parent[i]) {
				if (match[name[i]])
					z = fw[cur];
			}
			if (z < 0)
				z = matchedIn(cur, end[cur]);
			txt += ', ' + pct(z, fw[cur]) + ' of zoomed';
		}
		matchedEl.textContent = txt;
	}

	function compile(q) {
		var flags = /[A-Z]/.test(q) ? '' : 'i'; /* smart case */

		try {
			return new RegExp(q, flags);
		} catch (err) {
			return new RegExp(q.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), flags);
		}
	}

	function setSearch(q) {
		var re, j;

		query = q;
		if (input && input.value !== q)
			input.value = q;
		if (!q) {
			match = null;
		} else {
			re = compile(q);
			match = new Uint8Array(names.length);
			for (j = 0; j < names.length; j++)
				match[j] = re.test(names[j]) ? 1 : 0;
		}
		frames.setAttribute('class', match ? 'frames searching' : 'frames');
		restyle();
		updateMatched();
		saveState();
	}

	function focusSearch() {
		var q;

		if (input && input.getBoundingClientRect().width > 0) {
			input.focus();
			input.select();
			return;
		}
		q = window.prompt('Search frames (regex or text):', query);
		if (q !== null)
			setSearch(q);
	}

	function onKey(e) {
		var k = e.key;

		if ((e.ctrlKey || e.metaKey) && !e.altKey && (k === 'f' || k === 'F')) {
			e.preventDefault();
			focusSearch();
		} else if (k === 'Escape') {
			clearTimeout(searchTimer);
			if (query || (input && input.value))
				setSearch('');
			else if (cur)
				zoom(0);
			if (input && doc.activeElement === input)
				input.blur();
		} else if (k === 'Enter' && e.target === input) {
			clearTimeout(searchTimer);
			setSearch(input.value);
		} else if (k === '/' && e.target !== input && !e.ctrlKey && !e.metaKey) {
			e.preventDefault();
			focusSearch();
		} else if (e.target !== input && !e.ctrlKey && !e.metaKey && !e.altKey) {
			if (k === 'g' || k === 'G')
				toggleGil();
			else if ((k === 'v' || k === 'V') && views.length > 1)
				setView((vcur + 1) % views.length);
			else if (k === 'i' || k === 'I')
				flip();
		}
	}

	/* --- wiring --------------------------------------------------------------------------- */

	function frameAt(e) {
		for (var g = e.target; g && g !== frames; g = g.parentNode) {
			if (g.fgSlot)
				return g.fgSlot.fi;
		}
		return -1;
	}

	function wire() {
		frames.addEventListener('mousemove', function (e) {
			var i = frameAt(e);

			if (i < 0)
				return;
			showTip(i, e);
			setStatus(i);
		});
		frames.addEventListener('mouseleave', function () {
			hideTip();
			setStatus(-1);
		});
		frames.addEventListener('click', function (e) {
			var i = frameAt(e);

			if (i >= 0)
				zoom(i === cur ? (parent[i] > 0 ? parent[i] : 0) : i);
		});
		resetEl.addEventListener('click', function () {
			zoom(0);
		});
		searchBtn.addEventListener('click', focusSearch);
		if (flipEl)
			flipEl.addEventListener('click', flip);
		if (gilEl)
			gilEl.addEventListener('click', toggleGil);
		if (viewsEl) {
			viewsEl.addEventListener('click', function (e) {
				var v = e.target.getAttribute && e.target.getAttribute('data-view');

				if (v !== null && v !== undefined)
					setView(+v);
			});
		}
		if (input) {
			input.addEventListener('input', function () {
				clearTimeout(searchTimer);
				searchTimer = setTimeout(function () {
					setSearch(input.value);
				}, 150);
			});
		}
		doc.addEventListener('keydown', onKey);
		window.addEventListener('scroll', schedulePlace, true);
		window.addEventListener('resize', schedulePlace);
	}

	function init() {
		var controls = doc.getElementById('fg-controls');

		for (var i = 0; i < names.length; i++)
			colors.push('#' + D.colors.substr(i * 6, 6));
		use(vcur);
		if (controls)
			controls.removeAttribute('display');
		measureFont(frames);
		frames.textContent = ''; /* the static picture: redrawn from the model */
		makeTip();
		loadState();
		wire();
		if (query)
			setSearch(query);
		showModes();
		zoom(cur);
		scrollToRoot();
	}

	init();
})();

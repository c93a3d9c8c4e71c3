// SPDX-License-Identifier: MIT
/* Python users' view: frame names, --view python|mixed|native, Python lines tables. */
#include "test_util.h"

#include "analysis/hot.h"
#include "analysis/pylines.h"
#include "analysis/stacks.h"
#include "analysis/view.h"
#include "model/offcpu_event.h"
#include "output/folded.h"
#include "output/html.h"
#include "output/report.h"
#include "output/report_mem.h"
#include "output/report_python.h"
#include "output/svg.h"
#include "tui/top_model.h"
#include "util/sink.h"

/* A Python frame as the recorder writes it: one location per (function, file, line). */
static uint32_t py_loc(struct profile *p, const char *func, const char *file, uint32_t line)
{
	int64_t obj = profile__object(p, OBJ_PYTHON, "[python]", "", 0);
	int64_t loc;
	struct location *l;
	struct frame *f;

	assert_true(obj > 0);
	loc = profile__location(p, obj, (uint64_t)profile__intern(p, file) << 40 |
						(uint64_t)profile__intern(p, func) << 20 | line);
	assert_true(loc > 0);
	l = &p->locations.v[loc];
	if (l->frame_n)
		return loc;
	l->frame_first = p->frames.n;
	l->frame_n = 1;
	f = vec_push(p->frames);
	f->name = profile__intern(p, func);
	f->module = profile__intern(p, "python");
	f->file = profile__intern(p, file);
	f->line = line;
	f->kind = FRAME_PYTHON;
	return loc;
}

static uint32_t kernel_loc(struct profile *p, const char *func, uint64_t addr)
{
	uint32_t loc = test_loc(p, "[kernel.kallsyms]", func, NULL, addr);

	p->frames.v[p->locations.v[loc].frame_first].kind = FRAME_KERNEL;
	return loc;
}

/*
 * python3: _start -> Py_RunMain -> _PyEval (replaced) <module> (t.py:30) -> main (t.py:26)
 *   -> step (t.py:10) -> PyObject_Call -> sgemm_          50 samples
 *   -> step (t.py:11) -> PyObject_Call -> sgemm_          10 samples (another line)
 *   -> step (t.py:12)                                      20 samples (a Python leaf)
 *   -> wait (t.py:40) -> PyThread_acquire -> futex_wait (kernel) 15 samples
 * a native thread: start_thread -> worker -> spin          5 samples
 */
static struct profile *make(void)
{
	struct profile *p = profile__new();
	const char *py = "/usr/bin/python3.11", *t = "/src/t.py";
	uint32_t st = test_loc(p, py, "_start", NULL, 1),
		 run = test_loc(p, py, "Py_RunMain", NULL, 2),
		 call = test_loc(p, py, "PyObject_Call", NULL, 3),
		 acq = test_loc(p, py, "PyThread_acquire", NULL, 4),
		 gemm = test_loc(p, "/usr/lib/libblas.so.3", "sgemm_", NULL, 5),
		 thr = test_loc(p, "/usr/lib/libc.so.6", "start_thread", NULL, 6),
		 wrk = test_loc(p, "/usr/lib/libx.so", "worker", NULL, 7),
		 spin = test_loc(p, "/usr/lib/libx.so", "spin", NULL, 8),
		 fx = kernel_loc(p, "futex_wait", 9), mod = py_loc(p, "<module>", t, 30),
		 mn = py_loc(p, "main", t, 26), s10 = py_loc(p, "Net.step", t, 10),
		 s11 = py_loc(p, "Net.step", t, 11), s12 = py_loc(p, "Net.step", t, 12),
		 w = py_loc(p, "wait", t, 40);

	test_samples(p, 10, 10, "python3", 50, (uint32_t[]){ st, run, mod, mn, s10, call, gemm },
		     7);
	test_samples(p, 10, 10, "python3", 10, (uint32_t[]){ st, run, mod, mn, s11, call, gemm },
		     7);
	test_samples(p, 10, 10, "python3", 20, (uint32_t[]){ st, run, mod, mn, s12 }, 5);
	test_samples(p, 10, 10, "python3", 15, (uint32_t[]){ st, run, mod, mn, w, acq, fx }, 7);
	test_samples(p, 10, 11, "worker", 5, (uint32_t[]){ thr, wrk, spin }, 3);
	return p;
}

static char *folded(struct profile *p, bool lines)
{
	struct folded_opts o = { .lines = lines };
	struct sink *s = sink_mem();
	char *out;

	assert_int_equal(folded_write(s, p, &o), 0);
	out = strdup(sink_mem_data(s, NULL));
	sink_close(s);
	return out;
}

/*
 * One view rule case: a stack's frame classes, root first (S special, N native, P Python,
 * M import machinery, E the interpreter's loop), and which frames the view keeps (1/0).
 */
struct view_case {
	const char *why;
	enum stack_view view;
	const char *cls, *keep;
};

static const struct view_case view_cases[] = {
    { "python: the marks, the Python frames, the innermost native frame", VIEW_PYTHON,
      "SNPNPNNS", "10101011" },
    { "a Python leaf: no native frame is the leaf", VIEW_PYTHON, "SNPNP", "10101" },
    { "native: the Python frames go", VIEW_NATIVE, "SNPNPNNS", "11010111" },
    { "mixed keeps all", VIEW_MIXED, "SNPNPNNS", "11111111" },
    /* an import chain: <module>, machinery, <module>, machinery, native leaf */
    { "both modules, the innermost machinery frame (the time is in the import), the leaf",
      VIEW_PYTHON, "PMMPMNMN", "10010011" },
    { "a module's own code below the machinery: every machinery frame goes", VIEW_PYTHON,
      "PMMP", "1001" },
    { "native drops modules and machinery", VIEW_NATIVE, "PMMPMNMN", "00000101" },
    { "mixed keeps the machinery", VIEW_MIXED, "PMMPMNMN", "11111111" },
    /* the sample in the interpreter's loop */
    { "the Python line is the leaf, the loop goes", VIEW_PYTHON, "SNEPEPE", "1001010" },
    { "a native leaf below the loop stays", VIEW_PYTHON, "PEN", "101" },
    { "no Python frame to carry the time: the loop's leaf stays", VIEW_PYTHON, "SNE", "101" },
    { "native keeps the loop", VIEW_NATIVE, "SNEPEPE", "1110101" },
};

static uint8_t view_class(char c)
{
	switch (c) {
	case 'S':
		return VC_SPECIAL;
	case 'N':
		return VC_NATIVE;
	case 'P':
		return VC_PYTHON;
	case 'M':
		return VC_PY_IMPORT;
	case 'E':
		return VC_INTERP;
	}
	fail_msg("unknown class '%c'", c);
	return 0;
}

static void test_view_select_rule(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(view_cases) / sizeof(view_cases[0]); i++) {
		const struct view_case *c = &view_cases[i];
		size_t n = strlen(c->cls), want = 0;
		uint8_t cls[16];
		bool keep[16];
		char got[17];

		assert_int_equal(strlen(c->keep), n);
		for (size_t j = 0; j < n; j++) {
			cls[j] = view_class(c->cls[j]);
			want += c->keep[j] == '1';
		}
		size_t kept = view_select(c->view, cls, n, keep);

		if (kept != want)
			fail_msg("%s (%s): %zu frames kept, want %zu", c->why, c->cls, kept, want);
		for (size_t j = 0; j < n; j++)
			got[j] = keep[j] ? '1' : '0';
		got[n] = '\0';
		if (strcmp(got, c->keep))
			fail_msg("%s (%s): kept %s, want %s", c->why, c->cls, got, c->keep);
	}
	assert_int_equal(view_parse("python"), VIEW_PYTHON);
	assert_int_equal(view_parse("Python"), -EINVAL);
}

static void test_python_frame_names(void **state)
{
	struct profile *p = make();
	char *out = folded(p, false), *with_lines;

	(void)state;
	/* The line of the sample, the file's base name; each line its own frame. */
	assert_non_null(strstr(out, "python3;_start;Py_RunMain;<module> (t.py:30);main (t.py:26);"
				    "Net.step (t.py:10);PyObject_Call;sgemm_ 50\n"));
	assert_non_null(strstr(out, ";Net.step (t.py:11);PyObject_Call;sgemm_ 10\n"));
	assert_non_null(strstr(out, ";main (t.py:26);Net.step (t.py:12) 20\n"));
	/* --lines does not name the line twice */
	with_lines = folded(p, true);
	assert_non_null(strstr(with_lines, ";main (t.py:26);Net.step (t.py:12) 20\n"));
	assert_null(strstr(with_lines, "(t.py:12) (t.py:12)"));
	free(out);
	free(with_lines);
	profile__free(p);
}

/* The SVG names Python frames by line, keeps them Python, and its tooltip has the full path. */
static void test_svg_python_frames(void **state)
{
	struct profile *p = make();
	struct svg_opts o = { .fg = { .title = "t" } };
	struct sink *s = sink_mem();
	const char *out;

	(void)state;
	assert_int_equal(flamegraph_svg_write(s, p, &o), 0);
	out = sink_mem_data(s, NULL);
	assert_non_null(strstr(out, "\"Net.step (t.py:10)\""));
	assert_non_null(strstr(out, "\"files\":["));
	assert_non_null(strstr(out, "\"/src/t.py\""));
	assert_non_null(strstr(out, ">Python<")); /* the legend */
	sink_close(s);
	profile__free(p);
}

static void test_views(void **state)
{
	struct profile *p = make();
	size_t nstacks = p->stacks.n;
	char *out;

	(void)state;
	assert_int_equal(profile_apply_view(p, VIEW_MIXED), 0);
	assert_int_equal(p->stacks.n, nstacks); /* mixed: nothing changes */
	assert_int_equal(profile_apply_view(p, VIEW_PYTHON), 0);
	out = folded(p, false);
	assert_non_null(strstr(out, "python3;<module> (t.py:30);main (t.py:26);Net.step (t.py:10);"
				    "sgemm_ 50\n"));
	assert_non_null(
	    strstr(out, "python3;<module> (t.py:30);main (t.py:26);Net.step (t.py:12) 20\n"));
	assert_non_null(strstr(out, "python3;<module> (t.py:30);main (t.py:26);wait (t.py:40);"
				    "futex_wait 15\n"));
	/* a thread with no Python frame keeps its leaf */
	assert_non_null(strstr(out, "worker;spin 5\n"));
	assert_null(strstr(out, "Py_RunMain"));
	assert_null(strstr(out, "PyObject_Call"));
	free(out);
	profile__free(p);

	p = make();
	assert_int_equal(profile_apply_view(p, VIEW_NATIVE), 0);
	out = folded(p, false);
	assert_non_null(strstr(out, "python3;_start;Py_RunMain;PyObject_Call;sgemm_ 60\n"));
	assert_non_null(strstr(out, "python3;_start;Py_RunMain 20\n"));
	assert_non_null(strstr(out, "worker;start_thread;worker;spin 5\n"));
	assert_null(strstr(out, "t.py"));
	free(out);
	profile__free(p);
}

/* Reading the stacks in a view (collapse_stacks_view) gives what rewriting them does. */
static void test_views_without_rewrite(void **state)
{
	(void)state;
	for (int v = VIEW_MIXED; v <= VIEW_NATIVE; v++) {
		struct profile *p = make(), *q = make();
		struct folded_opts o = { .view = v };
		uint32_t held = (uint32_t)profile__special(p, PY_GIL_HELD);
		struct sink *s = sink_mem();
		size_t nstacks;
		char *want;

		/* and a Python sample with a [GIL] mark at its root, which is no frame */
		test_samples(p, 10, 12, "python3", 4,
			     (uint32_t[]){ held, p->stacks.v[p->samples.v[0].stack].loc }, 2);
		held = (uint32_t)profile__special(q, PY_GIL_HELD);
		test_samples(q, 10, 12, "python3", 4,
			     (uint32_t[]){ held, q->stacks.v[q->samples.v[0].stack].loc }, 2);
		nstacks = p->stacks.n;
		assert_int_equal(folded_write(s, p, &o), 0);
		assert_int_equal(p->stacks.n, nstacks); /* p is as it was */
		assert_int_equal(profile_apply_view(q, v), 0);
		want = folded(q, false);
		assert_string_equal(sink_mem_data(s, NULL), want);
		free(want);
		sink_close(s);
		profile__free(p);
		profile__free(q);
	}
}

/*
 * The names that the frames of one view of an SVG use, each between ';' (the test's names
 * need no JSON unescaping): the open view's frames are at the top level, the others' follow
 * their name in "views".
 */
static char *svg_view_names(const char *svg, const char *view)
{
	const char *names = strstr(svg, "\"names\":["), *at = strstr(svg, "\"nf\":"), *q;
	char key[64], *out = calloc(1, 65536), *end;
	const char *list[64];
	size_t nn = 0;
	long nf, i = 0, v;

	assert_non_null(names);
	assert_non_null(out);
	for (q = names + 9; *q == '"' && nn < 64;) {
		list[nn++] = q + 1;
		q = strchr(q + 1, '"') + 1;
		q += *q == ',';
	}
	snprintf(key, sizeof(key), "{\"name\":\"%s\",\"total\"", view);
	if (strstr(svg, key))
		at = strstr(strstr(svg, key), "\"nf\":");
	assert_non_null(at);
	nf = strtol(at + 5, &end, 10);
	at = strstr(at, "\"frames\":[") + 10;
	for (; *at && *at != ']'; i++) {
		v = strtol(at, &end, 10);
		at = end + (*end == ',') + (end[1] == '\n');
		while (*at == '\n' || *at == ',')
			at++;
		if (i % nf == 1) {
			assert_true(v >= 0 && (size_t)v < nn);
			strcat(out, ";");
			strncat(out, list[v], strchr(list[v], '"') - list[v]);
		}
	}
	strcat(out, ";");
	return out;
}

/*
 * The SVG of a profile with Python frames carries the python, mixed and native views and
 * opens on the one asked for; without Python frames it carries one view and no control.
 */
static void test_svg_views(void **state)
{
	struct profile *p = make();
	struct svg_opts o = { .fg = { .title = "t" }, .all_views = true };
	struct sink *s = sink_mem();
	const char *out;
	char *py, *mixed, *native;

	(void)state;
	assert_int_equal(flamegraph_svg_write(s, p, &o), 0);
	out = sink_mem_data(s, NULL);
	assert_non_null(strstr(out, "\"view\":\"mixed\""));
	assert_non_null(strstr(out, "id=\"fg-views\""));
	py = svg_view_names(out, "python");
	mixed = svg_view_names(out, "mixed");
	native = svg_view_names(out, "native");
	/* python: Python frames and the native leaf, no interpreter frame */
	assert_non_null(strstr(py, ";Net.step (t.py:10);sgemm_;"));
	assert_non_null(strstr(py, ";wait (t.py:40);futex_wait;"));
	assert_non_null(strstr(py, ";worker;spin;")); /* a native thread: its leaf */
	assert_null(strstr(py, ";Py_RunMain;"));
	assert_null(strstr(py, ";PyObject_Call;"));
	assert_null(strstr(py, ";_start;"));
	/* native: no Python frame */
	assert_non_null(strstr(native, ";Py_RunMain;PyObject_Call;sgemm_;"));
	assert_null(strstr(native, "t.py"));
	/* mixed: both */
	assert_non_null(strstr(mixed, ";Py_RunMain;"));
	assert_non_null(strstr(mixed, ";Net.step (t.py:10);PyObject_Call;sgemm_;"));
	free(py);
	free(mixed);
	free(native);
	sink_close(s);

	/* opened on python: the static picture and the first frames are the python view's */
	s = sink_mem();
	o.stacks.view = VIEW_PYTHON;
	assert_int_equal(flamegraph_svg_write(s, p, &o), 0);
	out = sink_mem_data(s, NULL);
	assert_non_null(strstr(out, "\"view\":\"python\""));
	assert_non_null(strstr(out, "data-view=\"0\">python<"));
	py = strstr(out, "id=\"fg-data\"");
	assert_non_null(py);
	assert_null(strstr(out, ">Py_RunMain")); /* a name of the data, not of the picture */
	assert_true(strstr(out, "\"Py_RunMain\"") > py);
	assert_true(strstr(out, ">Net.step (t.py:10)") < py);
	py = svg_view_names(out, "python");
	native = svg_view_names(out, "native");
	assert_null(strstr(py, ";Py_RunMain;"));
	assert_null(strstr(native, "t.py"));
	free(py);
	free(native);
	sink_close(s);
	profile__free(p);
}

/* Without Python frames: the one view asked for, as before, no control. */
static void test_svg_views_native_only(void **state)
{
	struct profile *p = profile__new();
	uint32_t a = test_loc(p, "/usr/lib/libx.so", "worker", NULL, 1),
		 b = test_loc(p, "/usr/lib/libx.so", "spin", NULL, 2);
	struct svg_opts o = { .fg = { .title = "t" }, .all_views = true };
	struct sink *s = sink_mem(), *one = sink_mem();

	(void)state;
	test_samples(p, 1, 1, "w", 5, (uint32_t[]){ a, b }, 2);
	assert_int_equal(flamegraph_svg_write(s, p, &o), 0);
	assert_null(strstr(sink_mem_data(s, NULL), "\"views\""));
	assert_null(strstr(sink_mem_data(s, NULL), "id=\"fg-views\""));
	o.all_views = false;
	assert_int_equal(flamegraph_svg_write(one, p, &o), 0);
	assert_string_equal(sink_mem_data(s, NULL), sink_mem_data(one, NULL));
	sink_close(s);
	sink_close(one);
	profile__free(p);
}

static const struct top_func *top_find(const struct top_model *m, const struct profile *p,
				       const char *name)
{
	for (size_t i = 0; i < m->funcs.n; i++)
		if (!strcmp(profile__str(p, m->funcs.v[i].name), name))
			return &m->funcs.v[i];
	return NULL;
}

/* top counts the frames of the view it was given. */
static void test_top_views(void **state)
{
	struct profile *p = make();
	struct top_model m;

	(void)state;
	assert_int_equal(top_model__init(&m), 0);
	m.view = VIEW_PYTHON;
	assert_int_equal(top_model__update(&m, p, 1.0), 0);
	assert_true(top_find(&m, p, "sgemm_")->self == 60);
	assert_true(top_find(&m, p, "Net.step")->total == 80);
	assert_true(top_find(&m, p, "spin")->self == 5);
	assert_true(!top_find(&m, p, "Py_RunMain") || !top_find(&m, p, "Py_RunMain")->total);
	assert_true(!top_find(&m, p, "PyObject_Call") || !top_find(&m, p, "PyObject_Call")->total);
	top_model__free(&m);
	profile__free(p);

	p = make();
	assert_int_equal(top_model__init(&m), 0);
	m.view = VIEW_NATIVE;
	assert_int_equal(top_model__update(&m, p, 1.0), 0);
	assert_true(top_find(&m, p, "PyObject_Call")->total == 60);
	assert_true(top_find(&m, p, "Py_RunMain")->self == 20); /* a Python leaf: its caller */
	assert_true(!top_find(&m, p, "Net.step") || !top_find(&m, p, "Net.step")->total);
	top_model__free(&m);
	profile__free(p);
}

/* Two files' `forward` are two rows of the function table, each naming its file. */
static void test_hot_python_by_file(void **state)
{
	struct profile *p = profile__new();
	uint32_t a = py_loc(p, "forward", "/m/a.py", 3), b = py_loc(p, "forward", "/m/b.py", 3),
		 a2 = py_loc(p, "forward", "/m/a.py", 4);
	struct hot_opts o = { 0 };
	struct hot_result r;
	uint64_t self[2] = { 0 };

	(void)state;
	test_samples(p, 1, 1, "py", 7, (uint32_t[]){ a }, 1);
	test_samples(p, 1, 1, "py", 2, (uint32_t[]){ a2 }, 1);
	test_samples(p, 1, 1, "py", 3, (uint32_t[]){ b }, 1);
	assert_int_equal(hot_functions(p, &o, &r), 0);
	assert_int_equal(r.n, 2);
	for (size_t i = 0; i < r.n; i++) {
		const char *file = profile__str(p, r.funcs[i].file);

		self[strcmp(file, "/m/a.py") ? 1 : 0] = r.funcs[i].self;
	}
	assert_int_equal(self[0], 9);
	assert_int_equal(self[1], 3);
	hot_result__free(&r);
	profile__free(p);
}

static const struct py_line *row(const struct profile *p, const struct py_lines *l,
				 enum py_table t, const char *func, uint32_t line)
{
	for (size_t i = 0; i < l->n[t]; i++)
		if (!strcmp(profile__str(p, l->v[t][i].function), func) && l->v[t][i].line == line)
			return &l->v[t][i];
	return NULL;
}

static void test_python_lines(void **state)
{
	struct profile *p = make();
	struct mem_group alloc[2] = { 0 };
	struct mem_result mem = { .present = true, .allocated = alloc, .nallocated = 2 };
	struct event io = { .ts = 2000000, .pid = 10, .tid = 10, .kind = EVK_IO, .a = 4096 };
	struct event off = { .ts = 3000000, .dur = 7000000, .pid = 10, .tid = 10,
			     .kind = EVK_OFFCPU, .flags = OFFEV_SLEEP };
	const struct py_line *r;
	struct py_lines l;
	struct sink *s;
	const char *out;

	(void)state;
	/* memory: 3000 bytes under step (t.py:10) -> sgemm_, 1000 under the native thread */
	alloc[0] = (struct mem_group){ .stack = p->samples.v[0].stack, .bytes = 3000, .count = 3 };
	alloc[1] = (struct mem_group){ .stack = p->samples.v[99].stack, .bytes = 1000, .count = 1 };
	io.stack = p->samples.v[85].stack; /* wait (t.py:40) -> futex_wait */
	assert_int_equal(profile__add_event(p, &io), 0);
	off.stack = p->samples.v[60].stack; /* Net.step (t.py:12), a Python leaf */
	assert_int_equal(profile__add_event(p, &off), 0);
	assert_int_equal(py_lines_analyze(p, NULL, &mem, &l), 0);
	/* CPU: by the innermost Python frame and the sample's line, the native leaf named */
	assert_int_equal(l.total[PYT_CPU], 100 * 1000000ULL);
	assert_int_equal(l.n[PYT_CPU], 4);
	r = &l.v[PYT_CPU][0];
	assert_string_equal(profile__str(p, r->function), "Net.step");
	assert_int_equal(r->line, 10);
	assert_int_equal(r->value, 50 * 1000000ULL);
	assert_true(r->share > 49.99 && r->share < 50.01);
	assert_string_equal(py_line_leaf(p, PYT_CPU, r), "sgemm_");
	r = row(p, &l, PYT_CPU, "Net.step", 12);
	assert_non_null(r);
	assert_int_equal(r->value, 20 * 1000000ULL);
	assert_string_equal(py_line_leaf(p, PYT_CPU, r), ""); /* its own code */
	assert_string_equal(py_line_leaf(p, PYT_CPU, row(p, &l, PYT_CPU, "wait", 40)),
			    "futex_wait");
	assert_null(row(p, &l, PYT_CPU, "main", 26)); /* never the innermost */
	/* memory: the native thread's bytes count in the total, not in a row */
	assert_int_equal(l.total[PYT_MEMORY], 4000);
	assert_int_equal(l.n[PYT_MEMORY], 1);
	assert_true(l.v[PYT_MEMORY][0].share > 74.99 && l.v[PYT_MEMORY][0].share < 75.01);
	assert_int_equal(l.n[PYT_IO], 1);
	assert_int_equal(l.v[PYT_IO][0].value, 4096);
	assert_int_equal(l.v[PYT_IO][0].line, 40);
	/* off-CPU: the blocked time, its wait kind as the leaf */
	assert_int_equal(l.n[PYT_OFFCPU], 1);
	assert_int_equal(l.v[PYT_OFFCPU][0].value, 7000000);
	assert_int_equal(l.v[PYT_OFFCPU][0].line, 12);
	assert_string_equal(py_line_leaf(p, PYT_OFFCPU, &l.v[PYT_OFFCPU][0]), "sleep");
	assert_int_equal(l.n[PYT_GPU], 0);
	py_lines__free(&l);

	/* the report's JSON: every table, empty ones as [] */
	s = sink_mem();
	assert_int_equal(report_py_lines_json(s, p, NULL, &mem), 0);
	assert_non_null(strstr(sink_mem_data(s, NULL), "\"python_lines\""));
	assert_non_null(strstr(sink_mem_data(s, NULL), "\"function\": \"Net.step\""));
	assert_non_null(strstr(sink_mem_data(s, NULL), "\"gpu\": []"));
	sink_close(s);
	s = sink_mem();
	assert_int_equal(report_py_lines_text(s, p, NULL, &mem, 0), 0);
	assert_non_null(strstr(sink_mem_data(s, NULL), "Net.step (t.py:10)"));
	assert_non_null(strstr(sink_mem_data(s, NULL), "Python lines: memory allocated"));
	assert_null(strstr(sink_mem_data(s, NULL), "Python lines: GPU"));
	sink_close(s);
	/* the off-CPU section: its kinds on one line, the blocking stack with its Python line */
	s = sink_mem();
	assert_int_equal(report_offcpu(s, p, &(struct report_opts){.limit = 30}), 0);
	out = sink_mem_data(s, NULL);
	assert_non_null(strstr(out, "(0.0% with a known waker):  sleep 0.007 s (100.0%)\n"));
	assert_non_null(strstr(out, "sleep     Net.step (t.py:12) <- main (t.py:26)"));
	sink_close(s);
	/* the HTML export has them too */
	s = sink_mem();
	assert_int_equal(html_write(s, p, &(struct html_opts){ .path = "x.data" }), 0);
	out = strstr(sink_mem_data(s, NULL), "<section id=\"python\"><h2>Python lines</h2>");
	assert_non_null(out);
	assert_non_null(strstr(out, "Net.step (t.py:10)"));
	/* its flamegraph names Python frames as the SVG does, not bare */
	out = strstr(sink_mem_data(s, NULL), "<section id=\"flamegraph\">");
	assert_non_null(out);
	{
		const char *end = strstr(out, "</section>"), *at = strstr(out, "Net.step (t.py:10)");

		assert_non_null(end);
		assert_true(at && at < end);
	}
	sink_close(s);
	profile__free(p);
}

/*
 * Rows are the program's own lines: a stack through a library's Python code counts for the
 * innermost line of the program's file above it, the library frame named as "via"; a stack
 * with only library frames counts for its innermost one.
 */
static void test_python_lines_own_code(void **state)
{
	struct profile *p = profile__new();
	const char *py = "/usr/bin/python3.11", *t = "/home/u/train.py",
		   *torch = "/usr/lib/python3/dist-packages/torch/autograd/__init__.py",
		   *thr = "/usr/lib/python3.11/threading.py";
	uint32_t st = test_loc(p, py, "_start", NULL, 1),
		 gemm = test_loc(p, "/usr/lib/libblas.so.3", "sgemm_", NULL, 2),
		 mod = py_loc(p, "<module>", t, 70), step = py_loc(p, "train_step", t, 52),
		 bw = py_loc(p, "backward", torch, 197), imp = py_loc(p, "_find_and_load",
							 "<frozen importlib._bootstrap>", 1178),
		 wait = py_loc(p, "Condition.wait", thr, 320), boot = py_loc(p, "_bootstrap", thr, 995);
	const struct py_line *r;
	struct py_lines l;
	char buf[256];
	struct sink *s;

	(void)state;
	assert_true(py_file_is_library(torch) && py_file_is_library(thr));
	assert_true(py_file_is_library("<frozen importlib._bootstrap>"));
	assert_true(py_file_is_library("/root/.pyenv/versions/3.12.7/lib/python3.12/selectors.py"));
	assert_true(py_file_is_library("/venv/lib64/python3.11/site-packages/numpy/core.py"));
	assert_false(py_file_is_library(t) || py_file_is_library("/srv/lib/pythonic/app.py"));
	assert_false(py_file_is_library("train.py"));
	test_samples(p, 10, 10, "python3", 30, (uint32_t[]){ st, mod, step, bw, gemm }, 5);
	test_samples(p, 10, 10, "python3", 10, (uint32_t[]){ st, mod, step, gemm }, 4);
	test_samples(p, 10, 10, "python3", 20, (uint32_t[]){ st, mod, imp, gemm }, 4);
	test_samples(p, 10, 11, "python3", 5, (uint32_t[]){ st, boot, wait, gemm }, 4);
	assert_int_equal(py_lines_analyze(p, NULL, NULL, &l), 0);
	assert_int_equal(l.n[PYT_CPU], 3);
	r = &l.v[PYT_CPU][0];
	assert_string_equal(profile__str(p, r->function), "train_step");
	assert_int_equal(r->value, 40 * 1000000ULL);
	assert_string_equal(py_line_leaf(p, PYT_CPU, r), "sgemm_");
	assert_int_equal(r->via_value, 30 * 1000000ULL);
	assert_non_null(r->via);
	assert_string_equal(frame_display_name(p, &p->frames.v[r->via - 1], buf, sizeof(buf)),
			    "backward (__init__.py:197)");
	r = row(p, &l, PYT_CPU, "<module>", 70); /* the import: the program's line */
	assert_non_null(r);
	assert_int_equal(r->value, 20 * 1000000ULL);
	r = row(p, &l, PYT_CPU, "Condition.wait", 320); /* only library frames: the innermost */
	assert_non_null(r);
	assert_int_equal(r->via, 0);
	py_lines__free(&l);
	s = sink_mem();
	assert_int_equal(report_py_lines_json(s, p, NULL, NULL), 0);
	assert_non_null(strstr(sink_mem_data(s, NULL), "\"via\": \"backward (__init__.py:197)\""));
	assert_non_null(strstr(sink_mem_data(s, NULL), "\"via\": null"));
	sink_close(s);
	s = sink_mem();
	assert_int_equal(report_py_lines_text(s, p, NULL, NULL, 0), 0);
	assert_non_null(strstr(sink_mem_data(s, NULL),
			       "sgemm_, via backward (__init__.py:197)"));
	sink_close(s);
	profile__free(p);
}

/*
 * Tables keyed by stack: stacks that differ only in frames the line does not show are one row,
 * and a Python frame beyond the first frames is shown in place of the middle ones.
 */
static void test_memory_rows_merged(void **state)
{
	struct profile *p = profile__new();
	const char *so = "/usr/lib/libc10.so";
	uint32_t mod = py_loc(p, "<module>", "/src/train.py", 3),
		 step = py_loc(p, "train_step", "/src/train.py", 12),
		 l1 = test_loc(p, so, "at::empty_cpu", NULL, 1),
		 l2 = test_loc(p, so, "at::empty_generic", NULL, 2),
		 l3 = test_loc(p, so, "at::detail::empty", NULL, 3),
		 l4 = test_loc(p, so, "at::native::relu", NULL, 4),
		 l5 = test_loc(p, so, "at::_ops::relu::call", NULL, 5),
		 l6a = test_loc(p, so, "torch::autograd::a", NULL, 6),
		 l6b = test_loc(p, so, "torch::autograd::b", NULL, 7),
		 leaf = test_loc(p, so, "c10::alloc_cpu", NULL, 8),
		 lone = test_loc(p, "/usr/lib/libx.so", "x_alloc", NULL, 9);
	int64_t a = profile__stack(p, (uint32_t[]){ mod, step, l6a, l5, l4, l3, l2, l1, leaf }, 9),
		b = profile__stack(p, (uint32_t[]){ mod, step, l6b, l5, l4, l3, l2, l1, leaf }, 9),
		c = profile__stack(p, (uint32_t[]){ lone }, 1);
	struct mem_group g[3] = { { .stack = a, .bytes = 3000, .count = 3 },
				  { .stack = b, .bytes = 2000, .count = 2 },
				  { .stack = c, .bytes = 4000, .count = 1 } };
	struct mem_result r = { .present = true, .allocated = g, .nallocated = 3, .by_count = g };
	struct sink *s = sink_mem();
	const char *out, *row;

	(void)state;
	assert_true(a > 0 && b > 0 && c > 0);
	assert_int_equal(profile__set_meta(p, "mem_sample_bytes", "1"), 0);
	assert_int_equal(report_mem_text(s, p, &r, 0), 0);
	out = sink_mem_data(s, NULL);
	row = strstr(out, "Allocated by stack (leaf first)\n");
	assert_non_null(row);
	/* merged: 5,000 bytes in 5 calls, above the 4,000-byte stack; the Python line shown */
	row = strstr(row, "4.88 KiB");
	assert_non_null(row);
	assert_non_null(strstr(row, "c10::alloc_cpu <- at::empty_cpu <- at::empty_generic <- "
				    "at::detail::empty <- ... <- train_step (train.py:12) <- "
				    "<module> (train.py:3)   (2 stacks)\n"));
	assert_true(strstr(row, "3.91 KiB") > row);
	assert_null(strstr(out, "torch::autograd"));
	sink_close(s);
	profile__free(p);
}

/*
 * A one-line stack: a name repeated by consecutive frames is read once, and the Python frame
 * beyond the first frames comes with its Python caller, not the interpreter's frame between.
 */
static void test_shown_frames(void **state)
{
	struct profile *p = profile__new();
	const char *so = "/usr/lib/libtorch.so";
	uint32_t mod = py_loc(p, "<module>", "/src/train.py", 3),
		 step = py_loc(p, "train_step", "/src/train.py", 12),
		 eval = test_loc(p, "/usr/bin/python3.11", "_PyObject_MakeTpCall", NULL, 1),
		 e1 = test_loc(p, so, "at::empty_cpu", NULL, 2),
		 e2 = test_loc(p, so, "at::empty_cpu", NULL, 3),
		 l3 = test_loc(p, so, "at::detail::empty", NULL, 4),
		 l4 = test_loc(p, so, "at::native::relu", NULL, 5),
		 l5 = test_loc(p, so, "at::_ops::relu::call", NULL, 6),
		 l6 = test_loc(p, so, "at::_ops::relu::redispatch", NULL, 7),
		 leaf = test_loc(p, so, "c10::alloc_cpu", NULL, 8);
	int64_t a =
	    profile__stack(p, (uint32_t[]){mod, eval, step, l6, l5, l4, l3, e2, e1, leaf}, 10);
	const struct frame *fr[6];
	char b[6][128];
	size_t gap, n;
	bool more;

	(void)state;
	assert_true(a > 0);
	n = stack_shown_frames(p, a, fr, 6, &gap, &more);
	assert_int_equal(n, 6);
	assert_int_equal(gap, 4);
	assert_false(more);
	for (size_t i = 0; i < n; i++)
		frame_display_name(p, fr[i], b[i], sizeof(b[i]));
	assert_string_equal(profile__str(p, fr[0]->name), "c10::alloc_cpu");
	assert_string_equal(profile__str(p, fr[1]->name), "at::empty_cpu");
	assert_string_equal(profile__str(p, fr[2]->name), "at::detail::empty");
	assert_string_equal(profile__str(p, fr[3]->name), "at::native::relu");
	assert_string_equal(frame_display_name(p, fr[4], b[4], sizeof(b[4])),
			    "train_step (train.py:12)");
	assert_string_equal(frame_display_name(p, fr[5], b[5], sizeof(b[5])),
			    "<module> (train.py:3)");
	profile__free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_view_select_rule),
	    cmocka_unit_test(test_python_lines_own_code),
	    cmocka_unit_test(test_python_frame_names),
	    cmocka_unit_test(test_svg_python_frames),
	    cmocka_unit_test(test_views),
	    cmocka_unit_test(test_views_without_rewrite),
	    cmocka_unit_test(test_svg_views),
	    cmocka_unit_test(test_svg_views_native_only),
	    cmocka_unit_test(test_top_views),
	    cmocka_unit_test(test_hot_python_by_file),
	    cmocka_unit_test(test_python_lines),
	    cmocka_unit_test(test_memory_rows_merged),
	    cmocka_unit_test(test_shown_frames),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

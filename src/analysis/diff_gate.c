// SPDX-License-Identifier: MIT
/* Parsing and judging `eprof diff --gate` expressions (diff_gate.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff_gate.h"
#include "diff_job.h"

#define GATE_Z 3.0

const char diff_gate_keys[] =
    "wall, cpu, function:NAME.{self,total}, thread:NAME.cpu, "
    "region:NAME.{count,mean,p50,p99,max,total}, memory.{peak,leaked,allocated,rss}, "
    "offcpu.{total,runnable,io,sleep,lock,other}, gpu.{idle,kernel,launches,htod,dtoh,dtod}, "
    "kernel:NAME.{total,count,mean}, job.{wait,wall}, rank:N.{wall,cpu,comm,wait,work}";

struct gate_key {
	const char *key;
	bool named;	    /* KEY:NAME.FIELD */
	const char *fields; /* accepted fields, space separated, each followed by its unit */
};

/* Fields and their units: t time, b bytes, c count, p percent; * sample-based. */
static const struct gate_key gate_keys[] = {
    {"wall", false, ""},
    {"cpu", false, ""},
    {"function", true, "self:t* total:t*"},
    {"thread", true, "cpu:t*"},
    {"region", true, "count:c mean:t p50:t p99:t max:t total:t"},
    {"memory", false, "peak:b leaked:b allocated:b rss:b"},
    {"offcpu", false, "total:t runnable:t io:t sleep:t lock:t other:t"},
    {"gpu", false, "idle:p kernel:t launches:c htod:b dtoh:b dtod:b"},
    {"kernel", true, "total:t count:c mean:t"},
    {"job", false, "wait:t wall:t"},
    {"rank", true, "wall:t cpu:t comm:t wait:t work:t"},
};

static int fail(char *err, size_t len, const char *expr, const char *why)
{
	snprintf(err, len, "bad gate '%s': %s (accepted: %s)", expr, why, diff_gate_keys);
	return -EINVAL;
}

/* The field's unit letter and sampled mark, or NULL when fields has no such field. */
static const char *find_field(const char *fields, const char *field)
{
	size_t l = strlen(field);

	for (const char *f = fields; *f;) {
		if (!strncmp(f, field, l) && f[l] == ':')
			return f + l + 1;
		f = strchr(f, ' ');
		if (!f)
			break;
		f++;
	}
	return NULL;
}

struct suffix {
	const char *s;
	enum gate_unit unit;
	double mult;
};

static const struct suffix suffixes[] = {
    {"ns", GATE_UNIT_TIME, 1},		 {"us", GATE_UNIT_TIME, 1e3},
    {"ms", GATE_UNIT_TIME, 1e6},	 {"s", GATE_UNIT_TIME, 1e9},
    {"B", GATE_UNIT_BYTES, 1},		 {"KiB", GATE_UNIT_BYTES, 1024.0},
    {"MiB", GATE_UNIT_BYTES, 1048576.0}, {"GiB", GATE_UNIT_BYTES, 1073741824.0},
    {"kB", GATE_UNIT_BYTES, 1e3},	 {"KB", GATE_UNIT_BYTES, 1e3},
    {"MB", GATE_UNIT_BYTES, 1e6},	 {"GB", GATE_UNIT_BYTES, 1e9},
};

/* The threshold after the operator: 0, or -EINVAL with the reason. */
static int parse_threshold(const char *s, struct diff_gate *g, const char **why)
{
	char *end;
	double v;

	if (*s != '+' && *s != '-' && (*s < '0' || *s > '9') && *s != '.') {
		*why = "the threshold must be a number, e.g. +10%";
		return -EINVAL;
	}
	v = strtod(s, &end);
	if (end == s || !isfinite(v)) {
		*why = "the threshold must be a number, e.g. +10%";
		return -EINVAL;
	}
	g->threshold = v;
	if (!strcmp(end, "%")) {
		g->thr = GATE_REL;
		return 0;
	}
	if (!strcmp(end, "pt")) {
		g->thr = GATE_PT;
		if (g->unit != GATE_UNIT_PCT) {
			*why = "pt (percentage points) is for percentages such as gpu.idle";
			return -EINVAL;
		}
		return 0;
	}
	g->thr = GATE_ABS;
	if (!*end) {
		if (g->unit == GATE_UNIT_TIME || g->unit == GATE_UNIT_BYTES) {
			*why = "an absolute threshold needs a unit (ns, us, ms, s; B, KiB, MiB, "
			       "GiB, kB, MB, GB) or %";
			return -EINVAL;
		}
		if (g->unit == GATE_UNIT_PCT)
			g->thr = GATE_PT;
		return 0;
	}
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
		if (!strcmp(end, suffixes[i].s)) {
			if (suffixes[i].unit != g->unit) {
				*why = g->unit == GATE_UNIT_TIME
					   ? "this key is a time: ns, us, ms, s or %"
				       : g->unit == GATE_UNIT_BYTES
					   ? "this key is bytes: B, KiB, MiB, GiB, "
					     "kB, MB, GB or %"
				       : g->unit == GATE_UNIT_PCT
					   ? "this key is a percentage: pt or %"
					   : "this key is a count: a number or %";
				return -EINVAL;
			}
			g->threshold = v * suffixes[i].mult;
			return 0;
		}
	*why =
	    "unknown unit after the threshold (%, pt, ns, us, ms, s, B, KiB, MiB, GiB, kB, MB, GB)";
	return -EINVAL;
}

/* KEY, KEY.FIELD or KEY:NAME.FIELD (the text before the operator, len bytes of it). */
static int parse_key(const char *s, size_t len, struct diff_gate *g, const char **why)
{
	const char *colon = memchr(s, ':', len), *dot, *f;
	const struct gate_key *k = NULL;
	size_t klen = colon ? (size_t)(colon - s) : len;

	dot = NULL;
	for (size_t i = len; i-- > (colon ? (size_t)(colon - s) : 0);)
		if (s[i] == '.') {
			dot = s + i;
			break;
		}
	if (!colon && dot)
		klen = (size_t)(dot - s);
	for (size_t i = 0; i < sizeof(gate_keys) / sizeof(gate_keys[0]); i++)
		if (strlen(gate_keys[i].key) == klen && !strncmp(gate_keys[i].key, s, klen))
			k = &gate_keys[i];
	if (!k || klen >= sizeof(g->key)) {
		*why = "unknown key";
		return -EINVAL;
	}
	memcpy(g->key, s, klen);
	g->key[klen] = 0;
	if (!*k->fields) { /* wall, cpu */
		if (colon || dot) {
			*why = "wall and cpu take no name or field";
			return -EINVAL;
		}
		g->unit = GATE_UNIT_TIME;
		g->sampled = !strcmp(g->key, "cpu");
		return 0;
	}
	if (k->named != !!colon) {
		*why =
		    k->named ? "this key needs a name: KEY:NAME.FIELD" : "this key takes no name";
		return -EINVAL;
	}
	if (!dot || (colon && dot == colon + 1)) {
		*why = dot ? "the name is empty" : "a field is missing, e.g. .total";
		return -EINVAL;
	}
	if (colon) {
		size_t nl = (size_t)(dot - colon - 1);

		if (nl >= sizeof(g->name)) {
			*why = "the name is too long";
			return -EINVAL;
		}
		memcpy(g->name, colon + 1, nl);
		g->name[nl] = 0;
	}
	if ((size_t)(s + len - dot - 1) >= sizeof(g->field)) {
		*why = "unknown field";
		return -EINVAL;
	}
	memcpy(g->field, dot + 1, (size_t)(s + len - dot - 1));
	g->field[s + len - dot - 1] = 0;
	f = find_field(k->fields, g->field);
	if (!f || !*g->field) {
		*why = "unknown field";
		return -EINVAL;
	}
	g->unit = *f == 't'   ? GATE_UNIT_TIME
		  : *f == 'b' ? GATE_UNIT_BYTES
		  : *f == 'c' ? GATE_UNIT_COUNT
			      : GATE_UNIT_PCT;
	g->sampled = f[1] == '*';
	return 0;
}

int diff_gate_parse(const char *expr, struct diff_gate *g, char *err, size_t errlen)
{
	const char *op = NULL, *why = NULL;

	memset(g, 0, sizeof(*g));
	g->expr = expr;
	/* the last > or < followed by a threshold: names may hold < > (C++ templates) */
	for (const char *s = expr; *s; s++)
		if ((*s == '>' || *s == '<') &&
		    (s[1] == '+' || s[1] == '-' || s[1] == '.' || (s[1] >= '0' && s[1] <= '9')))
			op = s;
	if (!op || op == expr)
		return fail(err, errlen, expr,
			    "expected KEY>THRESHOLD or KEY<THRESHOLD, e.g. wall>+5%");
	g->op = *op;
	if (parse_key(expr, (size_t)(op - expr), g, &why) || parse_threshold(op + 1, g, &why))
		return fail(err, errlen, expr, why);
	return 0;
}

/* --- evaluation ------------------------------------------------------------------------------ */

/* Poisson noise of two sample-based values made of nb and nn samples. */
static double poisson_z(double b, double n, double nb, double nn)
{
	double var = (nb > 0 ? b * b / nb : 0) + (nn > 0 ? n * n / nn : 0);

	return var > 0 ? (n - b) / sqrt(var) : 0;
}

static bool eval_function(struct diff_gate *g, const struct diff_result *r)
{
	bool total = !strcmp(g->field, "total");

	for (size_t i = 0; i < r->n; i++) {
		const struct diff_func *f = &r->funcs[i];

		if (strcmp(f->name, g->name))
			continue;
		/* inlined and outlined copies, or several modules: one function to the user */
		g->before += diff_func_s(r, f, DIFF_BASE, total) * 1e9;
		g->after += diff_func_s(r, f, DIFF_NEW, total) * 1e9;
		g->known = true;
	}
	if (g->known) {
		double nb = 0, nn = 0;

		for (size_t i = 0; i < r->n; i++)
			if (!strcmp(r->funcs[i].name, g->name)) {
				nb += total ? r->funcs[i].total[0] : r->funcs[i].self[0];
				nn += total ? r->funcs[i].total[1] : r->funcs[i].self[1];
			}
		g->z = poisson_z(g->before, g->after, nb, nn);
	}
	return g->known;
}

static bool eval_region(struct diff_gate *g, const struct diff_kinds *k)
{
	const struct diff_region *d = diff_kinds_region(k, g->name);
	const char *f = g->field;

	if (!d)
		return false;
	for (int s = 0; s < 2; s++) {
		double v = !strcmp(f, "count")	? (double)d->count[s]
			   : !strcmp(f, "mean") ? d->mean_ns[s]
			   : !strcmp(f, "p50")	? d->p50_ns[s]
			   : !strcmp(f, "p99")	? d->p99_ns[s]
			   : !strcmp(f, "max")	? d->max_ns[s]
						: d->total_ns[s];

		*(s ? &g->after : &g->before) = v;
	}
	return true;
}

static bool eval_memory(struct diff_gate *g, const struct diff_kinds *k)
{
	for (int s = 0; s < 2; s++) {
		const char *f = g->field;
		double v = !strcmp(f, "peak")	     ? (double)k->mem_peak[s]
			   : !strcmp(f, "leaked")    ? (double)k->mem_leaked[s]
			   : !strcmp(f, "allocated") ? k->mem_allocated[s]
						     : (double)k->rss_peak[s];

		*(s ? &g->after : &g->before) = v;
	}
	return k->mem[0] && k->mem[1];
}

static bool eval_offcpu(struct diff_gate *g, const struct diff_kinds *k)
{
	for (int s = 0; s < 2; s++) {
		double v = k->off_ns[s];

		for (int w = WAIT_RUNNABLE; w < WAIT_OFFCPU_MAX; w++)
			if (!strcmp(g->field, wait_kind_name(w)))
				v = k->off_kind_ns[w][s];
		*(s ? &g->after : &g->before) = v;
	}
	return k->off[0] && k->off[1];
}

static bool eval_gpu(struct diff_gate *g, const struct diff_kinds *k)
{
	const char *f = g->field;

	for (int s = 0; s < 2; s++) {
		double v = !strcmp(f, "idle")	    ? k->idle_pct[s]
			   : !strcmp(f, "kernel")   ? k->kernel_ns[s]
			   : !strcmp(f, "launches") ? k->launches[s]
			   : !strcmp(f, "htod")	    ? k->copy_bytes[GPU_COPY_HTOD][s]
			   : !strcmp(f, "dtoh")	    ? k->copy_bytes[GPU_COPY_DTOH][s]
						    : k->copy_bytes[GPU_COPY_DTOD][s];

		*(s ? &g->after : &g->before) = v;
	}
	if (!strcmp(f, "idle") || !strcmp(f, "kernel"))
		return k->gpu_activity[0] && k->gpu_activity[1];
	return k->gpu[0] && k->gpu[1];
}

static bool eval_row(struct diff_gate *g, const struct diff_table *t, const struct diff_result *r)
{
	const struct diff_row *row = diff_table_find(t, g->name);

	if (!row)
		return false;
	if (!strcmp(g->field, "count")) {
		g->before = row->n[0];
		g->after = row->n[1];
	} else if (!strcmp(g->field, "mean")) {
		g->before = row->n[0] > 0 ? row->v[0] / row->n[0] : 0;
		g->after = row->n[1] > 0 ? row->v[1] / row->n[1] : 0;
	} else {
		g->before = row->v[0];
		g->after = row->v[1];
	}
	if (g->sampled) /* thread CPU time: n is samples, scaled like v */
		g->z = poisson_z(g->before, g->after, row->n[0] / r->run[0].scale,
				 row->n[1] / r->run[1].scale);
	return true;
}

/* A job's key (two runs of a multi-rank job): job.wait, job.wall, rank:N.FIELD. */
static bool eval_job(struct diff_gate *g, const struct diff_job *j)
{
	const struct diff_rank *rk;
	char *end;
	long n;

	if (!j)
		return false;
	if (!strcmp(g->key, "job")) {
		bool wait = !strcmp(g->field, "wait");

		for (int s = 0; s < 2; s++)
			(s ? &g->after : &g->before)[0] =
			    (wait ? j->run[s].wait_s : j->run[s].wall_s) * 1e9;
		return true;
	}
	n = strtol(g->name, &end, 10);
	if (*end || n < 0 || n > 1 << 30 || !(rk = diff_job_rank(j, (int)n)) || !rk->in[0] ||
	    !rk->in[1])
		return false;
	for (int s = 0; s < 2; s++) {
		double v = !strcmp(g->field, "wall")   ? rk->wall_s[s]
			   : !strcmp(g->field, "cpu")  ? rk->cpu_s[s]
			   : !strcmp(g->field, "comm") ? rk->comm_s[s]
			   : !strcmp(g->field, "wait") ? rk->wait_s[s]
						       : rk->wall_s[s] - rk->comm_s[s];

		(s ? &g->after : &g->before)[0] = v * 1e9;
	}
	return true;
}

int diff_gate_eval(struct diff_gate *g, const struct diff_result *r, const struct diff_kinds *k,
		   char *err, size_t errlen)
{
	const char *what = NULL;

	g->before = g->after = g->z = 0;
	g->known = false;
	if (!strcmp(g->key, "wall")) {
		g->before = r->run[0].duration_s * r->run[0].scale * 1e9;
		g->after = r->run[1].duration_s * r->run[1].scale * 1e9;
		g->known = true;
	} else if (!strcmp(g->key, "cpu")) {
		g->before = r->run[0].cpu_ns * r->run[0].scale;
		g->after = r->run[1].cpu_ns * r->run[1].scale;
		g->z = poisson_z(g->before, g->after, r->run[0].samples, r->run[1].samples);
		g->known = true;
	} else if (!strcmp(g->key, "function")) {
		g->known = eval_function(g, r);
		what = "function";
	} else if (!strcmp(g->key, "thread")) {
		g->known = eval_row(g, &k->threads, r);
		what = "thread";
	} else if (!strcmp(g->key, "region")) {
		g->known = eval_region(g, k);
		what = "region";
	} else if (!strcmp(g->key, "kernel")) {
		if (k->gpu_activity[0] && k->gpu_activity[1]) {
			g->known = eval_row(g, &k->kernels, r);
			what = "GPU kernel";
		}
	} else if (!strcmp(g->key, "memory")) {
		g->known = eval_memory(g, k);
	} else if (!strcmp(g->key, "offcpu")) {
		g->known = eval_offcpu(g, k);
	} else if (!strcmp(g->key, "gpu")) {
		g->known = eval_gpu(g, k);
	} else if (!strcmp(g->key, "job") || !strcmp(g->key, "rank")) {
		g->known = eval_job(g, k->job);
		if (!g->known && k->job && !strcmp(g->key, "rank")) {
			snprintf(err, errlen, "gate '%s': no rank %s in both runs", g->expr,
				 g->name);
			return -ENOENT;
		}
	}
	if (!g->known) {
		if (what)
			snprintf(err, errlen, "gate '%s': no %s '%s' in either run", g->expr, what,
				 g->name);
		else
			snprintf(err, errlen, "gate '%s': %s data is not in both runs%s", g->expr,
				 g->key,
				 !strcmp(g->key, "memory")   ? " (record --mem)"
				 : !strcmp(g->key, "offcpu") ? " (record --offcpu)"
				 : !strcmp(g->key, "job") || !strcmp(g->key, "rank")
				     ? " (give each run's directory of rank recordings)"
				     : " (record --cuda)");
		return -ENOENT;
	}
	if (g->thr == GATE_REL)
		g->change = g->before > 0	   ? 100.0 * (g->after - g->before) / g->before
			    : g->after > g->before ? INFINITY
						   : 0;
	else
		g->change = g->after - g->before;
	g->failed = g->op == '>' ? g->change > g->threshold : g->change < g->threshold;
	if (g->sampled && g->failed)
		g->failed = g->op == '>' ? g->z > GATE_Z : g->z < -GATE_Z;
	return 0;
}

void diff_gate_fmt(const struct diff_gate *g, double v, char *buf, size_t len)
{
	switch (g->unit) {
	case GATE_UNIT_TIME:
		if (fabs(v) >= 1e9)
			snprintf(buf, len, "%.3f s", v / 1e9);
		else if (fabs(v) >= 1e6)
			snprintf(buf, len, "%.3f ms", v / 1e6);
		else
			snprintf(buf, len, "%.3f us", v / 1e3);
		break;
	case GATE_UNIT_BYTES:
		if (fabs(v) >= 1073741824.0)
			snprintf(buf, len, "%.2f GiB", v / 1073741824.0);
		else if (fabs(v) >= 1048576.0)
			snprintf(buf, len, "%.2f MiB", v / 1048576.0);
		else if (fabs(v) >= 1024.0)
			snprintf(buf, len, "%.2f KiB", v / 1024.0);
		else
			snprintf(buf, len, "%.0f B", v);
		break;
	case GATE_UNIT_PCT:
		snprintf(buf, len, "%.2f%%", v);
		break;
	default:
		snprintf(buf, len, "%.6g", v);
	}
}

void diff_gate_fmt_change(const struct diff_gate *g, char *buf, size_t len)
{
	if (g->thr == GATE_REL && isinf(g->change))
		snprintf(buf, len, "new");
	else if (g->thr == GATE_REL)
		snprintf(buf, len, "%+.1f%%", g->change);
	else if (g->thr == GATE_PT)
		snprintf(buf, len, "%+.2f pt", g->change);
	else if (len > 1) {
		buf[0] = g->change < 0 ? '-' : '+';
		diff_gate_fmt(g, fabs(g->change), buf + 1, len - 1);
	}
}

// SPDX-License-Identifier: MIT
/* `eprof critical-path`: the chain of running and waiting that decided how long the run took. */
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/critpath.h"
#include "analysis/gpu.h"
#include "analysis/ranks.h"
#include "analysis/regions.h"
#include "analysis/stacks.h"
#include "cmds.h"
#include "output/report_job.h"
#include "util/log.h"
#include "util/json.h"
#include "util/sink.h"

#define TOP_FRAMES 256

static const struct opt critpath_opts[] = {
	OPT_FLAG("segments", 0, struct critpath_cli, segments,
		 "list the path's segments (thread, start, length, kind, frame)"),
	OPT_FLAG("json", 0, struct critpath_cli, json,
		 "machine-readable (schema in docs/json-schema.md)"),
	OPT_UINT("limit", 0, "N", struct critpath_cli, limit, 0, 10000000,
		 "function rows (default 20, 0 = all)"),
	OPT_UINT("tid", 0, "TID", struct critpath_cli, tid, 1, 0x7fffffff,
		 "end on this thread (its last sign of life, or --end)"),
	OPT_DOUBLE("end", 0, "SECONDS", struct critpath_cli, end_s, 0, DBL_MAX,
		   "end at this time, seconds from the start of the record", .above = true,
		   .expect = "seconds > 0 from the start"),
	OPT_STRING("region", 0, "NAME", struct critpath_cli, region,
		   "the path of one instance of a region: from its end back to its start"),
	OPT_INT("instance", 0, "N", struct critpath_cli, instance, -1000000000, 1000000000,
		"which instance (0 the first by start time, -1 the last; default 0)",
		.expect = "an integer: 0 the first, -1 the last"),
	OPT_STRING("output", 'o', "FILE", struct critpath_cli, output,
		   "write to FILE instead of stdout"),
	OPT_END,
};

static const struct critpath_cli critpath_defaults = {
	.input = "eprof.data", .output = "-", .limit = 20
};

static const char *track_comm(const struct profile *p, const struct cp_track *t)
{
	static char gpu[48];
	const struct thread *th = profile__find_thread(p, t->pid, t->tid);
	const struct process *pr = profile__find_proc(p, t->pid);
	const char *c = th && th->comm ? profile__str(p, th->comm) : "";

	if (t->kind == CP_TRACK_GPU_STREAM) {
		snprintf(gpu, sizeof(gpu), "GPU %u stream %u", (uint32_t)(t->gpu_stream >> 32),
			 (uint32_t)t->gpu_stream);
		return gpu;
	}

	/* A main thread's process name follows exec; its thread name only follows samples. */
	if (pr && pr->comm && t->tid == t->pid && *profile__str(p, pr->comm))
		c = profile__str(p, pr->comm);
	return *c ? c : "?";
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * part / whole : 0;
}

/* The frame a user reads first: the innermost frame of the user's own code, else the leaf. */
static const char *stack_top(const struct profile *p, uint32_t node)
{
	const struct frame *fr[TOP_FRAMES];
	size_t n = stack_frames(p, node, fr, TOP_FRAMES, NULL);

	for (size_t k = n; k-- > 0;)
		if (fr[k]->kind == FRAME_USER || fr[k]->kind == FRAME_JIT)
			return profile__str(p, fr[k]->name);
	return n ? profile__str(p, fr[n - 1]->name) : "";
}

struct stack_seen {
	uint32_t stack, first; /* stack node, and where in the segment it first shows */
};

static int cmp_stack_seen(const void *a, const void *b)
{
	const struct stack_seen *x = a, *y = b;

	if (x->stack != y->stack)
		return x->stack < y->stack ? -1 : 1;
	return x->first < y->first ? -1 : x->first > y->first;
}

/*
 * Most frequent leaf stack among the samples of a running segment (ties: the one seen first),
 * named by its top frame. The track's samples are in time order: a binary search finds the
 * segment's, a sort counts them, so a long segment costs k log k, not k^2.
 */
static const char *segment_top(const struct cp_graph *g, const struct cp_segment *s)
{
	const struct profile *p = g->p;
	const struct cp_track *t = &g->tracks[s->track];
	struct stack_seen *v;
	size_t lo = 0, hi = t->nsamples, n = 0, best = 0, best_n = 0;
	uint32_t top = 0;

	if (s->gpu_event && s->gpu_event <= p->events.n) {
		static char buf[64];

		return gpu_activity_name(p, &p->events.v[s->gpu_event - 1], buf, sizeof(buf));
	}
	if (s->kind != WAIT_ONCPU)
		return s->stack ? stack_top(p, s->stack) : "";
	while (lo < hi) { /* first sample after the start */
		size_t mid = (lo + hi) / 2;

		if (p->samples.v[t->samples[mid]].ts <= s->start)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (hi = lo; hi < t->nsamples && p->samples.v[t->samples[hi]].ts <= s->end; hi++)
		;
	v = malloc((hi - lo ? hi - lo : 1) * sizeof(*v));
	if (!v)
		return "";
	for (size_t i = lo; i < hi; i++) {
		uint32_t st = p->samples.v[t->samples[i]].stack;

		if (st)
			v[n++] = (struct stack_seen){ st, (uint32_t)(i - lo) };
	}
	qsort(v, n, sizeof(*v), cmp_stack_seen);
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && v[j].stack == v[i].stack; j++)
			;
		if (j - i > best_n || (j - i == best_n && v[i].first < best)) {
			best_n = j - i;
			best = v[i].first;
			top = v[i].stack;
		}
	}
	free(v);
	return top ? stack_top(p, top) : "";
}

struct thread_share {
	uint32_t track;
	uint64_t ns;
};

static int cmp_share(const void *a, const void *b)
{
	const struct thread_share *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns < y->ns ? 1 : -1;
	return x->track < y->track ? -1 : x->track > y->track;
}

static struct thread_share *by_thread(const struct cp_graph *g, const struct cp_path *path,
				      size_t *n)
{
	struct thread_share *v = calloc(g->ntracks ? g->ntracks : 1, sizeof(*v));
	size_t k = 0;

	if (!v)
		return NULL;
	for (size_t i = 0; i < g->ntracks; i++)
		v[i].track = i;
	for (size_t i = 0; i < path->nsegs; i++)
		v[path->segs[i].track].ns += path->segs[i].end - path->segs[i].start;
	qsort(v, g->ntracks, sizeof(*v), cmp_share);
	while (k < g->ntracks && v[k].ns)
		k++;
	*n = k;
	return v;
}

/* Wall time the path is measured against: the record's, or the region instance's. */
static uint64_t wall_origin(const struct critpath_cli *o, const struct cp_graph *g,
			    const struct cp_path *path)
{
	return o->region ? path->start : g->t_start;
}

static const char *kind_note(int k)
{
	switch (k) {
	case WAIT_RUNNABLE:
		return "   (CPU contention)";
	case WAIT_ONCPU:
		return "   (CPU-bound)";
	case WAIT_GPU_COMPUTE:
		return "   (GPU kernels)";
	case WAIT_GPU_COPY:
		return "   (GPU copies and sets)";
	case WAIT_GPU_LAUNCH:
		return "   (launch overhead: from the launch call to the work starting)";
	case WAIT_GPU_SYNC:
		return "   (synchronization not explained by GPU work)";
	default:
		return "";
	}
}

static void write_text(struct sink *out, const struct critpath_cli *o, const struct cp_graph *g,
		       const struct cp_path *path, const struct cp_func *f, size_t nf,
		       const struct thread_share *ts, size_t nts, uint32_t end_track)
{
	const struct profile *p = g->p;
	const struct cp_track *et = &g->tracks[end_track];
	uint64_t wall = path->end - wall_origin(o, g, path), total = path->total_ns;
	size_t lim = o->limit && o->limit < nf ? o->limit : nf;

	sink_printf(out, "# critical path: %s\n", o->input);
	sink_printf(out, "# end: %s (pid %u, tid %u) at %.3f s\n", track_comm(p, et), et->pid,
		    et->tid, (path->end - g->t_start) / 1e9);
	sink_printf(out, "# path: %.3f s of %.3f s wall (%.1f%%), %zu segments\n", total / 1e9,
		    wall / 1e9, pct(total, wall), path->nsegs);
	sink_puts(out, "\nBy kind:\n");
	for (int k = 0; k < WAIT_KIND_MAX; k++)
		if (path->by_kind[k])
			sink_printf(out, "  %-11s %10.3f s %6.1f%%%s\n", wait_kind_name(k),
				    path->by_kind[k] / 1e9, pct(path->by_kind[k], total),
				    kind_note(k));
	sink_puts(out, "\nBy thread:\n");
	for (size_t i = 0; i < nts; i++) {
		const struct cp_track *t = &g->tracks[ts[i].track];

		sink_printf(out, "  %8u %8u  %-16s %10.3f s %6.1f%%\n", t->pid,
			    t->kind == CP_TRACK_GPU_STREAM ? 0 : t->tid, track_comm(p, t),
			    ts[i].ns / 1e9, pct(ts[i].ns, total));
	}
	sink_printf(out, "\n%7s %12s  %-50s %s\n", "Path%", "Time(ms)", "Function (inclusive)",
		    "Module");
	for (size_t i = 0; i < lim; i++)
		sink_printf(out, "%7.2f %12.3f  %-50s %s\n", pct(f[i].ns, total), f[i].ns / 1e6,
			    profile__str(p, f[i].name), profile__str(p, f[i].module));
	if (lim < nf)
		sink_printf(out, "... %zu more functions (--limit 0 shows all)\n", nf - lim);
	if (!o->segments)
		return;
	sink_printf(out, "\n%12s %12s  %-16s %8s  %-11s %s\n", "Start(s)", "Dur(ms)", "Thread",
		    "TID", "Kind", "Frame");
	for (size_t i = 0; i < path->nsegs; i++) {
		const struct cp_segment *s = &path->segs[i];
		const struct cp_track *t = &g->tracks[s->track];

		sink_printf(out, "%12.6f %12.3f  %-16s %8u  %-11s %s\n",
			    (s->start - g->t_start) / 1e9, (s->end - s->start) / 1e6,
			    track_comm(p, t), t->kind == CP_TRACK_GPU_STREAM ? 0 : t->tid,
			    wait_kind_name(s->kind), segment_top(g, s));
	}
}

/* GPU stream tracks: which device and stream (their tid is 0). */
static void json_track(struct json *j, const struct cp_track *t)
{
	json_kv_u64(j, "pid", t->pid);
	json_kv_u64(j, "tid", t->kind == CP_TRACK_GPU_STREAM ? 0 : t->tid);
}

static void json_gpu_track(struct json *j, const struct cp_track *t)
{
	if (t->kind != CP_TRACK_GPU_STREAM)
		return;
	json_kv_u64(j, "gpu_device", (uint32_t)(t->gpu_stream >> 32));
	json_kv_u64(j, "gpu_stream", (uint32_t)t->gpu_stream);
}

static void json_segments(struct json *j, const struct cp_graph *g, const struct cp_path *path)
{
	json_arr_open(j, 2, "segments");
	for (size_t i = 0; i < path->nsegs; i++) {
		const struct cp_segment *s = &path->segs[i];
		const struct cp_track *t = &g->tracks[s->track];

		json_obj_open(j, 4, NULL);
		json_track(j, t);
		json_kv_u64(j, "start_ns", s->start);
		json_kv_u64(j, "dur_ns", s->end - s->start);
		json_kv_str(j, "kind", wait_kind_name(s->kind));
		json_gpu_track(j, t);
		json_kv_str(j, "frame", segment_top(g, s) ?: "");
		json_obj_end(j);
	}
	json_arr_close(j, 2);
}

static int write_json(struct sink *out, const struct critpath_cli *o, const struct cp_graph *g,
		      const struct cp_path *path, const struct cp_func *f, size_t nf,
		      const struct thread_share *ts, size_t nts, uint32_t end_track)
{
	const struct profile *p = g->p;
	uint64_t total = path->total_ns;
	size_t lim = o->limit && o->limit < nf ? o->limit : nf;
	struct json j;

	json_init(&j, out, 0);
	json_obj(&j);
	json_break(&j, 2);
	json_kv_u64(&j, "version", 1);
	json_kv_u64(&j, "total_ns", total);
	json_kv_u64(&j, "wall_ns", path->end - wall_origin(o, g, path));
	json_kv_u64(&j, "start_ns", path->start);
	json_kv_u64(&j, "end_ns", path->end);
	json_kv_u64(&j, "end_pid", g->tracks[end_track].pid);
	json_kv_u64(&j, "end_tid", g->tracks[end_track].tid);
	json_obj_open(&j, 2, "by_kind");
	for (int k = 0; k < WAIT_KIND_MAX; k++)
		json_kv_u64(&j, wait_kind_name(k), path->by_kind[k]);
	json_obj_end(&j);
	json_arr_open(&j, 2, "by_thread");
	for (size_t i = 0; i < nts; i++) {
		const struct cp_track *t = &g->tracks[ts[i].track];

		json_obj_open(&j, 4, NULL);
		json_track(&j, t);
		json_gpu_track(&j, t);
		json_kv_str(&j, "comm", track_comm(p, t));
		json_kv_u64(&j, "ns", ts[i].ns);
		json_kv_f(&j, "pct", pct(ts[i].ns, total), 4);
		json_obj_end(&j);
	}
	json_arr_close(&j, 2);
	json_arr_open(&j, 2, "functions");
	for (size_t i = 0; i < lim; i++) {
		json_obj_open(&j, 4, NULL);
		json_kv_str(&j, "name", profile__str(p, f[i].name));
		json_kv_str(&j, "module", profile__str(p, f[i].module));
		json_kv_u64(&j, "ns", f[i].ns);
		json_kv_f(&j, "pct", pct(f[i].ns, total), 4);
		json_obj_end(&j);
	}
	json_arr_close(&j, 2);
	if (o->segments)
		json_segments(&j, g, path);
	json_obj_close(&j, 0);
	return json_flush(&j);
}

static int end_point(const struct critpath_cli *o, const struct cp_graph *g, uint32_t *track,
		     uint64_t *end)
{
	int err = critpath_default_end(g, track, end);

	if (o->tid) {
		err = -ENOENT;
		for (size_t i = 0; i < g->ntracks; i++) {
			if (g->tracks[i].kind == CP_TRACK_THREAD && g->tracks[i].tid == o->tid) {
				*track = i;
				*end = g->tracks[i].t_last;
				err = 0;
			}
		}
		if (err) {
			log_err("no thread %u in '%s'", o->tid, o->input);
			return err;
		}
	}
	if (o->end_s > 0) {
		uint64_t e = g->t_start + (uint64_t)llround(o->end_s * 1e9);

		if (e < *end)
			*end = e;
	}
	if (err)
		log_err("'%s' has no threads to follow", o->input);
	return err;
}

/* --region NAME --instance N: the thread and the span of that instance. */
static int region_point(const struct critpath_cli *o, const struct profile *p,
			const struct cp_graph *g, uint32_t *track, uint64_t *end, uint64_t *start)
{
	struct region_span sp;
	int64_t t;
	int err = regions_instance(p, o->region, o->instance, &sp);

	if (err == -ENOENT) {
		log_err("no instance %ld of region '%s' in '%s' (%zu instances)", o->instance,
			o->region, o->input, regions_count(p, o->region));
		return err;
	}
	if (err)
		return err;
	t = critpath_find_track(g, CP_TRACK_THREAD, sp.pid, sp.tid);
	if (t < 0) {
		log_err("region '%s' ran on thread %u, which has no timeline in '%s' (record with "
			"--offcpu)",
			o->region, sp.tid, o->input);
		return -ENOENT;
	}
	*track = (uint32_t)t;
	*end = sp.end;
	*start = sp.start;
	return 0;
}

static int run(struct sink *out, const struct critpath_cli *o, struct profile *p)
{
	struct cp_graph g;
	struct cp_path path = {0};
	struct cp_func *f = NULL;
	struct thread_share *ts = NULL;
	size_t nf = 0, nts = 0;
	uint32_t track;
	uint64_t end, start = 0;
	int err;

	err = critpath_build(p, &g);
	if (err)
		return err;
	if (o->region)
		err = region_point(o, p, &g, &track, &end, &start);
	else
		err = end_point(o, &g, &track, &end);
	if (!err)
		err = critpath_walk(&g, track, end, start, &path);
	if (!err)
		err = critpath_functions(p, &path, &f, &nf);
	if (!err && !(ts = by_thread(&g, &path, &nts)))
		err = -ENOMEM;
	if (!err && o->json)
		err = write_json(out, o, &g, &path, f, nf, ts, nts, track);
	else if (!err)
		write_text(out, o, &g, &path, f, nf, ts, nts, track);
	free(ts);
	free(f);
	critpath_path_free(&path);
	critpath_free(&g);
	return err;
}

/* Several recordings of a job: the path across ranks through their collectives. */
static int job_run(struct cmd_ctx *c)
{
	const struct critpath_cli *o = c->opts;
	struct job_summary s;
	struct job_path p;
	int err;

	if (o->tid || o->pid || o->region || o->end_s > 0) {
		log_err("critical-path: --tid, --pid, --end and --region take one recording");
		return 2;
	}
	err = job_analyze(c->job, c->job_paths, c->njob, &s);
	if (!err) {
		err = job_path(&s, &p);
		if (err)
			job_summary_free(&s);
	}
	if (err) {
		log_err("failed to analyse the job's recordings: %s", strerror(-err));
		return 1;
	}
	if (!s.matched)
		log_warn("no collective matched across the recordings: the path stays on the rank "
			 "that ends last");
	c->text_out = !o->json;
	err = cmd_output(c) ? report_job_path(c->out, &s, &p, o->json, o->segments) : 1;
	job_path_free(&p);
	job_summary_free(&s);
	return err;
}

static int critpath_run(struct cmd_ctx *c)
{
	const struct critpath_cli *o = c->opts;
	int err;

	if (c->njob)
		return job_run(c);

	if (!offcpu_count(c->in[0]) && !gpu_present(c->in[0]))
		log_warn(
		    "'%s' has no off-CPU data (record with --offcpu): the path cannot follow waits",
		    o->input);
	c->text_out = !o->json;
	if (!cmd_output(c))
		return 1;
	err = run(c->out, o, c->in[0]);
	return err == -ENOENT ? 1 : err; /* no such thread or region instance: said */
}

const struct command cmd_critical_path = {
	.name = "critical-path",
	.summary = "the chain of work and waits that decided the run's length",
	.usage = "[FILE...|DIR|GLOB] [options]   (FILE defaults to eprof.data; record with "
		 "--offcpu)",
	.about = "From the run's end (the launched command's exit, or the last event) back to its "
		 "start:\n"
		 "while a thread runs it is on the path; while it waited, the path goes to the "
		 "thread that\n"
		 "woke it. Waits nobody explains (timers, I/O) and waits for a CPU stay on the "
		 "path.\n"
		 "With CUDA data, a synchronization call goes to the GPU work that ended it,\n"
		 "GPU work to its launch (or to the work before it on its stream).\n"
		 "Several recordings of a job's ranks: the path across ranks through their "
		 "collectives.\n",
	CMD_OPTIONS(critpath_opts, critpath_defaults),
	CMD_JOB_READER(struct critpath_cli, more, 0),
	.run = critpath_run,
};

int parse_critpath_args(int argc, char **argv, struct critpath_cli *o)
{
	return cmd_parse(&cmd_critical_path, argc, argv, o);
}

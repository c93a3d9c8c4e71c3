// SPDX-License-Identifier: MIT
/* `eprof diff` of two runs of a multi-rank job: the job, rank by rank, the collectives. */
#include <stdio.h>
#include <string.h>

#include "diff_report.h"

static const char *side_name(int s)
{
	return s ? "new" : "base";
}

static void text_straggler(struct sink *out, const struct diff_job_run *r)
{
	if (r->straggler_label[0])
		sink_printf(out, "%s, last at %.0f%% of the collectives%s%s", r->straggler_label,
			    100 * r->straggler_share, r->straggler_func[0] ? ", in " : "",
			    r->straggler_func);
	else
		sink_printf(out, "none");
}

/* The rank the others waited for, and what it ran more of. */
static void text_verdict(struct sink *out, const struct diff_job *j)
{
	const struct diff_rank *r;
	double work;

	if (j->slowest < 0) {
		sink_printf(out, "  no rank's work outside communication grew\n");
		return;
	}
	r = &j->ranks[j->slowest];
	work = (r->wall_s[1] - r->comm_s[1]) - (r->wall_s[0] - r->comm_s[0]);
	sink_printf(out, "  the rank whose work grew most: %s, %+.3f s outside communication", r->label,
		    work);
	if (r->func[0])
		sink_printf(out, "; %s: %s %.3f -> %.3f s %s CPU (%+.3f s)",
			    r->func_self ? "most changed" : "its CPU time grew in", r->func,
			    r->func_s[0], r->func_s[1], r->func_self ? "self" : "inclusive",
			    r->func_s[1] - r->func_s[0]);
	sink_printf(out, "\n");
}

static void text_ranks(struct sink *out, const struct diff_job *j, unsigned limit)
{
	size_t rows = limit && limit < j->n ? limit : j->n;
	int lw = 4;

	for (size_t i = 0; i < rows; i++)
		if ((int)strlen(j->ranks[i].label) > lw)
			lw = (int)strlen(j->ranks[i].label) < 40 ? (int)strlen(j->ranks[i].label) : 40;
	sink_printf(out,
		    "\nRanks (seconds, base -> new; work: wall time outside communication calls; "
		    "last: collectives it arrived last at)\n");
	sink_printf(out, "  %-*s %13s %8s  %13s %8s  %13s %8s  %9s  %s\n", lw, "Rank", "wall",
		    "delta", "work", "delta", "waiting", "delta", "last",
		    "Where its CPU time grew (CPU s; * self)");
	for (size_t i = 0; i < rows; i++) {
		const struct diff_rank *r = &j->ranks[i];
		char w[40], k[40], t[40], l[40];

		if (!r->in[0] || !r->in[1]) {
			sink_printf(out, "  %-*s only in %s\n", lw, r->label, side_name(r->in[1]));
			continue;
		}
		snprintf(w, sizeof(w), "%.3f->%.3f", r->wall_s[0], r->wall_s[1]);
		snprintf(k, sizeof(k), "%.3f->%.3f", r->wall_s[0] - r->comm_s[0],
			 r->wall_s[1] - r->comm_s[1]);
		snprintf(t, sizeof(t), "%.3f->%.3f", r->wait_s[0], r->wait_s[1]);
		snprintf(l, sizeof(l), "%llu->%llu", (unsigned long long)r->last[0],
			 (unsigned long long)r->last[1]);
		sink_printf(out, "  %-*s %13s %+8.3f  %13s %+8.3f  %13s %+8.3f  %9s  ", lw, r->label, w,
			    r->wall_s[1] - r->wall_s[0], k,
			    (r->wall_s[1] - r->comm_s[1]) - (r->wall_s[0] - r->comm_s[0]), t,
			    r->wait_s[1] - r->wait_s[0], l);
		if (r->func[0])
			sink_printf(out, "%s%s %.3f->%.3f (%+.3f)\n", r->func, r->func_self ? "*" : "",
				    r->func_s[0], r->func_s[1], r->func_s[1] - r->func_s[0]);
		else
			sink_printf(out, "-\n");
	}
	if (rows < j->n)
		sink_printf(out, "  ... %zu more ranks (--limit 0 shows all)\n", j->n - rows);
}

static void text_colls(struct sink *out, const struct diff_job *j, unsigned limit)
{
	size_t rows = limit && limit < j->ncolls ? limit : j->ncolls;

	if (!j->ncolls)
		return;
	sink_printf(out, "\nCollectives (waits summed over ranks; spread: the latest arrival "
			 "after the first at one instance, the largest)\n");
	sink_printf(out, "  %-28s %15s %17s %9s %8s %17s\n", "Operation", "instances",
		    "waiting s", "delta", "change", "max spread ms");
	for (size_t i = 0; i < rows; i++) {
		const struct diff_coll *c = &j->colls[i];
		char in[40], wt[40], sp[40], ch[32];

		snprintf(in, sizeof(in), "%llu->%llu", (unsigned long long)c->instances[0],
			 (unsigned long long)c->instances[1]);
		snprintf(wt, sizeof(wt), "%.3f->%.3f", c->wait_s[0], c->wait_s[1]);
		snprintf(sp, sizeof(sp), "%.1f->%.1f", c->max_spread_s[0] * 1e3,
			 c->max_spread_s[1] * 1e3);
		diff_fmt_pct(ch, sizeof(ch), c->wait_s[0], c->wait_s[1]);
		sink_printf(out, "  %-28s %15s %17s %+9.3f %8s %17s\n", c->name, in, wt,
			    c->wait_s[1] - c->wait_s[0], ch, sp);
	}
	if (rows < j->ncolls)
		sink_printf(out, "  ... %zu more (--limit 0 shows all)\n", j->ncolls - rows);
}

void diff_text_job(struct sink *out, const struct diff_report *d)
{
	const struct diff_job *j = d->k ? d->k->job : NULL;
	char ch[32];

	if (!j)
		return;
	sink_printf(out, "\nJob: %zu -> %zu recordings", j->run[0].recordings,
		    j->run[1].recordings);
	if (j->run[0].world_size != j->run[1].world_size)
		sink_printf(out, " (world size %d -> %d)", j->run[0].world_size,
			    j->run[1].world_size);
	diff_fmt_pct(ch, sizeof(ch), j->run[0].wait_s, j->run[1].wait_s);
	sink_printf(out, "\n  longest rank: %.3f -> %.3f s   waiting in collectives, all ranks: "
			 "%.3f -> %.3f s (%s)\n",
		    j->run[0].wall_s, j->run[1].wall_s, j->run[0].wait_s, j->run[1].wait_s, ch);
	sink_printf(out, "  straggler: ");
	text_straggler(out, &j->run[0]);
	sink_printf(out, "  ->  ");
	text_straggler(out, &j->run[1]);
	sink_printf(out, "\n");
	text_verdict(out, j);
	text_ranks(out, j, d->limit);
	text_colls(out, j, d->limit);
}

static void json_run(struct json *j, const char *key, const struct diff_job_run *r)
{
	json_obj_open(j, 4, key);
	json_kv_u64(j, "recordings", r->recordings);
	json_kv_i64(j, "world_size", r->world_size);
	json_kv_f(j, "wall_s", r->wall_s, 6);
	json_kv_f(j, "wait_s", r->wait_s, 6);
	json_kv_u64(j, "matched", r->matched);
	if (r->straggler_label[0]) {
		json_obj_open(j, -1, "straggler");
		json_kv_i64(j, "rank", r->straggler);
		json_kv_str(j, "label", r->straggler_label);
		json_kv_f(j, "arrived_last_share", r->straggler_share, 4);
		json_kv_str(j, "function", r->straggler_func);
		json_obj_end(j);
	} else {
		json_kv_null(j, "straggler");
	}
	json_obj_end(j);
}

static void json_rank_side(struct json *j, const struct diff_rank *r, int s)
{
	json_obj_open(j, -1, side_name(s));
	json_kv_f(j, "wall_s", r->wall_s[s], 6);
	json_kv_f(j, "work_s", r->wall_s[s] - r->comm_s[s], 6);
	json_kv_f(j, "cpu_s", r->cpu_s[s], 6);
	json_kv_f(j, "comm_s", r->comm_s[s], 6);
	json_kv_f(j, "wait_s", r->wait_s[s], 6);
	json_kv_u64(j, "collectives", r->colls[s]);
	json_kv_u64(j, "arrived_last", r->last[s]);
	json_obj_end(j);
}

static void json_rank(struct json *j, const char *key, const struct diff_rank *r)
{
	json_obj_open(j, 6, key);
	json_kv_i64(j, "rank", r->rank);
	json_kv_str(j, "label", r->label);
	for (int s = 0; s < 2; s++) {
		if (r->in[s])
			json_rank_side(j, r, s);
		else
			json_kv_null(j, side_name(s));
	}
	if (r->func[0]) {
		json_obj_open(j, -1, "function");
		json_kv_str(j, "name", r->func);
		/* inclusive: the leaf of the path its growth is blamed on; self: nothing grew */
		json_kv_str(j, "time", r->func_self ? "self" : "inclusive");
		json_kv_f(j, "base_s", r->func_s[0], 6);
		json_kv_f(j, "new_s", r->func_s[1], 6);
		json_obj_end(j);
	} else {
		json_kv_null(j, "function");
	}
	json_obj_end(j);
}

void diff_json_job(struct json *j, const struct diff_report *d)
{
	const struct diff_job *jb = d->k ? d->k->job : NULL;

	if (!jb) {
		json_kv_null(j, "job");
		return;
	}
	json_obj_open(j, 2, "job");
	json_run(j, "base", &jb->run[0]);
	json_run(j, "new", &jb->run[1]);
	if (jb->slowest >= 0)
		json_rank(j, "slowest", &jb->ranks[jb->slowest]);
	else
		json_kv_null(j, "slowest");
	json_arr_open(j, 4, "ranks");
	for (size_t i = 0; i < jb->n; i++)
		json_rank(j, NULL, &jb->ranks[i]);
	json_arr_close(j, jb->n ? 4 : -1);
	json_arr_open(j, 4, "collectives");
	for (size_t i = 0; i < jb->ncolls; i++) {
		const struct diff_coll *c = &jb->colls[i];

		json_obj_open(j, 6, NULL);
		json_kv_str(j, "name", c->name);
		for (int s = 0; s < 2; s++) {
			json_obj_open(j, -1, side_name(s));
			json_kv_u64(j, "instances", c->instances[s]);
			json_kv_f(j, "wait_s", c->wait_s[s], 6);
			json_kv_f(j, "max_spread_s", c->max_spread_s[s], 6);
			json_kv_u64(j, "bytes", c->bytes[s]);
			json_obj_end(j);
		}
		json_obj_end(j);
	}
	json_arr_close(j, jb->ncolls ? 4 : -1);
	json_obj_close(j, 2);
}

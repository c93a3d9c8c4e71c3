// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "analysis/ranks.h"
#include "util/json.h"
#include "util/sink.h"
#include "report_job.h"
#include "units.h"

static uint64_t ns(double s)
{
	if (!(s > 0))
		return 0;
	return s < 1.8e10 ? (uint64_t)(s * 1e9 + 0.5) : UINT64_MAX;
}

static void text_header(struct sink *out, const struct job_summary *s)
{
	const struct rank_info *r0 = &s->ranks[0];
	size_t hosts = 0;

	for (size_t i = 0; i < s->n; i++) {
		bool seen = false;

		for (size_t k = 0; k < i && !seen; k++)
			seen = !strcmp(s->ranks[k].host, s->ranks[i].host);
		hosts += !seen;
	}
	sink_printf(out, "Job: %zu recordings", s->n);
	if (s->world_size > 0)
		sink_printf(out, " of %d ranks", s->world_size);
	sink_printf(out, " on %zu host%s", hosts, hosts == 1 ? "" : "s");
	if (r0->job_id)
		sink_printf(out, ", job %s", r0->job_id);
	sink_printf(out, "\nCommand: %s\n", r0->command);
	if (s->mixed_jobs)
		sink_puts(out, "warning: the files come from different jobs (their job ids differ): "
			       "waits and the straggler compare unrelated runs\n");
	if (s->duplicate_ranks)
		sink_puts(out, "warning: two files claim the same rank (recorded twice, or under "
			       "different launches)\n");
	if (s->nmissing) {
		sink_printf(out, "warning: %zu rank%s of %d missing (no file):", s->nmissing,
			    s->nmissing == 1 ? "" : "s", s->world_size);
		for (size_t i = 0; i < s->nmissing && i < 32; i++)
			sink_printf(out, " %d", s->missing[i]);
		sink_puts(out, s->nmissing > 32 ? " ...\n" : "\n");
	}
	for (size_t i = 0; i < s->n; i++) {
		const struct rank_info *r = &s->ranks[i];
		char lab[300];

		rank_label(r, lab, sizeof(lab));
		if (!r->has_clock)
			sink_printf(out, "warning: %s has no realtime clock mapping (an older "
					 "recording): its times are taken as they are\n", lab);
		if (r->correction_ns)
			sink_printf(out, "Clock: %s corrected by %+.3f ms beyond its realtime "
					 "mapping (matched collective ends)\n",
				    lab, r->correction_ns / 1e6);
	}
}

static void text_ranks(struct sink *out, const struct job_summary *s)
{
	sink_printf(out, "\n%-6s %-20s %10s %10s %12s %12s %7s %6s  %s\n", "Rank", "Host", "Wall",
		    "CPU", "In comm", "Waiting", "Colls", "Last", "File");
	for (size_t i = 0; i < s->n; i++) {
		const struct rank_info *r = &s->ranks[i];
		char wall[32], cpu[32], comm[32], wait[32], rk[16];

		fmt_ns(wall, sizeof(wall), ns(r->wall_s));
		fmt_ns(cpu, sizeof(cpu), ns(r->cpu_s));
		fmt_ns(comm, sizeof(comm), ns(r->comm_s));
		fmt_ns(wait, sizeof(wait), ns(r->wait_s));
		snprintf(rk, sizeof(rk), r->rank >= 0 ? "%d" : "?", r->rank);
		sink_printf(out, "%-6s %-20.20s %10s %10s %12s %12s %7" PRIu64 " %6" PRIu64 "  %s\n",
			    rk, r->host, wall, cpu, comm, wait, r->colls, r->last, r->path);
	}
}

static void text_ops(struct sink *out, const struct job_summary *s)
{
	if (!s->nops) {
		sink_puts(out, "\nCollectives: none recorded (MPI, NCCL and gloo calls are timed "
			       "when the ranks map those libraries)\n");
		return;
	}
	sink_printf(out, "\n%-28s %10s %12s %16s %14s\n", "Collective (every rank)", "Instances",
		    "Bytes", "Wait (all ranks)", "Max spread");
	for (size_t i = 0; i < s->nops; i++) {
		const struct coll_op *o = &s->ops[i];
		char b[32], w[32], sp[32];

		if (o->bytes)
			fmt_bytes(b, sizeof(b), (double)o->bytes);
		else
			snprintf(b, sizeof(b), "-");
		fmt_ns(w, sizeof(w), ns(o->wait_s));
		fmt_ns(sp, sizeof(sp), ns(o->max_spread_s));
		sink_printf(out, "%-28.28s %10" PRIu64 " %12s %16s %14s\n", o->label, o->instances, b,
			    w, sp);
	}
	if (s->unmatched)
		sink_printf(out, "# %" PRIu64 " collective calls are not on every rank (a rank "
				 "stopped early, or the ranks ran different sequences): not matched\n",
			    s->unmatched);
	sink_puts(out, "# Waiting: from a rank's arrival at a collective to the last rank's "
		       "arrival at it\n");
}

void straggler_text(const struct job_summary *s, char *buf, size_t len)
{
	const struct rank_info *r = &s->ranks[s->straggler];
	char lab[300];
	int n;

	rank_label(r, lab, sizeof(lab));
	n = snprintf(buf, len,
		     "%s arrives last at %.0f%% of the %" PRIu64 " matched collectives; the other "
		     "ranks wait %.3f s in total for it",
		     lab, 100 * s->straggler_share, s->matched, s->others_wait_s);
	if (n > 0 && (size_t)n < len && s->straggler_func[0])
		snprintf(buf + n, len - (size_t)n,
			 "; meanwhile it runs %s (%.0f%% of its %" PRIu64 " samples then)",
			 s->straggler_func, 100 * s->straggler_func_share, s->straggler_samples);
}

static int write_text(struct sink *out, const struct job_summary *s)
{
	char what[1024];

	text_header(out, s);
	text_ranks(out, s);
	text_ops(out, s);
	sink_puts(out, "\nFindings\n");
	if (s->straggler >= 0) {
		straggler_text(s, what, sizeof(what));
		sink_printf(out, "  warn   straggler           %s\n", what);
		sink_puts(out, "         balance the straggler's work before the collectives, or "
			       "look at what it runs then (eprof report FILE --time-range)\n");
	} else {
		sink_puts(out, "  none: no rank arrives last at half of the collectives or more\n");
	}
	return out->err;
}

static void json_ranks(struct json *j, const struct job_summary *s)
{
	json_arr_open(j, 2, "ranks");
	for (size_t i = 0; i < s->n; i++) {
		const struct rank_info *r = &s->ranks[i];

		json_obj_open(j, 4, NULL);
		if (r->rank >= 0)
			json_kv_i64(j, "rank", r->rank);
		else
			json_kv_null(j, "rank");
		if (r->local_rank >= 0)
			json_kv_i64(j, "local_rank", r->local_rank);
		else
			json_kv_null(j, "local_rank");
		json_kv_str(j, "host", r->host);
		json_kv_str(j, "file", r->path);
		json_kv_str(j, "job_id", r->job_id);
		json_kv_f(j, "wall_s", r->wall_s, 6);
		json_kv_f(j, "cpu_s", r->cpu_s, 6);
		json_kv_f(j, "comm_s", r->comm_s, 6);
		json_kv_f(j, "wait_s", r->wait_s, 6);
		json_kv_u64(j, "collectives", r->colls);
		json_kv_u64(j, "arrived_last", r->last);
		json_kv_bool(j, "has_clock", r->has_clock);
		json_kv_i64(j, "clock_correction_ns", r->correction_ns);
		json_obj_end(j);
	}
	json_arr_close(j, 2);
}

static int write_json(struct sink *out, const struct job_summary *s)
{
	struct json j;
	char what[1024];

	json_init(&j, out, 0);
	json_obj(&j);
	json_break(&j, 2);
	json_kv_u64(&j, "version", 1);
	json_kv_u64(&j, "recordings", s->n);
	if (s->world_size > 0)
		json_kv_i64(&j, "world_size", s->world_size);
	else
		json_kv_null(&j, "world_size");
	json_kv_bool(&j, "mixed_jobs", s->mixed_jobs);
	json_kv_bool(&j, "duplicate_ranks", s->duplicate_ranks);
	json_arr_open(&j, 2, "missing_ranks");
	for (size_t i = 0; i < s->nmissing; i++)
		json_i64(&j, s->missing[i]);
	json_arr_end(&j);
	json_ranks(&j, s);
	json_arr_open(&j, 2, "collectives");
	for (size_t i = 0; i < s->nops; i++) {
		const struct coll_op *o = &s->ops[i];

		json_obj_open(&j, 4, NULL);
		json_kv_str(&j, "name", o->label);
		json_kv_u64(&j, "instances", o->instances);
		json_kv_u64(&j, "bytes", o->bytes);
		json_kv_f(&j, "wait_s", o->wait_s, 6);
		json_kv_f(&j, "max_spread_s", o->max_spread_s, 6);
		json_obj_end(&j);
	}
	json_arr_close(&j, s->nops ? 2 : -1);
	json_break(&j, 2);
	json_kv_u64(&j, "matched", s->matched);
	json_kv_u64(&j, "unmatched", s->unmatched);
	json_kv_f(&j, "wait_s", s->wait_s, 6);
	if (s->straggler >= 0) {
		const struct rank_info *r = &s->ranks[s->straggler];

		straggler_text(s, what, sizeof(what));
		json_obj_open(&j, 2, "straggler");
		if (r->rank >= 0)
			json_kv_i64(&j, "rank", r->rank);
		else
			json_kv_null(&j, "rank");
		json_kv_str(&j, "host", r->host);
		json_kv_f(&j, "arrived_last_share", s->straggler_share, 4);
		json_kv_f(&j, "others_wait_s", s->others_wait_s, 6);
		json_kv_str(&j, "function", s->straggler_func[0] ? s->straggler_func : NULL);
		json_kv_f(&j, "function_share", s->straggler_func_share, 4);
		json_kv_str(&j, "what", what);
		json_obj_end(&j);
	} else {
		json_kv_null(&j, "straggler");
	}
	json_obj_close(&j, 0);
	return json_flush(&j);
}

int report_job_write(struct sink *out, const struct job_summary *s, bool json)
{
	return json ? write_json(out, s) : write_text(out, s);
}

static void path_text(struct sink *out, const struct job_summary *s, const struct job_path *p,
		      bool segments)
{
	double total = (p->t1 - p->t0) / 1e9;
	char lab[300];

	sink_printf(out, "Critical path of the job across %zu recordings: %.3f s\n", s->n, total);
	sink_printf(out, "\n%-26s %10s %10s %14s  %s\n", "Rank", "On path", "Computing",
		    "In collectives", "Its top function on the path");
	for (size_t r = 0; r < s->n; r++) {
		const struct job_rank_path *rp = &p->ranks[r];
		char on[32], cp[32], cm[32];

		if (rp->compute_s + rp->comm_s <= 0)
			continue;
		rank_label(&s->ranks[r], lab, sizeof(lab));
		fmt_ns(on, sizeof(on), ns(rp->compute_s + rp->comm_s));
		fmt_ns(cp, sizeof(cp), ns(rp->compute_s));
		fmt_ns(cm, sizeof(cm), ns(rp->comm_s));
		sink_printf(out, "%-26.26s %10s %10s %14s  ", lab, on, cp, cm);
		if (rp->func[0])
			sink_printf(out, "%s (%.0f%%)\n", rp->func, 100 * rp->func_share);
		else
			sink_puts(out, "-\n");
	}
	sink_puts(out, "# The path: a rank computing until its previous collective; the collective "
		       "from its last arrival;\n# before that, the work of the rank that arrived "
		       "last. Runs from the rank that ends last back to a start.\n");
	if (!segments)
		return;
	sink_printf(out, "\n%10s %12s  %-26s %s\n", "Start (s)", "Length", "Rank", "What");
	for (size_t i = p->nsegs; i-- > 0;) {
		const struct job_seg *g = &p->segs[i];
		char len[32];

		rank_label(&s->ranks[g->rank], lab, sizeof(lab));
		fmt_ns(len, sizeof(len), (uint64_t)(g->t1 - g->t0));
		if (g->coll)
			sink_printf(out, "%10.6f %12s  %-26.26s %s #%" PRIu64 "\n",
				    (g->t0 - p->t0) / 1e9, len, lab, g->coll, g->seq);
		else
			sink_printf(out, "%10.6f %12s  %-26.26s computing\n", (g->t0 - p->t0) / 1e9,
				    len, lab);
	}
}

static int path_json(struct sink *out, const struct job_summary *s, const struct job_path *p)
{
	struct json j;

	json_init(&j, out, 0);
	json_obj(&j);
	json_break(&j, 2);
	json_kv_u64(&j, "version", 1);
	json_kv_f(&j, "length_s", (p->t1 - p->t0) / 1e9, 6);
	json_arr_open(&j, 2, "ranks");
	for (size_t r = 0; r < s->n; r++) {
		const struct job_rank_path *rp = &p->ranks[r];

		json_obj_open(&j, 4, NULL);
		if (s->ranks[r].rank >= 0)
			json_kv_i64(&j, "rank", s->ranks[r].rank);
		else
			json_kv_null(&j, "rank");
		json_kv_str(&j, "host", s->ranks[r].host);
		json_kv_f(&j, "compute_s", rp->compute_s, 6);
		json_kv_f(&j, "collective_s", rp->comm_s, 6);
		json_kv_str(&j, "function", rp->func[0] ? rp->func : NULL);
		json_kv_f(&j, "function_share", rp->func_share, 4);
		json_obj_end(&j);
	}
	json_arr_close(&j, 2);
	json_arr_open(&j, 2, "segments");
	for (size_t i = p->nsegs; i-- > 0;) {
		const struct job_seg *g = &p->segs[i];

		json_obj_open(&j, 4, NULL);
		json_kv_i64(&j, "rank", s->ranks[g->rank].rank);
		json_kv_f(&j, "start_s", (g->t0 - p->t0) / 1e9, 6);
		json_kv_f(&j, "length_s", (g->t1 - g->t0) / 1e9, 6);
		json_kv_str(&j, "collective", g->coll);
		if (g->coll)
			json_kv_u64(&j, "seq", g->seq);
		json_obj_end(&j);
	}
	json_arr_close(&j, p->nsegs ? 2 : -1);
	json_obj_close(&j, 0);
	return json_flush(&j);
}

int report_job_path(struct sink *out, const struct job_summary *s, const struct job_path *p,
		    bool json, bool segments)
{
	if (json)
		return path_json(out, s, p);
	path_text(out, s, p, segments);
	return out->err;
}

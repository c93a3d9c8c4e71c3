// SPDX-License-Identifier: MIT
/* The off-CPU section of `eprof report`: blocked time by kind and the top blocking stacks. */
#include <inttypes.h>

#include "analysis/offcpu.h"
#include "analysis/stacks.h"
#include "util/json.h"
#include "util/sink.h"
#include "report.h"

#define OFFCPU_TOP 10
#define OFFCPU_FRAMES 1024 /* a stack's frames read (the recorder writes < 800) */
#define OFFCPU_SHOWN 6

static void part(struct sink *out, struct json *j, const char *s)
{
	if (j)
		json_str_add(j, s);
	else
		sink_puts(out, s);
}

/*
 * "user leaf <- caller <- ..." for a few frames, kernel frames left out unless all are kernel,
 * and, as the memory tables do, the Python line that blocked when it lies beyond them
 * (stack_pick_shown()); a JSON string with j, else text on out.
 */
static void stack_line(struct sink *out, struct json *j, const struct profile *p, uint32_t node)
{
	const struct frame *fr[OFFCPU_FRAMES], *shown[OFFCPU_SHOWN];
	size_t n = stack_frames_leaf_first(p, node, fr, OFFCPU_FRAMES), k = 0, gap;
	bool user = false, more;
	char b[512];

	for (size_t i = 0; i < n; i++)
		user |= fr[i]->kind == FRAME_USER || fr[i]->kind == FRAME_PYTHON;
	for (size_t i = 0; i < n; i++)
		if (!user || fr[i]->kind != FRAME_KERNEL)
			fr[k++] = fr[i];
	n = stack_pick_shown(p, fr, k, shown, OFFCPU_SHOWN, &gap, &more);
	if (j)
		json_str_begin(j);
	for (size_t i = 0; i < n; i++) {
		if (i)
			part(out, j, gap == i ? " <- ... <- " : " <- ");
		part(out, j, frame_display_name(p, shown[i], b, sizeof(b)));
	}
	if (!n)
		part(out, j, "[no stack]");
	if (j)
		json_str_end(j);
}

/* Blocked time by kind on one line, largest first. */
static void text_kinds(struct sink *out, const struct offcpu_summary *s)
{
	bool done[WAIT_OFFCPU_MAX] = {0};

	for (;;) {
		int best = -1;

		for (int k = WAIT_RUNNABLE; k < WAIT_OFFCPU_MAX; k++)
			if (s->by_kind[k] && !done[k] &&
			    (best < 0 || s->by_kind[k] > s->by_kind[best]))
				best = k;
		if (best < 0)
			return;
		done[best] = true;
		sink_printf(out, "  %s %.3f s (%.1f%%)", wait_kind_name(best),
			    s->by_kind[best] / 1e9, 100.0 * s->by_kind[best] / s->total_ns);
	}
}

static int write_json(struct sink *out, const struct profile *p, const struct offcpu_summary *s)
{
	struct json j;

	json_init_members(&j, out, 0);
	json_obj_open(&j, 2, "offcpu");
	json_kv_u64(&j, "intervals", s->intervals);
	json_kv_u64(&j, "total_ns", s->total_ns);
	json_obj_open(&j, -1, "by_kind");
	for (int k = WAIT_RUNNABLE; k < WAIT_OFFCPU_MAX; k++)
		json_kv_u64(&j, wait_kind_name(k), s->by_kind[k]);
	json_obj_end(&j);
	json_arr_open(&j, -1, "stacks");
	for (size_t i = 0; i < s->nstacks && i < OFFCPU_TOP; i++) {
		json_obj(&j);
		json_kv_str(&j, "kind", wait_kind_name(s->stacks[i].kind));
		json_kv_u64(&j, "count", s->stacks[i].count);
		json_kv_u64(&j, "ns", s->stacks[i].ns);
		json_key(&j, "stack");
		stack_line(out, &j, p, s->stacks[i].stack);
		json_obj_end(&j);
	}
	json_arr_end(&j);
	json_obj_end(&j);
	return json_flush(&j);
}

int report_offcpu(struct sink *out, const struct profile *p, const struct report_opts *o)
{
	struct offcpu_summary s;
	int err = offcpu_summarize(p, &o->hot.filter, &s);

	if (err)
		return err;
	if (!s.intervals) {
		offcpu_summary__free(&s);
		return 0;
	}
	if (o->json) {
		err = write_json(out, p, &s);
	} else {
		size_t rows = o->limit && o->limit < OFFCPU_TOP ? o->limit : OFFCPU_TOP;

		sink_printf(out,
			    "\nOff-CPU: %" PRIu64
			    " blocked intervals, %.3f s in all (%.1f%% with a known waker):",
			    s.intervals, s.total_ns / 1e9,
			    s.intervals ? 100.0 * s.wakers_known / s.intervals : 0);
		text_kinds(out, &s);
		sink_printf(out, "\n%12s %8s  %-9s %s\n", "Blocked(ms)", "Count", "Kind",
			    "Blocking stack (innermost first)");
		for (size_t i = 0; i < s.nstacks && i < rows; i++) {
			sink_printf(out, "%12.3f %8" PRIu64 "  %-9s ", s.stacks[i].ns / 1e6,
				    s.stacks[i].count, wait_kind_name(s.stacks[i].kind));
			stack_line(out, NULL, p, s.stacks[i].stack);
			sink_puts(out, "\n");
		}
		if (s.nstacks > rows)
			sink_printf(out,
				    "... %zu more stacks (flamegraph --offcpu shows them all)\n",
				    s.nstacks - rows);
	}
	offcpu_summary__free(&s);
	return err ? err : out->err;
}

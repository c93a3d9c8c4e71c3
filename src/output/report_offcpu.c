// SPDX-License-Identifier: MIT
/* The off-CPU section of `eprof report`: blocked time by kind and the top blocking stacks. */
#include <inttypes.h>

#include "../analysis/offcpu.h"
#include "../analysis/stacks.h"
#include "../util/sink.h"
#include "report.h"

#define OFFCPU_TOP 10
#define OFFCPU_FRAMES 256

/* "user leaf <- caller <- ..." for a few frames, kernel frames left out unless all are kernel. */
static void stack_line(struct sink *out, const struct profile *p, uint32_t node, bool json)
{
	const struct frame *fr[OFFCPU_FRAMES];
	size_t n = stack_frames(p, node, fr, OFFCPU_FRAMES, NULL), shown = 0, k = n;
	bool user = false;

	for (size_t i = 0; i < n; i++)
		user |= fr[i]->kind == FRAME_USER;
	while (k-- > 0 && shown < 6) {
		if (user && fr[k]->kind == FRAME_KERNEL)
			continue;
		if (shown++)
			sink_puts(out, " <- ");
		if (json)
			sink_json_str(out, profile__str(p, fr[k]->name));
		else
			sink_puts(out, profile__str(p, fr[k]->name));
	}
	if (!shown)
		sink_puts(out, "[no stack]");
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
		sink_printf(out,
			    ",\n  \"offcpu\": {\"intervals\": %" PRIu64 ", \"total_ns\": %" PRIu64
			    ", \"by_kind\": {",
			    s.intervals, s.total_ns);
		for (int k = WAIT_RUNNABLE; k < WAIT_OFFCPU_MAX; k++)
			sink_printf(out, "%s\"%s\": %" PRIu64, k > WAIT_RUNNABLE ? ", " : "",
				    wait_kind_name(k), s.by_kind[k]);
		sink_puts(out, "}, \"stacks\": [");
		for (size_t i = 0; i < s.nstacks && i < OFFCPU_TOP; i++) {
			sink_printf(out,
				    "%s{\"kind\": \"%s\", \"count\": %" PRIu64 ", \"ns\": %" PRIu64
				    ", \"stack\": \"",
				    i ? ", " : "", wait_kind_name(s.stacks[i].kind),
				    s.stacks[i].count, s.stacks[i].ns);
			stack_line(out, p, s.stacks[i].stack, true);
			sink_puts(out, "\"}");
		}
		sink_puts(out, "]}");
	} else {
		sink_printf(out,
			    "\nOff-CPU: %" PRIu64
			    " blocked intervals, %.3f s in all (%.1f%% with a known waker)\n",
			    s.intervals, s.total_ns / 1e9,
			    s.intervals ? 100.0 * s.wakers_known / s.intervals : 0);
		for (int k = WAIT_RUNNABLE; k < WAIT_OFFCPU_MAX; k++)
			if (s.by_kind[k])
				sink_printf(out, "  %-10s %10.3f s %6.1f%%\n", wait_kind_name(k),
					    s.by_kind[k] / 1e9, 100.0 * s.by_kind[k] / s.total_ns);
		sink_printf(out, "\n%12s %8s  %-9s %s\n", "Blocked(ms)", "Count", "Kind",
			    "Blocking stack (innermost first)");
		for (size_t i = 0; i < s.nstacks && i < OFFCPU_TOP; i++) {
			sink_printf(out, "%12.3f %8" PRIu64 "  %-9s ", s.stacks[i].ns / 1e6,
				    s.stacks[i].count, wait_kind_name(s.stacks[i].kind));
			stack_line(out, p, s.stacks[i].stack, false);
			sink_puts(out, "\n");
		}
	}
	offcpu_summary__free(&s);
	return out->err;
}

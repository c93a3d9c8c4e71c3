// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include "stacks.h"
#include "summary.h"

void profile_summarize(const struct profile *p, const struct sample_filter *f,
		       struct profile_summary *s)
{
	uint64_t start = profile__meta_u64(p, "start_ns", 0), end = profile__meta_u64(p, "end_ns", 0);
	struct stack_counts c;

	memset(s, 0, sizeof(*s));
	s->command = profile__meta(p, "command");
	if (!s->command)
		s->command = "?";
	s->rate = profile__meta_u64(p, "sample_rate", 0);
	s->ncpus = profile__meta_u64(p, "ncpus", 0);
	s->lost = p->stats[STAT_SAMPLES_LOST];
	if (!stack_counts(p, f, &c)) {
		uint8_t *cut = stacks_truncated(p);

		for (size_t i = 0; i < c.n; i++) {
			if (!c.samples[i])
				continue;
			s->samples += c.samples[i];
			s->weight += c.weight[i];
			if (cut ? cut[i] : stack_truncated(p, (uint32_t)i))
				s->truncated += c.samples[i];
			if (stack_leaf_unknown(p, i))
				s->unknown_samples += c.samples[i];
		}
		free(cut);
		stack_counts__free(&c);
	}
	/* A cut-off file has no end time: use its last sample. */
	if (!end)
		for (size_t i = 0; i < p->samples.n; i++)
			if (p->samples.v[i].ts > end)
				end = p->samples.v[i].ts;
	if (!start && p->samples.n)
		start = p->samples.v[0].ts;
	s->duration_s = end > start ? (end - start) / 1e9 : 0;
	s->cores = s->duration_s > 0 ? s->weight / 1e9 / s->duration_s : 0;
}


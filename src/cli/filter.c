// SPDX-License-Identifier: MIT
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/regions.h"
#include "model/profile.h"
#include "util/log.h"
#include "filter.h"

static int opt_time_range(const struct opt *o, const char *arg, void *field)
{
	return parse_time_range(arg, field);
}

const struct opt cli_filter_opts[] = {
	OPT_UINT("pid", 0, "PID", struct sample_filter, pid, 1, 0x7fffffff,
		 "only the samples of this process"),
	OPT_UINT("tid", 0, "TID", struct sample_filter, tid, 1, 0x7fffffff,
		 "only the samples of this thread"),
	OPT_END,
};

const struct opt cli_range_opts[] = {
	OPT_FUNC("time-range", 0, "S:E", opt_time_range,
		 "only seconds S to E from the start of the record\n"
		 "(either side may be empty: 2.5:  :10)"),
	OPT_END,
};

static int parse_seconds(const char *s, size_t len, double *out)
{
	char buf[64], *end;

	if (len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	errno = 0;
	*out = strtod(buf, &end);
	if (errno || end == buf || *end || !isfinite(*out) || *out < 0)
		return -EINVAL;
	return 0;
}

int parse_time_range(const char *arg, struct time_range *r)
{
	const char *colon = strchr(arg, ':');

	memset(r, 0, sizeof(*r));
	if (!colon || (colon == arg && !colon[1]))
		goto bad;
	if (colon > arg) {
		if (parse_seconds(arg, colon - arg, &r->from_s))
			goto bad;
		r->has_from = true;
	}
	if (colon[1]) {
		if (parse_seconds(colon + 1, strlen(colon + 1), &r->to_s))
			goto bad;
		r->has_to = true;
	}
	if (r->has_from && r->has_to && r->to_s <= r->from_s)
		goto bad;
	return 0;
bad:
	log_err("invalid --time-range '%s' (expected START:END in seconds from the start, "
		"e.g. 2.5:4, 3: or :10)",
		arg);
	return -EINVAL;
}

void time_range_apply(const struct time_range *r, const struct profile *p, struct sample_filter *f)
{
	uint64_t start = profile__meta_u64(p, "start_ns", 0);

	if (!r->has_from && !r->has_to)
		return;
	if (!start) {
		start = UINT64_MAX;
		for (size_t i = 0; i < p->samples.n; i++)
			if (p->samples.v[i].ts < start)
				start = p->samples.v[i].ts;
		if (start == UINT64_MAX)
			start = 0;
	}
	if (r->has_from)
		f->t0 = start + (uint64_t)llround(r->from_s * 1e9);
	if (r->has_to)
		f->t1 = start + (uint64_t)llround(r->to_s * 1e9);
	/* 0 means "open" in the filter: a window starting at time 0 starts at 1 ns */
	if (r->has_from && !f->t0)
		f->t0 = 1;
}

int region_filter_apply(const struct profile *p, const char *name, struct sample_filter *f,
			struct region_ranges **ranges)
{
	*ranges = region_ranges__new(p, name);
	if (!*ranges) {
		log_err("out of memory");
		return -ENOMEM;
	}
	if (!region_ranges__n(*ranges)) {
		log_err("no region named '%s' in this profile (eprof report lists them)", name);
		region_ranges__free(*ranges);
		*ranges = NULL;
		return -ENOENT;
	}
	f->match = region_ranges__match;
	f->match_arg = *ranges;
	return 0;
}

// SPDX-License-Identifier: MIT
/*
 * `eprof flamegraph --folded` on untrusted files: one "frames COUNT" line
 * per stack, and the counts add up to the samples read.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "analysis/stacks.h"
#include "model/profile.h"
#include "output/folded.h"
#include "util/sink.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

/* Sum of the counts; fails on a malformed line. */
static uint64_t check_lines(const char *out, size_t len)
{
	const char *p = out, *end = out + len;
	uint64_t sum = 0;

	while (p < end) {
		const char *nl = memchr(p, '\n', end - p), *sp;
		char *e;
		uint64_t v;

		FUZZ_CHECK(nl, "last folded line without a newline");
		FUZZ_CHECK(nl > p, "empty folded line");
		sp = nl;
		while (sp > p && sp[-1] != ' ')
			sp--;
		FUZZ_CHECK(sp > p + 1 && sp < nl, "folded line without 'stack COUNT': %.*s",
			   (int)(nl - p), p);
		v = strtoull(sp, &e, 10);
		FUZZ_CHECK(e == nl, "bad count in folded line: %.*s", (int)(nl - p), p);
		sum += v;
		p = nl + 1;
	}
	return sum;
}

static void one(const struct profile *p, const struct folded_opts *o)
{
	struct sink *s = sink_mem();
	const char *out;
	size_t len;
	int err;

	if (!s)
		return;
	err = folded_write(s, p, o);
	out = sink_mem_data(s, &len);
	FUZZ_CHECK(strlen(out) == len, "NUL byte in folded output");
	if (!err) {
		uint64_t sum = check_lines(out, len);

		if (!o->weight_ns && !o->filter.pid && !o->filter.tid)
			FUZZ_CHECK(sum == p->samples.n, "folded counts %" PRIu64 " != %zu samples",
				   sum, p->samples.n);
	}
	sink_close(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct profile *p = fuzz_read_profile(data, size);
	struct folded_opts o;

	if (!p)
		return 0;
	if (fuzz_stack_frames(p, STACK_MAX_FRAMES) > FUZZ_MAX_OUTPUT_FRAMES) { /* size, not a bug */
		profile__free(p);
		return 0;
	}
	memset(&o, 0, sizeof(o));
	one(p, &o);
	o.lines = true;
	o.no_comm = true;
	one(p, &o);
	o.weight_ns = true;
	if (p->samples.n)
		o.filter.tid = p->samples.v[0].tid;
	one(p, &o);
	profile__free(p);
	return 0;
}

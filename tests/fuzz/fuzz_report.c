// SPDX-License-Identifier: MIT
/*
 * `eprof report` on untrusted files: the reader, the hot-function and thread
 * analyses and the text and JSON writers. The JSON must always parse.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "model/profile.h"
#include "output/report.h"
#include "util/sink.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

static void one(struct profile *p, const struct report_opts *o)
{
	struct sink *s = sink_mem();
	const char *out;
	size_t len;
	int err;

	if (!s)
		return;
	err = report_write(s, p, o);
	out = sink_mem_data(s, &len);
	FUZZ_CHECK(strlen(out) == len || !o->json, "NUL byte in the JSON report");
	if (!err && o->json)
		FUZZ_CHECK(fuzz_json_valid(out, len), "report --json is not valid JSON:\n%.*s",
			   len > 4000 ? 4000 : (int)len, out);
	sink_close(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct profile *p = fuzz_read_profile(data, size);
	struct report_opts o;
	uint32_t pid = 0, tid = 0;

	if (!p)
		return 0;
	if (p->samples.n) {
		pid = p->samples.v[p->samples.n / 2].pid;
		tid = p->samples.v[p->samples.n / 2].tid;
	}
	memset(&o, 0, sizeof(o));
	o.path = "fuzz.data";
	o.threads = true;
	one(p, &o); /* text, all rows, threads */
	o.json = true;
	o.hot.sort = SORT_TOTAL;
	one(p, &o);
	o.hot.by_line = true;
	o.hot.inlined = true;
	o.limit = 5;
	o.hot.filter.pid = pid;
	one(p, &o);
	o.json = false;
	o.hot.filter.tid = tid;
	one(p, &o);
	profile__free(p);
	return 0;
}
